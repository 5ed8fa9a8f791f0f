// grad-conformance on the GPU: the case and its dO generated on the device, the kernel's dQ, dK and dV written
// there, the fp64 reference gradients and their baseline computed there, and the gradient rule of core/compare.h
// applied there (reference/device/gradients.h, reference/device/gradient_compare.h): only the statistics come back.
// The host path (properties/gradient_properties.cc) copies the inputs, the gradients and nine reference arrays
// across instead, which made the check host-bound (docs/PERFORMANCE.md). CUDA builds only.
#pragma once

#include "core/kernel_case.h"
#include "core/verdict.h"
#include "kernels/kernel.h"

namespace flashcheck {

// For a backward case inside the kernel's contract and a kernel with has_device_backward(): fills the verdict's
// kind, comparison and reason.
void check_grad_conformance_device(Kernel& k, const KernelCase& c, Verdict& v);

}  // namespace flashcheck
