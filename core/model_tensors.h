// The tensors of a ModelCase, generated from its recipe by the same counter-based function as kernel
// cases: q [B, Lq, Hq, D] and k, v [B, Lk, Hkv, D] in transformers' flash layout (after RoPE and the cache
// update), values exact in the case's dtype. Query i of row b is position P + i; static-cache slots
// beyond P + Lq hold zeros, as a freshly allocated StaticCache does.
#pragma once

#include "core/case_tensors.h"
#include "core/model_case.h"

namespace flashcheck {

struct ModelTensors {
  HostTensor q;
  HostTensor k;
  HostTensor v;
};

ModelTensors materialize(const ModelCase& m);

}  // namespace flashcheck
