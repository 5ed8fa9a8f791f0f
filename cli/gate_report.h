// What `flashcheck gate` found, and its three renderings: JUnit XML for CI systems, a markdown summary
// (per kernel x property: cases, failures, worst ratio, unsupported counts and reasons) and JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "properties/fuzz.h"
#include "properties/mutant_matrix.h"
#include "properties/replay.h"

namespace flashcheck::cli {

struct GateResult {
  std::uint64_t seed = 0;
  std::int64_t cases_per_run = 0;
  std::vector<ReplayRecord> replay;
  std::vector<FuzzReport> runs;
  bool ran_mutants = false;
  std::vector<MutantRow> mutants;
  double seconds = 0;

  bool ok() const;
};

// One line for a property run: "120 cases, 0 findings, worst ratio 0.61" or why it failed.
std::string gate_line(const FuzzReport& r);

std::string gate_markdown(const GateResult& g);
nlohmann::json gate_json(const GateResult& g);
std::string gate_junit(const GateResult& g);

// Writes junit.xml, summary.md and report.json into `dir`.
void write_gate_files(const GateResult& g, const std::string& dir);

}  // namespace flashcheck::cli
