// The fuzz runner for the integration property: RapidCheck generates ModelCases, each is judged by
// check_integration on one profile and kernel, failures are shrunk under the same budget as kernel-level
// runs and saved as fixtures (model_cases). On hf-main, failures that are documented divergences are
// counted by id instead of reported.
#pragma once

#include "oracles/hf_flash_path.h"
#include "properties/fuzz.h"
#include "properties/model_generators.h"

namespace flashcheck {

// Uses the case/time/seed/shrink/out/reproduce/progress fields of FuzzOptions; sizes from `limits`.
FuzzReport run_model_fuzz(hf::Profile profile, Kernel& k, const FuzzOptions& o, const ModelGenLimits& limits = {},
                          hf::PathDefect defect = hf::PathDefect::kNone);

// Features a long integration run on hf-main must reach (properties/model_generators.h classify()).
const std::vector<std::string>& required_model_coverage();

}  // namespace flashcheck
