// The small model case the oracle and integration tests start from: 4 query heads over 2 KV heads, head dim 16,
// a cache when `past` > 0. Tests change what they exercise from there.
#pragma once

#include <cstdint>

#include "core/model_case.h"

namespace flashcheck::testing {

inline ModelCase small_model_case(DType dtype, std::uint64_t seed, std::int64_t batch, std::int64_t q_len,
                                  std::int64_t past = 0) {
  ModelCase m;
  m.dtype = dtype;
  m.batch = batch;
  m.q_len = q_len;
  m.past = past;
  m.use_cache = past > 0;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.data.seed = seed;
  return m;
}

}  // namespace flashcheck::testing
