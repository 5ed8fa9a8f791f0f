// LibTorch views of device case inputs and writes into the device output buffer. Only the CUDA adapters
// include this (and through it ATen).
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <vector>

#include "core/device/device_case.h"
#include "core/device/device_output.h"

namespace flashcheck::torch_cuda {

// A float32 CUDA tensor over device memory the harness owns (no copy).
at::Tensor view(const float* p, const std::vector<std::int64_t>& sizes);

// Q as (total_q, H, d) in the case's dtype.
at::Tensor packed_q(const device::DeviceCase& dc);

// K or V storage rows as (rows, heads, dim) in the case's dtype, presented with the case's K/V strides:
// contiguous, gapped (rows and heads padded; the innermost dimension stays dense) or expanded (one KV head
// broadcast to `heads` with stride 0).
at::Tensor packed_kv(const device::DeviceCase& dc, bool value);

// Writes a (total_q, H, dv) result (any dtype, any strides) into the output buffer as float32.
void write_out(const at::Tensor& rows, device::DeviceOutput& out);
// Writes a (total_q, H) float32 LSE.
void write_lse(const at::Tensor& rows, device::DeviceOutput& out);

// The fused ops allocate their own output from PyTorch's caching allocator, so a row a kernel never writes
// would show whatever an earlier case left in that memory: invisible in a fresh process, random in a
// campaign. Call this just before the op: it fills a block of the output's size and dtype with NaN and
// frees it, and the allocator hands that block out next, so an unwritten row reads as NaN.
void recycle_nan_block(const KernelCase& c, std::int64_t elems);

// cu_seqlens-style int32 device tensors.
at::Tensor int32_device(const std::vector<std::int32_t>& v);

}  // namespace flashcheck::torch_cuda
