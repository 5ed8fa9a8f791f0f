// Test-only: varied varlen cases of realistic small shapes for the device tests (GQA groups 1-3, head dims 64 and 128,
// bf16 and fp16, causal or not, 1-4 sequences of different lengths), each with its own seed.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kernel_case.h"

namespace flashcheck {

inline std::vector<KernelCase> varied_device_cases(int count, std::int64_t max_len) {
  std::vector<KernelCase> cases;
  for (int i = 0; i < count; ++i) {
    KernelCase c;
    c.kv_heads = 1 + i % 4;
    c.heads = c.kv_heads * (1 + i % 3);
    c.head_dim = c.v_head_dim = i % 2 ? 128 : 64;
    c.dtype = i % 5 ? DType::kBF16 : DType::kF16;
    c.causal = i % 3 != 0;
    for (int b = 0; b <= i % 4; ++b) {
      const std::int64_t q = 1 + (37 * i + 101 * b) % max_len;
      c.seqs.push_back({.q_len = q, .k_len = q + (13 * i + b) % 200});
    }
    c.data.seed = 1000 + static_cast<std::uint64_t>(i);
    cases.push_back(c);
  }
  return cases;
}

}  // namespace flashcheck
