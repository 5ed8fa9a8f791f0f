#include "cli/plugins.h"

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "core/error.h"
#include "core/files.h"
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
  if (std::string installed = installed_path("lib/flashcheck/libflashcheck_python.so"); !installed.empty()) return installed;
#if defined(FLASHCHECK_PYTHON_BRIDGE_BUILD)
  return FLASHCHECK_PYTHON_BRIDGE_BUILD;
#else
  return "";
#endif
}

// A kernel named on demand: the plugin resolves the name in a worker process (resolving may start an
// interpreter or a CUDA context, which the harness's parent process must not), and sends the contract
// back; the worker that later runs the kernel resolves it again for itself.
constexpr double kResolveSeconds = 600;  // an interpreter's start and a package's import (torch, flashinfer) included

Registry::Resolver on_demand(const std::string& source, const std::string& path) {
  return [source, path](std::string_view name_view) -> std::unique_ptr<Kernel> {
    const std::string name(name_view);
    std::string contract, error;
    bool has_backward = false;
    const WorkerBody body = [&](WorkerChannel& ch) {
      ch.begin(name);  // so that the limit holds: a module that blocks at import is killed, not waited for
      const FlashcheckPlugin& plugin = open_plugin(path);  // in the worker: the parent never runs plugin code
      char why[2048] = {0};
      const FlashcheckKernel* k = current_layout(plugin, plugin.resolve(name.c_str(), why, sizeof why));
      why[sizeof why - 1] = '\0';
      if (k && k->contract_json) {
        ch.send('W', k->backward ? "1" : "0");  // whether the kernel has a backward
        ch.send('C', k->contract_json);
      } else {
        ch.send('F', why[0] ? why : "the plugin could not resolve the name");
      }
      ch.end();
    };
    const WorkerExit x = run_worker(
        body,
        [&](char tag, const std::string& payload) {
          if (tag == 'W') has_backward = payload == "1";
          else (tag == 'C' ? contract : error) = payload;
        },
        {true, kResolveSeconds});
    if (contract.empty()) {
      if (error.empty()) error = !x.error.empty() ? x.error : "the worker resolving it died: " + x.reason;
      throw InputError(source, name, error);
    }
    PluginKernelSpec spec = plugin_kernel_spec(source, name, contract.c_str(), has_backward);
    spec.entry = [source, name, path]() {
      const FlashcheckPlugin& plugin = open_plugin(path);
      char why[2048] = {0};
      const FlashcheckKernel* k = current_layout(plugin, plugin.resolve(name.c_str(), why, sizeof why));
      why[sizeof why - 1] = '\0';
      if (!k) throw InputError(source, name, why);
      return k;
    };
    return make_plugin_kernel(std::move(spec));
  };
}

// What a plugin declares, read by a worker: the parent process never loads a plugin, so a library that faults while it
// is mapped (a truncated file: SIGBUS), crashes in a constructor or its entry point, ends the process or hangs costs
// that worker and an error naming the plugin, never the harness or its exit status.
struct ProbedKernel {
  std::string name, contract;
  bool backward = false;
};
struct ProbedPlugin {
  std::string label, resolve_prefix;
  std::vector<ProbedKernel> kernels;
};

constexpr double kPluginLoadSeconds = 120;

