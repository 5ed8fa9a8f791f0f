#include "kernels/plugin/plugin_library.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "core/error.h"
#include "flashcheck/plugin.h"
#include "kernels/contract_json.h"
#include "kernels/plugin/plugin_kernel.h"

namespace flashcheck {

const FlashcheckPlugin& open_plugin(const std::string& path) {
  // RTLD_LOCAL: two plugins may define the same internal symbols.
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw InputError(path, "", fmt::format("cannot load the plugin: {}", ::dlerror()));
  auto entry = reinterpret_cast<FlashcheckPluginEntry>(::dlsym(lib, FLASHCHECK_PLUGIN_ENTRY));
  if (!entry)
    throw InputError(path, FLASHCHECK_PLUGIN_ENTRY, "not exported: a plugin exports `const FlashcheckPlugin* flashcheck_plugin(void)`");
  const FlashcheckPlugin* p = entry();
  if (!p) throw InputError(path, FLASHCHECK_PLUGIN_ENTRY, "returned NULL");
  if (p->abi_version != FLASHCHECK_PLUGIN_ABI_VERSION && p->abi_version != 1)
    throw InputError(path, "abi_version",
                     fmt::format("the plugin was built for ABI version {}, this flashcheck speaks versions 1 and {}: "
                                 "rebuild it against this flashcheck's include/flashcheck/plugin.h",
                                 p->abi_version, FLASHCHECK_PLUGIN_ABI_VERSION));
  if (p->num_kernels > 0 && !p->kernels) throw InputError(path, "kernels", "NULL with num_kernels > 0");
  if (p->resolve && (!p->resolve_prefix || !*p->resolve_prefix))
    throw InputError(path, "resolve_prefix", "a plugin that resolves names must say which prefix it answers");
  return *p;
}

std::string plugin_label(const FlashcheckPlugin& p, const std::string& path) {
  return p.name && *p.name ? fmt::format("{} (plugin {})", path, p.name) : path;
}

const FlashcheckKernel* current_layout(const FlashcheckPlugin& p, const FlashcheckKernel* k) {
  if (!k || p.abi_version != 1) return k;
  static std::map<const FlashcheckKernel*, std::unique_ptr<FlashcheckKernel>> copies;
  static std::mutex m;
  const std::lock_guard<std::mutex> lock(m);
  auto& copy = copies[k];
  if (!copy) {
    const auto* v1 = reinterpret_cast<const FlashcheckKernelV1*>(k);
    copy.reset(new FlashcheckKernel{v1->name, v1->contract_json, v1->run, v1->user_data, nullptr});
  }
  return copy.get();
}

const FlashcheckKernel* kernel_entry(const FlashcheckPlugin& p, std::uint32_t i) {
  if (p.abi_version == 1)
    return current_layout(p, reinterpret_cast<const FlashcheckKernel*>(reinterpret_cast<const FlashcheckKernelV1*>(p.kernels) + i));
  return p.kernels + i;
}

PluginKernelSpec plugin_kernel_spec(const std::string& source, const std::string& name, const char* contract_json,
                                    bool has_backward) {
  if (!contract_json) throw InputError(source, name + ".contract_json", "NULL");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(contract_json);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source, name + ".contract_json", fmt::format("not JSON: {}", e.what()));
  }
  PluginKernelSpec s;
  s.name = name;
  s.plugin = source;
  s.contract = contract_from_json(j, fmt::format("{}: kernel {}: contract", source, name));
  s.device = j.value("device", std::string("cpu"));
  if (s.device != "cpu" && s.device != "cuda")
    throw InputError(source, name + ".contract_json.device", fmt::format("\"{}\": must be \"cpu\" or \"cuda\"", s.device));
  if (s.device == "cpu" && s.contract.kv_strides != std::vector<KvStrides>{KvStrides::kContiguous})
    throw InputError(source, name + ".contract_json.kv_strides", "cpu plugin kernels receive contiguous K/V only: declare [\"contiguous\"]");
  if (s.contract.layouts != std::vector<QLayout>{QLayout::kVarlen})
    throw InputError(source, name + ".contract_json.layouts", "plugin kernels receive packed (varlen) rows: declare [\"varlen\"]");
  if (s.contract.backward.available && !has_backward)
    throw InputError(source, name + ".backward", "NULL, but the contract declares a backward");
  if (!s.contract.backward.available && has_backward)
    throw InputError(source, name + ".contract_json.backward",
                     "missing: the kernel has a backward entry, so its contract must declare it (an object, {} at least)");
  return s;
}

void load_plugin(const std::string& path, Registry& r) {
  const FlashcheckPlugin& p = open_plugin(path);
  const std::string source = plugin_label(p, path);
  std::set<std::string> seen;
  for (std::uint32_t i = 0; i < p.num_kernels; ++i) {
    const FlashcheckKernel& k = *kernel_entry(p, i);
    const std::string field = fmt::format("kernels[{}]", i);
    if (!k.name || !*k.name) throw InputError(source, field + ".name", "missing");
    if (!k.run) throw InputError(source, field + ".run", "NULL");
    if (!seen.insert(k.name).second || r.find_registered(k.name))
      throw InputError(source, field + ".name", fmt::format("\"{}\" is already the name of another kernel", k.name));
    PluginKernelSpec s = plugin_kernel_spec(source, k.name, k.contract_json, k.backward != nullptr);
    s.entry = [&k] { return &k; };
    r.add(make_plugin_kernel(std::move(s)));
  }
}

std::vector<std::string> plugin_paths_from_environment() {
  std::vector<std::string> paths;
  const char* env = std::getenv("FLASHCHECK_PLUGINS");
  if (!env) return paths;
  std::string all(env);
  std::size_t start = 0;
  while (start <= all.size()) {
    const std::size_t end = all.find(':', start);
    const std::string one = all.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!one.empty()) paths.push_back(one);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return paths;
}

}  // namespace flashcheck
