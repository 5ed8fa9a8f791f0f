// Kernels that live outside flashcheck: a plugin's kernel (include/flashcheck/plugin.h) behind the Kernel
// interface. The adapter hands the case to the plugin as DLPack tensors in the case's dtype, on the device
// the contract names, and reads the output back; kernels/torch/plugin_kernel.cc does the conversions.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kernels/contract.h"
#include "kernels/kernel.h"

struct FlashcheckKernel;

namespace flashcheck {

struct PluginKernelSpec {
  std::string name;
  std::string plugin;  // the library it came from, for messages
  std::string device;  // "cpu" or "cuda"
  Contract contract;
  // The plugin's entry for this kernel. Called in the process that runs the kernel (a worker), so that a
  // plugin that starts an interpreter or a CUDA context does it there; throws InputError if it cannot.
  std::function<const FlashcheckKernel*()> entry;
};

std::unique_ptr<Kernel> make_plugin_kernel(PluginKernelSpec spec);

}  // namespace flashcheck
