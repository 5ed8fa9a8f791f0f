// The tensor-core reference: the fp32-accurate reference and the low-precision baseline of a bf16 (or fp16) case in
// one kernel, on mma.sync tensor cores (attention_tc.cu explains the accuracy; docs/TOLERANCE.md states
// the bound). device_reference / device_baseline (attention.h) choose it when tc_unsupported_reason says
// nothing, and the SIMT kernels of attention.cu otherwise. Host-callable, no CUDA headers.
#pragma once

#include <string>

#include "core/device/device_case.h"
#include "reference/device/attention.h"

namespace flashcheck::device {

// Why the tensor-core path does not compute this case, or "" when it does: the one place of that
// decision. FLASHCHECK_REFERENCE=simt in the environment switches the path off for every case.
std::string tc_unsupported_reason(const DeviceCase& dc);

// The first pass's figures of one (query row, head): the reference's running max and sum of exponentials (m, z;
// -inf and 0 for a row without keys), its logit sensitivity (core/tolerance.h logit_sensitivity), and the
// baseline's max and sum. The gradient reference (gradients_tc.cu) starts from them.
struct TcRowStats {
  float m, z, logit_sens, mb, zb;
};

// Writes the reference into `truth` and the baseline into `base`; a result whose `out` is null is not
// written, and `stats`, a device array of (total_q, H), only where given. Requires tc_unsupported_reason(dc) == "".
void tc_reference_and_baseline(const DeviceCase& dc, EmptyRow empty_row, const DeviceResult& truth,
                               const DeviceResult& base, TcRowStats* stats = nullptr);

}  // namespace flashcheck::device
