#include "gate/gate.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "properties/integration_property.h"
#include "search/fuzz.h"

namespace flashcheck {
namespace {

// Top-up runs a clean run may take to reach a feature its budget missed. On kernels that refuse many
// generated cases (known defects excluded from the contract), 120 cases can miss a rare feature by
// chance; a top-up with another seed reaches it, while a feature the generator never produces stays
// missing however many runs there are.
constexpr int kCoverageTopUps = 3;

}  // namespace

bool GateResult::ok() const {
  for (const ReplayRecord& r : replay)
    if (!r.as_expected) return false;
  for (const FuzzReport& r : runs)
    if (r.not_applicable.empty() && !r.ok()) return false;
  for (const MutantRow& m : mutants)
    if (!m.killed()) return false;
  return true;
}


namespace {

std::string kill_line(const MutantRow& row) {
  return fmt::format("gate: {:<32} {}", row.mutant,
                     row.killed() ? fmt::format("killed by {} after {} cases", row.first_killer, row.cases_to_kill)
                                  : "SURVIVED");
}

}  // namespace

GateResult run_gate(const std::vector<Fixture>& fixtures, const std::vector<Kernel*>& kernels, const GatePlan& plan,
                    const std::function<void(const std::string&)>& log) {
  const auto start = std::chrono::steady_clock::now();
  GateResult g;
  g.seed = plan.seed;
  g.cases_per_run = plan.cases;

  // 1. The fixture corpus.
  log(fmt::format("gate: replaying {} fixture files on {} kernels", fixtures.size(), kernels.size()));
  g.replay = replay_fixtures(fixtures, kernels, IsolationOptions{});

  // 2. A bounded run of every kernel-level property on every kernel, then the integration property on
  // hf-main; every run in worker processes.
  auto options = [&](std::uint64_t seed) {
    FuzzOptions fo;
    fo.cases = g.cases_per_run;
    fo.seed = seed;
    fo.shrink = {200, 20};
    fo.out_dir = plan.found_dir;
    return fo;
  };
  for (Kernel* k : kernels)
    for (const Property* p : all_properties()) {
      FuzzReport r = run_fuzz_isolated(*k, *p, options(plan.seed));
      for (int t = 1; t <= kCoverageTopUps && !r.ok() && r.findings.empty() && r.crashes == 0 &&
                      r.not_applicable.empty() && !r.coverage_missing.empty();
           ++t) {
        const std::uint64_t seed = plan.seed + 7919 * static_cast<std::uint64_t>(t);
        log(fmt::format("gate: {:<16} {:<19} coverage top-up {} (seed {}) for: {}", k->name(), p->name(), t, seed,
                        fmt::join(r.coverage_missing, " ")));
        const FuzzReport extra = run_fuzz_isolated(*k, *p, options(seed));
        merge_reports(r, extra);
        r.seconds += extra.seconds;
        std::erase_if(r.coverage_missing, [&](const std::string& f) {  // missing only if missed by every run
          return std::find(extra.coverage_missing.begin(), extra.coverage_missing.end(), f) == extra.coverage_missing.end();
        });
      }
      log(fmt::format("gate: {:<16} {:<19} {}", k->name(), p->name(), report_line(r)));
      g.runs.push_back(r);
    }

  // 3. The mutants: every one must be killed by some property within the same budget.
  MutantMatrixOptions mo;
  mo.cases = g.cases_per_run;
  mo.seed = plan.seed;
  mo.first_kill_only = true;  // the gate asks whether each mutant dies; `flashcheck mutants` gives the whole matrix
  mo.progress = [&](const MutantRow& row) { log(kill_line(row)); };
  if (plan.mutants) {
    g.mutants = run_mutant_matrix(builtin_registry().mutants(), mo);
    g.ran_mutants = true;
  }

  // 4. Model level: the integration property on hf-main for every kernel, transformers' SDPA path on hf-main
  // once (it runs torch's SDPA, not the kernel: the first kernel only says where), then the model-level mutants.
  const Property& integration = integration_on_hf_main();
  for (Kernel* k : kernels) {
    const FuzzReport r = run_fuzz_isolated(*k, integration, options(plan.seed));
    log(fmt::format("gate: {:<16} {:<19} {}", k->name(), integration.label(), report_line(r)));
    g.runs.push_back(r);
  }
  // The training step through the flash path, on every kernel with a backward.
  const Property& integration_backward = integration_on_hf_main({hf::HfPath::kFlash, true});
  for (Kernel* k : kernels) {
    const FuzzReport r = run_fuzz_isolated(*k, integration_backward, options(plan.seed));
    log(fmt::format("gate: {:<16} {:<19} {}", k->name(), integration_backward.label(), report_line(r)));
    g.runs.push_back(r);
  }
  if (!kernels.empty())
    for (bool backward : {false, true}) {
      const Property& sdpa = integration_on_hf_main({hf::HfPath::kSdpa, backward});
      const FuzzReport r = run_fuzz_isolated(*kernels.front(), sdpa, options(plan.seed));
      log(fmt::format("gate: {:<16} {:<19} {}", "torch-sdpa", sdpa.label(), report_line(r)));
      g.runs.push_back(r);
    }
  if (plan.mutants)
    for (MutantRow& row : run_model_mutants({}, mo)) g.mutants.push_back(std::move(row));
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

}  // namespace flashcheck
