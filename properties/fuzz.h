// The fuzz runner: RapidCheck generates cases inside a kernel's contract, a property judges each one,
// failures are shrunk under a budget and saved as fixtures. Used by `flashcheck fuzz`, `flashcheck gate`
// and the mutant kill matrix.
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
#include "kernels/kernel.h"
#include "properties/generators.h"
#include "properties/property.h"

namespace flashcheck {

// RapidCheck shrinks without limit; past either bound the runner stops reporting failures, so the greedy
// descent ends, and keeps the last failing case it saw as the minimum.
struct ShrinkBudget {
  int attempts = 400;
  double seconds = 60;
};

struct FuzzOptions {
  std::int64_t cases = 1000;  // cases to judge (0: until the time limit)
  double seconds = 0;         // wall-clock limit (0: none)
  std::uint64_t seed = 1;
  int max_size = 100;         // RapidCheck size: sizes sweep 0..max_size over a run
  GenLimits limits;
  ShrinkBudget shrink;
  bool stop_at_first_failure = false;  // the mutant matrix wants cases-to-first-kill, not a campaign
  std::string out_dir;                 // where found fixtures and the in-flight case go ("": nowhere)
  std::string reproduce;                // RC_PARAMS "reproduce=..." string: replay that one failure
  std::function<void(std::int64_t cases, std::int64_t failures, double seconds)> on_progress;
  // Used by the isolated runner to follow a worker process.
  int first_chunk = 0;
  std::function<void(int chunk)> on_chunk;
  std::function<void()> on_case_start, on_case_end;
};

struct Finding {
  KernelCase minimized;         // kernel-level properties
  std::optional<ModelCase> model_case;  // the integration property: the minimized model-level case
  Verdict verdict;              // of the minimized case
  std::int64_t case_index = 0;  // 1-based index of the first failing case in the run
  int shrink_steps = 0;         // accepted shrinks
  int shrink_attempts = 0;
  bool shrink_budget_exhausted = false;
  std::string reproduce;        // RC_PARAMS value that replays the failure through the same generator
  std::string fixture;          // where it was saved ("" when out_dir is empty)
};

// Failures with the same signature (property, verdict kind, the features of the minimized case) are one
// finding: a long campaign on a broken kernel reports each bug once, with its smallest case.
std::string failure_signature(const std::string& property, const Finding& f);

struct FuzzReport {
  std::string kernel, property;
  std::uint64_t seed = 0;
  std::int64_t cases = 0;         // judged cases (pass + fail)
  std::int64_t unsupported = 0;   // generated cases the property could not judge, by reason below
  std::map<std::string, std::int64_t> unsupported_reasons;
  std::int64_t crashes = 0;       // cases that killed the worker (isolated runs only)
  std::vector<Finding> findings;  // one per failure signature, the smallest case seen for it
  std::int64_t failures = 0;      // failing cases found (before de-duplication)
  double seconds = 0;
  double worst_ratio = 0;         // largest error ratio (err / baseline err) among passing cases
  double worst_bound_use = 0;     // largest err / bound among passing cases: how close a pass came to failing
  std::map<std::string, std::int64_t> coverage;
  std::vector<std::string> coverage_missing;  // supported features no case reached
  std::string not_applicable;     // the property cannot run on this kernel at all (reason)
  // The integration property on hf-main: failing cases that are documented divergences, by id. They are
  // counted, not reported as findings.
  std::map<std::string, std::int64_t> known_divergences;

  bool ok() const { return findings.empty() && crashes == 0 && coverage_missing.empty() && not_applicable.empty(); }
};

// Runs in this process.
FuzzReport run_fuzz(Kernel& k, const Property& p, const FuzzOptions& o);

// Runs in a child process: a kernel that crashes or hangs becomes a crash finding (its case is the
// in-flight descriptor, saved as a fixture) and the run resumes after it with the remaining budget.
FuzzReport run_fuzz_isolated(Kernel& k, const Property& p, const FuzzOptions& o, double case_timeout_seconds = 120);

// Adds `part` (another chunk or run of the same kernel and property) into `into`: counts, findings (one per
// signature), worst ratios, coverage. Seconds and coverage_missing are the caller's to settle.
void merge_reports(FuzzReport& into, const FuzzReport& part);

nlohmann::json to_json(const FuzzReport& r);
FuzzReport fuzz_report_from_json(const nlohmann::json& j);

}  // namespace flashcheck
