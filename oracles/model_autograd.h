// Gradients of <dO, out> w.r.t. a model case's q [B, Lq, Hq, D], k and v [B, Lk, Hkv, D] through LibTorch's
// autograd: the backward of transformers' own ops (eager attention, torch's SDPA) in the order the oracles run
// them. Internal to oracles/ (it includes ATen).
#pragma once

#include <ATen/core/Tensor.h>

#include "core/case_tensors.h"
#include "core/model_case.h"
#include "core/model_tensors.h"

namespace flashcheck::hf::detail {

// q, k, v as [B, L, H, D] CPU tensors in the case's dtype; leaves of the autograd graph when `grad`.
struct Leaves {
  at::Tensor q, k, v;
};
Leaves model_leaves(const ModelCase& m, const ModelTensors& t, bool grad);

// dq [B * Lq, Hq, D], dk and dv [B * Lk, Hkv, D] of <dout, out> (dout [B, Lq, Hq, D]); an input `out` does not
// depend on gets zeros.
GradientResult model_gradients(const ModelCase& m, const Leaves& x, const at::Tensor& out, const HostTensor& dout);

}  // namespace flashcheck::hf::detail
