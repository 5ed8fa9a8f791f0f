#include "kernels/torch/torch_tensors.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <cstring>

namespace flashcheck::torch_bridge {

c10::ScalarType scalar_type(DType t) {
  switch (t) {
    case DType::kF16: return c10::ScalarType::Half;
    case DType::kBF16: return c10::ScalarType::BFloat16;
    default: return c10::ScalarType::Float;
  }
}

at::Tensor from_values(const std::vector<float>& values, const std::vector<std::int64_t>& shape, DType t) {
  // from_blob does not own the memory: the conversion (or clone) below makes the owning copy.
  at::Tensor view = at::from_blob(const_cast<float*>(values.data()), shape, at::TensorOptions().dtype(at::kFloat));
  return t == DType::kF32 ? view.clone() : view.to(scalar_type(t));
}

std::vector<float> to_values(const at::Tensor& t) {
  const at::Tensor f = t.to(at::kCPU).to(at::kFloat).contiguous();
  std::vector<float> v(static_cast<std::size_t>(f.numel()));
  if (!v.empty()) std::memcpy(v.data(), f.data_ptr<float>(), v.size() * sizeof(float));
  return v;
}

}  // namespace flashcheck::torch_bridge
