// What a fuzz run found: counts, findings (one per failure signature), coverage, how close passes came to
// failing. Shared by the driver (search/fuzz.h), the gate, the mutant matrix and the CLI's reports.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/kernel_case.h"
#include "core/model_case.h"
#include "core/verdict.h"

namespace flashcheck {

struct Finding {
  KernelCase minimized;                 // kernel-level properties
  std::optional<ModelCase> model_case;  // model-level properties: the minimized model case
  Verdict verdict;                      // of the minimized case
  std::int64_t case_index = 0;          // 1-based index of the first failing case in the run
  int shrink_steps = 0;                 // accepted shrinks
  int shrink_attempts = 0;
  bool shrink_budget_exhausted = false;
  std::string reproduce;  // RC_PARAMS value that replays the failure through the same generator
  std::string fixture;    // where it was saved ("" when the run has no output folder)
  std::int64_t count = 1;  // failing cases with this signature that it stands for
};

// Failures with the same signature (property, verdict kind, and for an error its message with the numbers blanked,
// for a failure or crash the features of the minimized case) are one finding: a long campaign on a broken kernel
// reports each bug once, with its smallest case and its count.
std::string failure_signature(const std::string& property, const Finding& f);
// The size a finding's case is ranked by: of two failures with one signature (or one root cause), the smaller is kept.
std::int64_t case_size(const Finding& f);
// The same signature without the property: the failing condition alone, which search/root_causes.h groups across runs.
std::string cause_signature(const Finding& f);

// A passing case that used at least this share of its bound is a close call: reports name it (closest_pass), since a
// rule that correct kernels come near is where a false alarm at volume would come from.
inline constexpr double kCloseCallBoundUse = 0.5;

struct FuzzReport {
  std::string kernel, property;  // property: the property's label ("conformance", "integration/hf-main")
  std::uint64_t seed = 0;
  std::int64_t cases = 0;        // judged cases (pass + fail)
  std::int64_t unsupported = 0;  // generated cases the property could not judge, by reason below
  std::map<std::string, std::int64_t> unsupported_reasons;
  std::int64_t crashes = 0;       // cases that killed the worker (isolated runs only)
  std::vector<Finding> findings;  // one per failure signature, the smallest case seen for it
  std::int64_t failures = 0;      // failing cases found (before de-duplication)
  double seconds = 0;
  double worst_ratio = 0;      // largest error ratio (err / baseline err) among passing cases
  double worst_bound_use = 0;  // largest err / bound among passing cases: how close a pass came to failing
  std::string closest_pass;    // that case's summary (a campaign keeps failing cases only: this says which came near)
  std::map<std::string, std::int64_t> coverage;
  std::vector<std::string> coverage_missing;  // supported features no case reached
  std::vector<std::string> coverage_refused;  // model level: generated, but refused by the contract every time
  std::string not_applicable;                 // the property cannot run on this kernel at all (reason)
  // Failures that are documented divergences (the integration property on profiles that list them), by
  // id: counted, not reported as findings.
  std::map<std::string, std::int64_t> known_divergences;

  bool ok() const { return findings.empty() && crashes == 0 && coverage_missing.empty() && not_applicable.empty(); }
};

// Keeps one finding per signature, the smallest, with the counts of both summed; `save` writes a new
// smallest one (returning its path), and the fixture it replaces is deleted unless `keep_replaced`.
void add_finding(FuzzReport& r, Finding f, const std::function<std::string(const Finding&)>& save,
                 bool keep_replaced = false);

// Adds `part` (another chunk or run of the same kernel and property) into `into`: counts, findings (one per
// signature), worst ratios, coverage. Seconds and coverage_missing are the caller's to settle. The fixture of
// a finding replaced by a smaller one is deleted unless `keep_replaced` (files of other runs: a merge).
void merge_reports(FuzzReport& into, const FuzzReport& part, bool keep_replaced = false);

// One line for a property run: "120 cases in 1.2 s, 0 findings, worst ratio 0.61, ..." or why it did not apply.
std::string report_line(const FuzzReport& r);

nlohmann::json to_json(const FuzzReport& r);
FuzzReport fuzz_report_from_json(const nlohmann::json& j);

}  // namespace flashcheck
