// Runs jobs in a child process so that a kernel that crashes or hangs does not take the harness (or the
// records of the jobs before it) down: the job in flight becomes a `crash` or `timeout` verdict and a
// fresh child carries on with the next job.
//
// The parent only forks and reads results; it must not have started threads (LibTorch's OpenMP pool, a
// CUDA context) before the first fork, so callers keep every kernel call inside `job`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/verdict.h"

namespace flashcheck {

struct IsolationOptions {
  bool enabled = true;            // false: run jobs in this process (debuggers, sanitizers)
  double timeout_seconds = 300;   // per job; <= 0 disables the limit
};

// Job i returns its verdicts (one per kernel or property it covered). `describe(i)` labels a job whose
// child died, so that its crash record says which kernel was running.
using IsolatedJob = std::function<std::vector<Verdict>(std::size_t)>;
using JobLabel = std::function<Verdict(std::size_t)>;

// Returns, for each job, its verdicts; a job whose child died returns one verdict built from label(i)
// with kind crash/timeout and the signal or limit as the reason.
std::vector<std::vector<Verdict>> run_isolated(std::size_t jobs, const IsolatedJob& job, const JobLabel& label,
                                               const IsolationOptions& opt);

}  // namespace flashcheck