ProbedPlugin probe_plugin(const std::string& path) {
  using nlohmann::json;
  // dlopen of a FIFO or a device would wait on it: refused before any process opens it.
  std::error_code ec;
  if (const fs::file_status st = fs::status(path, ec); !ec && fs::exists(st) && !fs::is_regular_file(st))
    throw InputError(path, "", "not a regular file (a folder, a FIFO or a device): a plugin is a shared library file");
  const auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  ProbedPlugin out;
  bool complete = false;
  std::optional<InputError> refused;
  const WorkerBody body = [&](WorkerChannel& ch) {
    ch.begin(path);
    try {
      // The child's registry is the parent's copy: load_plugin checks the table and the names against it.
      load_plugin(path, builtin_registry());
      const FlashcheckPlugin& p = open_plugin(path);
      ch.send('P', dump({{"label", plugin_label(p, path)},
                         {"prefix", p.resolve ? p.resolve_prefix : ""}}));
      for (std::uint32_t i = 0; i < p.num_kernels; ++i) {
        const FlashcheckKernel& k = *kernel_entry(p, i);
        ch.send('K', dump({{"name", k.name}, {"contract", k.contract_json}, {"backward", k.backward != nullptr}}));
      }
      ch.send('D', "");
    } catch (const InputError& e) {
      ch.send('R', dump({{"source", e.source()}, {"field", e.field()}, {"reason", e.reason()}}));
    }
    ch.end();
  };
  const WorkerExit x = run_worker(
      body,
      [&](char tag, const std::string& payload) {
        const json j = json::parse(payload, nullptr, false);
        if (tag == 'P') {
          out.label = j.value("label", path);
          out.resolve_prefix = j.value("prefix", "");
        } else if (tag == 'K') {
          out.kernels.push_back({j.value("name", ""), j.value("contract", ""), j.value("backward", false)});
        } else if (tag == 'R') {
          refused.emplace(j.value("source", path), j.value("field", ""), j.value("reason", ""));
        } else if (tag == 'D') {
          complete = true;
        }
      },
      {true, kPluginLoadSeconds});
  if (refused) throw *refused;
  if (complete) return out;
  if (x.timed_out)
    throw InputError(path, "", fmt::format("loading the plugin did not finish within {:.0f} s", kPluginLoadSeconds));
  if (!x.error.empty()) throw InputError(path, "", fmt::format("loading the plugin failed: {}", x.error));
  // Killed by a signal, or exit() called by a constructor or the entry point: no table came back either way.
  throw InputError(path, "", fmt::format("loading the plugin ended the process that loaded it ({}): refused", x.reason));
}

// Registers a probed plugin's kernels; each kernel's entry opens the plugin in the process that runs it (a worker).
void register_probed(const std::string& path, const ProbedPlugin& p, Registry& r) {
  for (std::uint32_t i = 0; i < p.kernels.size(); ++i) {
    const ProbedKernel& k = p.kernels[i];
    PluginKernelSpec s = plugin_kernel_spec(p.label, k.name, k.contract.c_str(), k.backward);
    s.entry = [path, i] { return kernel_entry(open_plugin(path), i); };
    r.add(make_plugin_kernel(std::move(s)));
  }
  if (!p.resolve_prefix.empty()) r.add_resolver(p.resolve_prefix, on_demand(path, path));
}

// Where the project's own Python kernels (flashcheck_kernels) are: installed next to the executable
// (<prefix>/share/flashcheck/python), else in this build's source tree.
std::string python_kernels_path() {
  if (std::string installed = installed_path("share/flashcheck/python"); !installed.empty()) return installed;
  return FLASHCHECK_PYTHON_KERNELS_SOURCE;
}

}  // namespace

std::vector<std::string> python_kernel_search_path() {
  std::vector<std::string> dirs;
  const char* env = std::getenv("FLASHCHECK_PYTHONPATH");
  std::istringstream parts(env ? env : "");
  for (std::string d; std::getline(parts, d, ':');)
    if (!d.empty()) dirs.push_back(d);
  dirs.push_back(std::filesystem::current_path().string());
  return dirs;
}

bool load_plugins(const std::vector<std::string>& paths) {
  Registry& r = builtin_registry();
  // The Python bridge imports kernels from FLASHCHECK_PYTHONPATH; the project's own come first.
  const char* extra = std::getenv("FLASHCHECK_PYTHONPATH");
  const std::string pythonpath = python_kernels_path() + (extra && *extra ? ":" + std::string(extra) : "");
  ::setenv("FLASHCHECK_PYTHONPATH", pythonpath.c_str(), 1);
  std::vector<std::string> all = paths;
  for (const std::string& p : plugin_paths_from_environment()) all.push_back(p);
  try {
    for (const std::string& path : all) register_probed(path, probe_plugin(path), r);
    // py:package.module:function through the Python bridge, when this build has it. Opened only by the workers
    // that resolve and run a Python kernel.
    if (const std::string bridge = python_bridge_path(); !bridge.empty()) r.add_resolver("py:", on_demand(bridge, bridge));
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck: {}\n", e.what());
    return false;
  }
  return true;
}

}  // namespace flashcheck::cli
