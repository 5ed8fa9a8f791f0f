// The three renderings of what `flashcheck gate` found (gate/gate.h): JUnit XML for CI systems, a markdown summary
// (per kernel x property: cases, failures, worst ratio, unsupported counts and reasons) and JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "gate/gate.h"
#include "report/junit.h"

namespace flashcheck::cli {

std::string gate_markdown(const GateResult& g);
nlohmann::json gate_json(const GateResult& g);
JunitSuite gate_suite(const GateResult& g);  // the report layer's model (report/junit.h)
std::string gate_junit(const GateResult& g);

// Refuses (OutputError) when `dir` holds a junit.xml, summary.md or report.json the gate did not write, or a link or
// other non-file in their place (core/files.h check_replaceable), unless `force`: called before the gate runs.
void check_gate_outputs(const std::string& dir, bool force);
// Writes junit.xml, summary.md and report.json into `dir`, each atomically, after the same check.
void write_gate_files(const GateResult& g, const std::string& dir, bool force);

}  // namespace flashcheck::cli
