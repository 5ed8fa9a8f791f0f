// RapidCheck generator of ModelCases: what one attention layer of a transformers model can receive.
// Structural picks shrink towards the plainest input (batch 1, one new token, no past, no mask, default
// position_ids, MHA, no window), so a failure shrinks to the smallest case that still shows it.
#pragma once

#include <cstdint>
#include <rapidcheck.h>

#include "core/model_case.h"
#include "search/limits.h"

namespace flashcheck {

rc::Gen<ModelCase> model_case_gen(const ModelGenLimits& lim = {});


}  // namespace flashcheck
