#include <algorithm>
#include <fmt/format.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/report.h"
#include "campaign/campaign.h"
#include "search/case_gen.h"
#include "search/coverage.h"
#include "search/worker.h"

namespace flashcheck::cli {
namespace {

void print_outcome(const CampaignCommandOptions& o, const CampaignSpec& spec, const CampaignOutcome& r) {
  for (const FuzzReport& u : r.totals) {
    if (!u.not_applicable.empty()) {
      fmt::print("{} / {}: not applicable: {}\n", u.kernel, u.property, u.not_applicable);
      continue;
    }
    fmt::print("{} / {}: {} cases, {} failing case{} in {} distinct finding{}, {} crash{}, worst passing err/bound {:.2f}\n",
               u.kernel, u.property, u.cases, u.failures, u.failures == 1 ? "" : "s", u.findings.size(),
               u.findings.size() == 1 ? "" : "s", u.crashes, u.crashes == 1 ? "" : "es", u.worst_bound_use);
    for (const Finding& f : u.findings)
      fmt::print("  FOUND x{}: {} {}\n    {}{}\n", f.count, to_string(f.verdict.kind),
                 f.model_case ? summary(*f.model_case) : summary(f.minimized), f.verdict.reason,
                 f.fixture.empty() ? "" : fmt::format("\n    fixture: {}/{}", o.out, f.fixture));
  }
  const std::string state = r.complete ? (spec.cases > 0 ? "complete" : "time budget spent") : "NOT complete";
  fmt::print("campaign {} (shard {}): {}; {} chunks this run, {} from earlier runs, {} worker restart{}\n", o.out, o.shard,
             state, r.chunks_run, r.chunks_before, r.restarts, r.restarts == 1 ? "" : "s");
  for (const std::string& w : r.retired) fmt::print("  {}\n", w);
  if (r.torn_lines) fmt::print("  the journal's last line was cut short by a kill and was dropped\n");
  fmt::print("merge it (with the other shards) into one report: flashcheck merge {} --out merged\n", o.out);
}

}  // namespace

int run_campaign_command(const CampaignCommandOptions& o) {
  std::vector<Kernel*> kernels;
  if (!resolve_kernels(o.kernels, kernels)) return kExitUsage;
  std::vector<std::unique_ptr<Property>> owned;
  std::vector<const Property*> props;
  if (!resolve_runs(o.properties, o.profiles, "flashcheck campaign", owned, props)) return kExitUsage;
  if ((o.cases > 0) == (o.time > 0)) {
    fmt::print(stderr, "flashcheck campaign: give one budget: --cases N (per kernel and property) or --time SECONDS\n");
    return kExitUsage;
  }
  CampaignSpec spec;
  std::string error;
  const std::optional<Shard> shard = parse_shard(o.shard, error);
  if (!shard) {
    fmt::print(stderr, "flashcheck campaign: --shard: {}\n", error);
    return kExitUsage;
  }
  std::vector<WorkerSlot> slots;
  if (!o.gpus.empty()) {
    if (o.workers > 0) {
      fmt::print(stderr, "flashcheck campaign: --gpus and --workers exclude each other (one worker per GPU)\n");
      return kExitUsage;
    }
    slots = gpu_slots(o.gpus, error);
    if (slots.empty()) {
      fmt::print(stderr, "flashcheck campaign: {}\n", error);
      return kExitUsage;
    }
    slots = shared_slots(slots, o.workers_per_gpu);
  } else {
    if (o.workers_per_gpu > 1) {
      fmt::print(stderr, "flashcheck campaign: --workers-per-gpu needs --gpus (CPU workers: --workers N)\n");
      return kExitUsage;
    }
    slots = cpu_slots(std::max(o.workers, 1));
    const auto on_gpu = std::find_if(kernels.begin(), kernels.end(), [](const Kernel* k) { return k->device() == "cuda"; });
    if (slots.size() > 1 && on_gpu != kernels.end()) {
      fmt::print(stderr, "flashcheck campaign: {} runs on CUDA: give --gpus all (one worker per GPU), not --workers\n",
                 (*on_gpu)->name());
      return kExitUsage;
    }
    const bool host_only = std::all_of(kernels.begin(), kernels.end(), [&](const Kernel* k) {
      return std::all_of(props.begin(), props.end(), [&](const Property* p) { return stays_on_the_host(*k, *p); });
    });
    if (host_only)
      for (WorkerSlot& s : slots) s.memory_limit = worker_memory_bytes(o.worker_memory, static_cast<int>(slots.size()));
  }
  spec.shard = *shard;
  spec.seed = o.seed;
  spec.cases = o.cases;
  spec.seconds = o.time;
  spec.shrink = {o.shrink_attempts, o.shrink_seconds};
  spec.case_timeout = o.timeout;
  apply_case_sizes(o.sizes, spec.max_size, spec.limits, spec.model_limits);
  std::vector<std::pair<Kernel*, const Property*>> units;
  for (Kernel* k : kernels)
    for (const Property* p : props) {
      units.emplace_back(k, p);
      spec.units.push_back({std::string(k->name()), p->label(), not_applicable_reason(*k, *p, spec.limits),
                            required_coverage(*p, run_contract(*k, spec.limits), kModelCoverageMinCases),
                            p->level() == CaseLevel::kModel ? kModelCoverageMinCases : 0});
    }

  const bool tty = ::isatty(STDERR_FILENO);
  CampaignRunOptions ro;
  ro.dir = o.out;
  ro.slots = slots;
  ro.on_progress = [&, last_line = -10.0](const CampaignProgress& p) mutable {
    const std::string line = fmt::format("campaign {} shard {}: {} cases, {:.1f} cases/s on {} worker{}, {} failing, {} crash{}, {:.0f} s",
                                         o.out, o.shard, p.cases, p.cases_per_second, p.workers, p.workers == 1 ? "" : "s",
                                         p.failures, p.crashes, p.crashes == 1 ? "" : "es", p.seconds);
    if (tty) {
      fmt::print(stderr, "\r{:<110}", line);
    } else if (p.seconds - last_line >= 10) {
      fmt::print(stderr, "{}\n", line);
      last_line = p.seconds;
    }
  };
  fmt::print(stderr, "campaign {} shard {}: {} worker{}: ", o.out, o.shard, slots.size(), slots.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < slots.size(); ++i) fmt::print(stderr, "{}{}", i ? ", " : "", slots[i].device);
  fmt::print(stderr, "\n");
  CampaignOutcome r;
  try {
    r = run_campaign(spec, units, ro);
  } catch (const CampaignError& e) {
    if (tty) fmt::print(stderr, "\n");
    fmt::print(stderr, "flashcheck campaign: {}\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {  // the journal cannot be written, a worker's body threw: the harness failed
    if (tty) fmt::print(stderr, "\n");
    fmt::print(stderr, "flashcheck campaign: stopped: {} (the journal keeps every finished chunk: rerun to resume)\n", e.what());
    return kExitUsage;
  }
  if (tty) fmt::print(stderr, "\r{:<110}\r", "");
  print_outcome(o, spec, r);
  bool ok = r.complete;
  for (const FuzzReport& u : r.totals) ok = ok && u.findings.empty() && u.crashes == 0;
  return ok ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
