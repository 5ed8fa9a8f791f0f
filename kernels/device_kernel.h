// Base of the GPU kernel adapters: the host run() uploads the case to the device, calls run_device and
// downloads the output, so every property (and every fixture with captured tensors) works unchanged;
// the conformance property takes the device path directly.
#pragma once

#include <string>

#include "kernels/kernel.h"

namespace flashcheck {

// A description of a sticky CUDA error in this process (the context is unusable), or "".
std::string cuda_sticky_error();

class DeviceKernel : public Kernel {
 public:
  bool on_device() const override { return true; }
  std::string_view device() const override { return "cuda"; }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override;
  std::string unavailable_reason() const override;
  std::string sticky_error() const override { return cuda_sticky_error(); }
};

}  // namespace flashcheck
