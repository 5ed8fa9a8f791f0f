// How large generated cases may be. Kept apart from the generators so that callers (the CLI, the
// driver's options) set sizes without including RapidCheck.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kernel_case.h"

namespace flashcheck {

struct GenLimits {
  std::int64_t max_len = 192;   // longest sequence drawn uniformly, before the work budget caps it
  std::int64_t max_batch = 4;
  std::int64_t max_heads = 16;
  double work_budget = 3e6;     // sum over sequences of Lq * Lk * H * (d + dv): keeps a case in milliseconds
  // Narrowing of the kernel's contract (empty: all it takes): `fuzz --dtype bf16 --head-dim 128`.
  std::vector<DType> dtypes;
  std::vector<std::int64_t> head_dims;
  // Features every case must have (`fuzz --require`), named as search/coverage.h classifies them ("causal" for either
  // alignment); the generator turns them on where it can and the run discards cases that still lack one. With
  // gqa_group > 0, exactly H = gqa_group * Hk.
  std::vector<std::string> require;
  std::int64_t gqa_group = 0;
};

struct ModelGenLimits {
  std::int64_t max_batch = 4;
  std::int64_t max_q_len = 48;
  std::int64_t max_past = 32;
  std::int64_t max_heads = 16;
  // Training calls only (the backward's integration properties): no past, no cache, not from generate, no decode.
  bool training = false;
};

}  // namespace flashcheck
