// A list of jobs run through isolated workers (search/worker.h): a job whose worker dies becomes a
// `crash` or `timeout` verdict and a fresh worker carries on with the next job. Replay and the gate's
// fixture corpus run this way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/verdict.h"

namespace flashcheck {

struct IsolationOptions {
  bool enabled = true;           // false: run jobs in this process (debuggers, sanitizers)
  double timeout_seconds = 300;  // per job; <= 0 disables the limit
  std::int64_t memory_limit = 0;  // bytes of address space of the worker (WorkerOptions::memory_limit); 0: none
};

// Job i returns its verdicts (one per kernel or property it covered). `label(i)` names a job whose worker
// died, so that its crash record says which kernel was running.
using IsolatedJob = std::function<std::vector<Verdict>(std::size_t)>;
using JobLabel = std::function<Verdict(std::size_t)>;

// For each job, its verdicts; a job whose worker died gets one verdict built from label(i), of kind
// crash/timeout with the signal or limit as the reason. A job that throws gets an `error` verdict.
std::vector<std::vector<Verdict>> run_isolated(std::size_t jobs, const IsolatedJob& job, const JobLabel& label,
                                               const IsolationOptions& opt);

}  // namespace flashcheck
