// Console and JSON reporting shared by the commands.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "search/fuzz.h"
#include "properties/property.h"
#include "search/replay.h"

namespace flashcheck::cli {

// Looks up kernel names (when `names` is empty: every kernel under test this machine can run); prints
// the problem and returns false on an unknown name.
bool resolve_kernels(const std::vector<std::string>& names, std::vector<Kernel*>& out);

// Property names ("all" expands to every kernel-level property); prints the problem and returns false on an unknown name.
bool resolve_properties(const std::vector<std::string>& names, std::vector<const Property*>& out);

// The end-of-run report of `flashcheck fuzz`: counts, speed, findings, unsupported reasons, coverage.
// How printed commands (replay, reproduce) invoke flashcheck (set_command_name: cli/commands.h).
const std::string& command_name();

void print_fuzz_report(const FuzzReport& r);

void print_replay_line(const ReplayRecord& r);
void print_replay_summary(const std::vector<ReplayRecord>& records);
nlohmann::json replay_json(const std::vector<ReplayRecord>& records);

}  // namespace flashcheck::cli
