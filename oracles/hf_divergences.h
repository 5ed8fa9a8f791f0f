// The documented ways in which transformers' current flash path (profile hf-main) and its eager attention
// disagree (fixtures/issues/hf-F*.json, F4-F21). The integration property reports a failing case that
// matches one of them as that known divergence rather than as a new finding.
#pragma once

#include <optional>
#include <string>

#include "core/model_case.h"

namespace flashcheck::hf {

struct Divergence {
  std::string id;    // "F16"
  std::string what;  // one line: the trigger and the wrong behaviour
};

// The first documented divergence whose trigger the case has, for hf-main; nullopt when none applies.
std::optional<Divergence> known_divergence(const ModelCase& m);

// The same for hf-main's SDPA path (S1: the softcap is dropped).
std::optional<Divergence> known_sdpa_divergence(const ModelCase& m);

// The upstream report whose symptom an error message of a real release on case `m` is ("transformers#39814: ..."), so
// that `flashcheck hf-live` names a known bug by its issue; nullopt for messages no report describes, or a case outside
// the report's scenario (the same message from another cause: packed position_ids [4, 2] raise #39814's error in
// releases where #39814 itself is fixed).
std::optional<std::string> upstream_symptom(std::string_view error, const ModelCase& m);

}  // namespace flashcheck::hf
