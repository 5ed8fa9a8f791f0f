// The HF-eager oracle: what transformers' eager attention (`eager_attention_forward` in
// models/llama/modeling_llama.py, under the 4D mask of masking_utils.py) returns for a ModelCase.
// It runs LibTorch's CPU ops in the order and dtypes transformers uses (matmul and the scale in the model
// dtype, softcap, the additive mask at finfo.min, softmax in fp32 then cast, matmul with V), so its
// rounding is transformers' own; tools/hf_crosscheck/crosscheck.py checks it against transformers itself.
#pragma once

#include "core/case_tensors.h"
#include "core/model_case.h"
#include "core/model_tensors.h"
#include "oracles/hf_masks.h"

namespace flashcheck::hf {

struct EagerResult {
  HostTensor out;  // [B, Lq, Hq, D], values exact in the case's dtype
  EagerMask mask;  // what was allowed, and which rows are not comparable
};

// Eager as the profile's releases compute it (oracles/hf_masks.h: eager_mask).
EagerResult eager_attention(const ModelCase& m, const ModelTensors& t, Profile p = Profile::kHfMain);

// The same attention in fp64 with the same allowed keys (the exact value eager approximates), [B, Lq, Hq, D],
// with each element's first-order fp32 rounding sensitivity in units of u: reference/host/exact_row.h,
// the kernel-level reference's own row routine. Rows without an allowed key are 0. The integration
// property bounds both paths' errors with it.
struct ExactAttention {
  std::vector<double> out;
  std::vector<double> noise;
};
ExactAttention exact_attention(const ModelCase& m, const ModelTensors& t, const EagerMask& mask);

// The backward (training): gradients of <dout, out> (dout [B, Lq, Hq, D]) w.r.t. q [B * Lq, Hq, D], k and v
// [B * Lk, Hkv, D]. eager_gradients: autograd through eager_attention's own ops, in the model dtype (the baseline
// of the integration property's backward); exact_gradients: in fp64 under the same allowed keys, with each
// element's fp32 sensitivity and the magnitude of its terms (reference/host/exact_row.h's backward).
GradientResult eager_gradients(const ModelCase& m, const ModelTensors& t, const HostTensor& dout, Profile p = Profile::kHfMain);
GradientResult exact_gradients(const ModelCase& m, const ModelTensors& t, const EagerMask& mask, const HostTensor& dout);

}  // namespace flashcheck::hf
