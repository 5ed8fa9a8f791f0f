// The device reference: the same definition as reference/host/attention.h, computed on the GPU in fp32
// with the same sensitivity formula (core/tolerance.h), one warp per (query row, head), logits
// recomputed in a second pass instead of stored. It is simple on purpose and checked against the fp64
// host reference (attention_test.cc, label gpu). Also the device twin of the low-precision baseline.
// Host-callable, no CUDA headers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/case_tensors.h"
#include "core/device/device_case.h"
#include "core/kernel_case.h"

namespace flashcheck::device {

// Device buffers of one result (packed like AttentionResult); null where the result has no such part.
struct DeviceResult {
  float* out = nullptr;               // (total_q, H, dv)
  float* lse = nullptr;               // (total_q, H); -inf on empty rows
  std::uint8_t* empty = nullptr;      // (total_q, H); reference only
  float* noise = nullptr;             // (total_q, H, dv); reference only: fp32 sensitivity, units of u
  float* lse_noise = nullptr;         // (total_q, H); reference only
};

// Each of the functions below computes a bf16 or fp16 case with the tensor-core kernel (attention_tc.h)
// where tc_unsupported_reason allows, and with the SIMT kernels (one warp per row and head) otherwise.

// fp32 attention; empty rows follow `empty_row`. Buffers live in device slots named `slot`.
DeviceResult device_reference(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot = "truth");

// The low-precision baseline (reference/host/baseline.h describes the rounding steps).
DeviceResult device_baseline(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot = "baseline");

// Both at once: the tensor-core kernel computes them from the same logits in one launch.
std::pair<DeviceResult, DeviceResult> device_reference_and_baseline(const DeviceCase& dc, EmptyRow empty_row,
                                                                    const std::string& truth_slot = "truth",
                                                                    const std::string& baseline_slot = "baseline");

// The SIMT kernels whatever the case: the yardstick of the tensor-core path in the GPU tests.
DeviceResult device_reference_simt(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot = "truth.simt");
DeviceResult device_baseline_simt(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot = "baseline.simt");

// Copies a device result to the host form (doubles).
AttentionResult download(const DeviceCase& dc, const DeviceResult& r);

}  // namespace flashcheck::device
