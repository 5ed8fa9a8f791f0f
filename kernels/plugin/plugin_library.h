// Loading plugins (include/flashcheck/plugin.h): dlopen, ABI version, the kernel table and each kernel's
// contract, all checked before anything is registered. Every problem is an InputError naming the plugin.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/plugin/plugin_kernel.h"

struct FlashcheckPlugin;
struct FlashcheckKernel;

namespace flashcheck {

// Opens a plugin library and checks its table (no kernel runs). Throws InputError naming `path`.
const FlashcheckPlugin& open_plugin(const std::string& path);

// How messages name a plugin: its path, and its own name when it gives one.
std::string plugin_label(const FlashcheckPlugin& p, const std::string& path);

// Registers the plugin's kernel table. Throws InputError naming the plugin, the kernel and the field.
// (An on-demand resolver, FlashcheckPlugin::resolve, is registered by the caller: resolving may start an
// interpreter, which belongs in a worker process, cli/plugins.cc.)
void load_plugin(const std::string& path, Registry& r);

// The spec of kernel `name` from its declared contract (JSON text), without its entry; `has_backward` says whether
// the kernel has a backward entry, which the contract must declare (and only then). Throws InputError naming
// `source` and the kernel.
PluginKernelSpec plugin_kernel_spec(const std::string& source, const std::string& name, const char* contract_json,
                                    bool has_backward);

// A plugin's kernel entry in the current layout: itself for a version 2 plugin; for a version 1 plugin a copy of
// its four fields with no backward, kept for the life of the process.
const FlashcheckKernel* current_layout(const FlashcheckPlugin& p, const FlashcheckKernel* k);
// Entry i of the plugin's kernel table, in the current layout.
const FlashcheckKernel* kernel_entry(const FlashcheckPlugin& p, std::uint32_t i);

// Paths in FLASHCHECK_PLUGINS (separated by ':'), in order.
std::vector<std::string> plugin_paths_from_environment();

}  // namespace flashcheck
