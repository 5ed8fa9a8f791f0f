// The search driver: RapidCheck generates cases for one property on one kernel (kernel cases inside the
// kernel's contract, or model cases for the integration property), the property judges each one,
// failures are shrunk under a budget and saved as fixtures. Used by `flashcheck fuzz`, the gate and the
// mutant matrix, at both levels. Isolated runs go through the worker protocol (search/worker.h).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/kernel.h"
#include "core/verdict.h"
#include "properties/property.h"
#include "search/fuzz_report.h"
#include "search/limits.h"

namespace flashcheck {

// RapidCheck shrinks without limit; past either bound the driver stops reporting failures, so the greedy
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
  GenLimits limits;           // kernel-level case sizes
  ModelGenLimits model_limits;  // model-level case sizes
  ShrinkBudget shrink;
  bool stop_at_first_failure = false;  // the mutant matrix wants cases-to-first-kill, not a campaign
  std::string out_dir;                 // where found fixtures and the in-flight case go ("": nowhere)
  std::string inflight_dir;            // where the in-flight case goes instead ("": out_dir); one per worker
  std::string reproduce;               // RC_PARAMS "reproduce=..." string: replay that one failure (reproduce_problem)
  // The isolated worker's memory limit in bytes when the kernel runs on the host (WorkerOptions::memory_limit):
  // -1 the default (default_worker_memory), 0 none.
  std::int64_t worker_memory = -1;
  std::function<void(std::int64_t cases, std::int64_t failures, double seconds)> on_progress;
};

// Why a run cannot require the features lim.require and lim.gqa_group name ("" when it can): a model-level property, or
// none of 2,000 cases drawn for this kernel and property has them all (its contract or the sizes exclude them).
std::string required_features_unmet(const Property& p, const Kernel& k, const GenLimits& lim);

// RapidCheck runs a run in chunks of at most this many cases; chunk c is seeded chunk_seed(seed, c), so
// chunk c of a seed holds the same cases whoever runs it (the campaigns' shards and resumes rely on it).
inline constexpr std::int64_t kChunkCases = 500;
std::uint64_t chunk_seed(std::uint64_t seed, int chunk);

// How a caller that drives the run itself follows it (isolated workers, campaign workers).
struct FuzzHooks {
  int first_chunk = 0;
  int max_chunks = 0;  // chunks to run at most (0: as many as the budget takes)
  std::function<void(int chunk)> on_chunk;
  std::function<void()> on_case_start, on_case_end;  // around every judged case, shrink candidates too
  std::function<void(const AnyCase&, const Verdict&)> on_judged;  // every case the run counts
  std::function<void(std::int64_t cases)> on_counted;  // a case was counted: the parent's exact tally
};

// A harness error ended a run early (the output folder became unwritable, the disk is full): the message,
// and the report of the cases judged so far (their findings are saved already).
class FuzzAborted : public std::runtime_error {
 public:
  FuzzAborted(const std::string& what, FuzzReport so_far) : std::runtime_error(what), report(std::move(so_far)) {}
  FuzzReport report;
};

// Why `p` cannot run on `k` at all (its contract lacks what the property needs), or "".
std::string not_applicable_reason(const Kernel& k, const Property& p, const GenLimits& lim = {});

// Why `s` is not a reproduce string a fuzz run can replay (RapidCheck's config with exactly one reproduce= entry), or
// "" when it is (or is empty). run_fuzz throws std::invalid_argument with it; the CLI refuses it first (exit 2).
std::string reproduce_problem(const std::string& s);

// Runs in this process. Throws OutputError when the output folder cannot be written.
FuzzReport run_fuzz(Kernel& k, const Property& p, const FuzzOptions& o, const FuzzHooks& hooks = {});

// Runs in worker processes: a kernel that crashes or hangs becomes a crash finding (its case is the
// in-flight descriptor, saved as a fixture) and the run resumes after it with the remaining budget.
FuzzReport run_fuzz_isolated(Kernel& k, const Property& p, const FuzzOptions& o, double case_timeout_seconds = 120);

}  // namespace flashcheck
