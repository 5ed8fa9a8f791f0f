// Greedy shrinking of a model case judged outside this process (tools/hf_live/live.py judges a real
// transformers release): one round offers every one-step simplification at once, the caller judges them in one
// batch, and the first that still fails the same way becomes the case. RapidCheck's shrinking needs the
// generator's choice tree, which a fixture case or a case judged by another program does not have.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/model_case.h"

namespace flashcheck {

// Every valid one-step simplification of `m`, simplest-first: one batch row, fewer heads, a smaller head dim,
// one query or past token fewer, no window, softcap, scale, mask or position_ids, no cache object.
std::vector<ModelCase> shrink_candidates(const ModelCase& m);

struct ShrinkOutcome {
  ModelCase smallest;
  int steps = 0;     // accepted simplifications
  int attempts = 0;  // candidates judged
  bool budget_exhausted = false;
};

// `still_fails(batch)` returns the index of the first candidate of the batch that fails the same way, or nullopt.
ShrinkOutcome shrink_model_case(const ModelCase& m,
                                const std::function<std::optional<std::size_t>(const std::vector<ModelCase>&)>& still_fails,
                                int max_rounds);

}  // namespace flashcheck
