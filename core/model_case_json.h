// JSON form of ModelCase, used by model-level fixtures (core/fixture.h) and `flashcheck export`.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/model_case.h"

namespace flashcheck {

nlohmann::json model_case_to_json(const ModelCase& m);

// Parses and validates. Throws InputError naming `source`, the field (under `path`) and the reason.
ModelCase model_case_from_json(const nlohmann::json& j, const std::string& source, const std::string& path);

}  // namespace flashcheck
