// The three renderings of what `flashcheck gate` found (search/gate.h): JUnit XML for CI systems, a markdown summary
// (per kernel x property: cases, failures, worst ratio, unsupported counts and reasons) and JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "search/gate.h"

namespace flashcheck::cli {

std::string gate_markdown(const GateResult& g);
nlohmann::json gate_json(const GateResult& g);
std::string gate_junit(const GateResult& g);

// Writes junit.xml, summary.md and report.json into `dir`.
void write_gate_files(const GateResult& g, const std::string& dir);

}  // namespace flashcheck::cli
