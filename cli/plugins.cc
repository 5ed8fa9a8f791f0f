#include "cli/plugins.h"

#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>

#include "core/error.h"
#include "flashcheck/plugin.h"
#include "kernels/plugin/plugin_library.h"
#include "search/worker.h"

namespace flashcheck::cli {
namespace {

namespace fs = std::filesystem;

// The Python bridge library: FLASHCHECK_PYTHON_BRIDGE, else next to an installed flashcheck
// (<prefix>/lib/flashcheck), else the one of this build tree.
std::string python_bridge_path() {
  if (const char* env = std::getenv("FLASHCHECK_PYTHON_BRIDGE"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "lib" / "flashcheck" / "libflashcheck_python.so";
    if (fs::exists(installed, ec)) return installed.string();
  }
#if defined(FLASHCHECK_PYTHON_BRIDGE_BUILD)
  return FLASHCHECK_PYTHON_BRIDGE_BUILD;
#else
  return "";
#endif
}

// A kernel named on demand: the plugin resolves the name in a worker process (resolving may start an
// interpreter or a CUDA context, which the harness's parent process must not), and sends the contract
// back; the worker that later runs the kernel resolves it again for itself.
Registry::Resolver on_demand(const std::string& source, const FlashcheckPlugin& plugin) {
  return [source, &plugin](std::string_view name_view) -> std::unique_ptr<Kernel> {
    const std::string name(name_view);
    std::string contract, error;
    bool has_backward = false;
    const WorkerBody body = [&](WorkerChannel& ch) {
      char why[2048] = {0};
      const FlashcheckKernel* k = current_layout(plugin, plugin.resolve(name.c_str(), why, sizeof why));
      why[sizeof why - 1] = '\0';
      if (k && k->contract_json) {
        ch.send('W', k->backward ? "1" : "0");  // whether the kernel has a backward
        ch.send('C', k->contract_json);
      } else {
        ch.send('F', why[0] ? why : "the plugin could not resolve the name");
      }
    };
    const WorkerExit x = run_worker(
        body,
        [&](char tag, const std::string& payload) {
          if (tag == 'W') has_backward = payload == "1";
          else (tag == 'C' ? contract : error) = payload;
        },
        {true, 600});
    if (contract.empty()) {
      if (error.empty()) error = !x.error.empty() ? x.error : "the worker resolving it died: " + x.reason;
      throw InputError(source, name, error);
    }
    PluginKernelSpec spec = plugin_kernel_spec(source, name, contract.c_str(), has_backward);
    spec.entry = [source, name, &plugin]() {
      char why[2048] = {0};
      const FlashcheckKernel* k = current_layout(plugin, plugin.resolve(name.c_str(), why, sizeof why));
      why[sizeof why - 1] = '\0';
      if (!k) throw InputError(source, name, why);
      return k;
    };
    return make_plugin_kernel(std::move(spec));
  };
}

// Where the project's own Python kernels (flashcheck_kernels) are: installed next to the executable
// (<prefix>/share/flashcheck/python), else in this build's source tree.
std::string python_kernels_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "flashcheck" / "python";
    if (fs::exists(installed, ec)) return installed.string();
  }
  return FLASHCHECK_PYTHON_KERNELS_SOURCE;
}

}  // namespace

bool load_plugins(const std::vector<std::string>& paths) {
  Registry& r = builtin_registry();
  // The Python bridge imports kernels from FLASHCHECK_PYTHONPATH; the project's own come first.
  const char* extra = std::getenv("FLASHCHECK_PYTHONPATH");
  const std::string pythonpath = python_kernels_path() + (extra && *extra ? ":" + std::string(extra) : "");
  ::setenv("FLASHCHECK_PYTHONPATH", pythonpath.c_str(), 1);
  std::vector<std::string> all = paths;
  for (const std::string& p : plugin_paths_from_environment()) all.push_back(p);
  try {
    for (const std::string& path : all) {
      load_plugin(path, r);
      const FlashcheckPlugin& p = open_plugin(path);  // already open: the same table
      if (p.resolve) r.add_resolver(p.resolve_prefix, on_demand(path, p));
    }
    // py:package.module:function through the Python bridge, when this build has it. Loaded lazily: a run
    // that names no Python kernel never opens it.
    if (const std::string bridge = python_bridge_path(); !bridge.empty())
      r.add_resolver("py:", [bridge](std::string_view name) {
        const FlashcheckPlugin& p = open_plugin(bridge);
        return on_demand(bridge, p)(name);
      });
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck: {}\n", e.what());
    return false;
  }
  return true;
}

}  // namespace flashcheck::cli
