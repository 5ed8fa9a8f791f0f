// A kernel's contract as JSON: what `flashcheck list --json` prints for each kernel, and what a plugin
// declares (include/flashcheck/plugin.h). One schema, read and written here.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "kernels/contract.h"
#include "kernels/kernel.h"

namespace flashcheck {

// {"name", "device", "summary", "features": {...}, "dtypes", ...} (and "mutant" for mutants).
nlohmann::json kernel_json(const Kernel& k);

// The contract fields of `j` (name and device are the caller's). Throws InputError naming `source`, the
// field and the reason for anything missing, mistyped or out of range; fields left out keep the defaults
// of Contract except "dtypes", which is required.
Contract contract_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace flashcheck
