// The tolerance rule of core/compare.h evaluated on the GPU: the kernel's output, the device truth and
// the device baseline never leave the device; only the statistics (and the three values at the worst
// element) come back. Host-callable, no CUDA headers.
#pragma once

#include "core/compare.h"
#include "core/device/device_case.h"
#include "core/verdict.h"
#include "reference/device/attention.h"

namespace flashcheck::device {

// `out` (total_q, H, dv) and `lse` (total_q, H, or null) are device pointers.
Comparison device_compare(const DeviceCase& dc, const float* out, const float* lse, const DeviceResult& truth,
                          const DeviceResult& baseline, EmptyRow convention, const ToleranceRule& rule);

}  // namespace flashcheck::device
