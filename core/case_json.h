// JSON form of KernelCase. The fixture format (core/fixture.h) embeds it; its schema is versioned there.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/kernel_case.h"

namespace flashcheck {

nlohmann::json case_to_json(const KernelCase& c);

// Parses and validates. Throws InputError naming `source`, the field (under `path`) and the reason.
KernelCase case_from_json(const nlohmann::json& j, const std::string& source, const std::string& path);

}  // namespace flashcheck
