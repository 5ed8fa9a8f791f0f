// The gate: the regression check CI runs. The fixture corpus replayed on every kernel, a bounded run of
// every property on every kernel (kernel level, then the integration property on hf-main), and the mutant
// kill run proving the properties still catch what they claim. Everything runs in worker processes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/fixture.h"
#include "kernels/kernel.h"
#include "search/fuzz_report.h"
#include "gate/mutant_matrix.h"
#include "search/replay.h"

namespace flashcheck {

struct GatePlan {
  std::int64_t cases = 120;  // per kernel and property
  std::uint64_t seed = 1;
  std::string found_dir;     // where findings are saved as fixtures
  bool mutants = true;
};

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

// `log` gets one line per finished step (no trailing newline).
GateResult run_gate(const std::vector<Fixture>& fixtures, const std::vector<Kernel*>& kernels, const GatePlan& plan,
                    const std::function<void(const std::string&)>& log);

}  // namespace flashcheck
