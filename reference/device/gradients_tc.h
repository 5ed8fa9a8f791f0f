// The tensor-core gradient reference: dQ, dK and dV of a bf16 or fp16 backward case to fp32 accuracy, their
// sensitivities and terms, and the low-precision baseline, on mma.sync tensor cores in the manner of flash-attention 2's
// backward (gradients_tc.cu explains the accuracy; docs/TOLERANCE.md states what the rule takes from it). The fp64 SIMT
// kernels of gradients.cu stay the yardstick and take every case this one does not. Host-callable, no CUDA headers.
#pragma once

#include <array>
#include <string>

#include "core/device/device_case.h"

namespace flashcheck::device {

// Why the tensor-core path does not compute this case's gradients, or "" when it does: the one place of that
// decision. FLASHCHECK_REFERENCE=simt switches it off for every case.
std::string tc_gradient_unsupported_reason(const DeviceCase& dc);

// Where the results go: device arrays in GradientResult's packed layouts, [0] dQ, [1] dK, [2] dV, zeroed by the
// caller (elements no row or key reaches stay zero, as the host reference leaves them). Null arrays of `baseline`
// skip the baseline.
struct TcGradientOutputs {
  std::array<double*, 3> truth{}, noise{}, terms{};
  std::array<float*, 3> baseline{};
};

// Requires tc_gradient_unsupported_reason(dc) == "". Work buffers live in device slots named after `slot`.
void tc_reference_gradients(const DeviceCase& dc, const TcGradientOutputs& out, const std::string& slot);

}  // namespace flashcheck::device
