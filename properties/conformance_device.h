// The conformance check on the GPU: data generated on the device, the kernel's output, the fp32 device
// reference and the device baseline compared there (reference/device). CUDA builds only; a CPU build
// has no kernel that runs on the device.
#pragma once

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "core/verdict.h"
#include "kernels/kernel.h"

namespace flashcheck {

// `tensors` null: generate on the device; else upload them (captured fixtures).
Verdict check_conformance_device(Kernel& k, const KernelCase& c, const CaseTensors* tensors);

}  // namespace flashcheck
