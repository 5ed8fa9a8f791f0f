// Replaying fixtures: every case of every fixture on every chosen kernel, each in an isolated child
// process, judged against the fixture's expectations. Used by `flashcheck replay` and `flashcheck gate`.
#pragma once

#include <string>
#include <vector>

#include "core/fixture.h"
#include "core/verdict.h"
#include "kernels/kernel.h"
#include "search/isolated_jobs.h"

namespace flashcheck {

struct ReplayRecord {
  std::string fixture;  // path
  std::size_t case_index = 0;  // into the fixture's cases, or its model_cases when model_case is set
  bool model_case = false;     // the integration property on one HF profile (verdict.kernel "profile@kernel")
  std::string case_summary;
  Verdict verdict;
  bool has_expectation = false;
  Expectation expected;
  bool as_expected = true;
  // pass | fail | xfail (failed as the fixture expects) | xpass (expected to fail, passed) | unsupported |
  // error | crash | timeout
  std::string outcome;
};

// Every fixture under `paths` (files, or folders walked for *.json), loaded as load_fixture does, then
// checked against what only the registry knows: the fixture's property exists, and each case's `expect`
// names a kernel some build of flashcheck has. Throws InputError naming the file, the field and the reason.
std::vector<Fixture> load_fixtures(const std::vector<std::string>& paths);

std::vector<ReplayRecord> replay_fixtures(const std::vector<Fixture>& fixtures, const std::vector<Kernel*>& kernels,
                                          const IsolationOptions& iso);

// Judges a verdict against an optional expectation (no expectation: pass, or unsupported by contract).
void judge(ReplayRecord& r);

}  // namespace flashcheck
