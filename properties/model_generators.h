// RapidCheck generator of ModelCases: what one attention layer of a transformers model can receive.
// Structural picks shrink towards the plainest input (batch 1, one new token, no past, no mask, default
// position_ids, MHA, no window), so a failure shrinks to the smallest case that still shows it.
#pragma once

#include <cstdint>
#include <rapidcheck.h>

#include "core/model_case.h"

namespace flashcheck {

struct ModelGenLimits {
  std::int64_t max_batch = 4;
  std::int64_t max_q_len = 48;
  std::int64_t max_past = 32;
  std::int64_t max_heads = 16;
};

rc::Gen<ModelCase> model_case_gen(const ModelGenLimits& lim = {});

// Feature names of a model case ("mask-left", "pos-packed", "past", "gqa", "window", ...), for coverage
// and failure signatures.
std::vector<std::string> classify(const ModelCase& m);

}  // namespace flashcheck
