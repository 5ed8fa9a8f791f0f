#include "kernels/torch/torch_device_tensors.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <limits>

#include "kernels/torch/torch_tensors.h"

namespace flashcheck::torch_cuda {

at::Tensor view(const float* p, const std::vector<std::int64_t>& sizes) {
  return at::from_blob(const_cast<float*>(p), sizes, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
}

at::Tensor packed_q(const device::DeviceCase& dc) {
  const KernelCase& c = dc.kcase();
  return view(dc.inputs().q, {dc.geometry().q_rows, c.heads, c.head_dim}).to(torch_bridge::scalar_type(c.dtype));
}

at::Tensor packed_kv(const device::DeviceCase& dc, bool value) {
  const KernelCase& c = dc.kcase();
  const std::int64_t dim = value ? c.v_head_dim : c.head_dim, rows = dc.geometry().kv_rows;
  const at::Tensor t = view(value ? dc.inputs().v : dc.inputs().k, {rows, c.kv_heads, dim}).to(torch_bridge::scalar_type(c.dtype));
  if (c.kv_strides == KvStrides::kExpanded) return t.expand({rows, c.heads, dim});
  if (c.kv_strides == KvStrides::kGapped) {
    at::Tensor big = at::full({rows, c.kv_heads + 1, dim + 8}, std::numeric_limits<float>::quiet_NaN(), t.options());
    at::Tensor v = big.narrow(1, 0, c.kv_heads).narrow(2, 0, dim);
    v.copy_(t);
    return v;
  }
  return t;
}

void write_out(const at::Tensor& rows, device::DeviceOutput& out) {
  view(out.out(), {rows.size(0), rows.size(1), rows.size(2)}).copy_(rows);
}

void write_lse(const at::Tensor& rows, device::DeviceOutput& out) {
  view(out.lse(), {rows.size(0), rows.size(1)}).copy_(rows);
  out.lse_written = true;
}

void recycle_nan_block(const KernelCase& c, std::int64_t elems) {
  if (elems <= 0) return;
  at::empty({elems}, at::TensorOptions().dtype(torch_bridge::scalar_type(c.dtype)).device(at::kCUDA))
      .fill_(std::numeric_limits<float>::quiet_NaN());
}

at::Tensor int32_device(const std::vector<std::int32_t>& v) {
  at::Tensor h = at::empty({static_cast<std::int64_t>(v.size())}, at::TensorOptions().dtype(at::kInt));
  std::copy(v.begin(), v.end(), h.data_ptr<std::int32_t>());
  return h.to(at::kCUDA);
}

}  // namespace flashcheck::torch_cuda
