// Moving host values in and out of LibTorch tensors. The only header of kernels/torch that includes ATen;
// keep it out of everything that does not call a PyTorch kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace flashcheck::torch_bridge {

c10::ScalarType scalar_type(DType t);

// A CPU tensor of `shape` in dtype `t` holding `values` (row-major). Values are exact in `t`.
at::Tensor from_values(const std::vector<float>& values, const std::vector<std::int64_t>& shape, DType t);

// Row-major float copy of any tensor (any device, dtype, strides).
std::vector<float> to_values(const at::Tensor& t);

}  // namespace flashcheck::torch_bridge
