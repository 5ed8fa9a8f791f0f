// One bug, one row: the findings of many runs (properties, kernels, shards, campaigns) grouped by the signature of
// their failing condition (verdict kind, and an error's message with its numbers blanked, or a failure's or crash's
// case features), with where each cause appeared and how often. A cause that matches a committed fixture's recorded
// bug (same kernel and verdict, and the fixture's reason_contains in the reason, or a case with the same features)
// is labelled with that fixture; a new one stands out.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/verdict.h"
#include "search/fuzz_report.h"

namespace flashcheck {

// A bug a fixture records: a kernel's expected non-pass verdict on one of its kernel-level cases.
struct KnownDefect {
  std::string fixture;  // the file
  std::string kernel;
  VerdictKind kind = VerdictKind::kFail;
  std::string reason_contains;        // "" when the fixture gives none
  std::vector<std::string> features;  // of the case (search/coverage.h classify)
};

// Every recorded bug of the fixtures under `paths` (files, or folders walked for *.json). Throws InputError as
// load_fixtures does.
std::vector<KnownDefect> known_defects(const std::vector<std::string>& paths);

struct RootCause {
  std::string signature;               // the condition: "fail/causal/q>k", "error/cuDNN Frontend error: ..."
  VerdictKind kind = VerdictKind::kFail;
  std::string reason;                  // the smallest case's reason
  std::vector<std::string> kernels, properties;
  std::int64_t count = 0;              // failing cases, all runs together
  std::string smallest_kernel, smallest_summary, smallest_fixture;
  std::string known_fixture;           // the fixture that records it, "" for a new cause
};

// Groups the findings of `reports` (any kernels, properties, shards), largest count first.
std::vector<RootCause> root_causes(const std::vector<FuzzReport>& reports, const std::vector<KnownDefect>& known);

// "3 root causes (1 known): ..." and one line per cause; "" without findings.
std::string root_cause_lines(const std::vector<RootCause>& causes);
nlohmann::json to_json(const std::vector<RootCause>& causes);

}  // namespace flashcheck
