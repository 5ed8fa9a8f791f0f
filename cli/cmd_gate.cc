#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/gate_report.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/fixture.h"
#include "properties/fuzz.h"
#include "properties/model_fuzz.h"
#include "properties/mutant_matrix.h"
#include "properties/replay.h"

namespace flashcheck::cli {

namespace fs = std::filesystem;

// Cases per kernel and property when the gate is not told: sized so that the whole gate stays within
// five minutes on two cores (docs/PERFORMANCE.md has the measurement).
constexpr std::int64_t kDefaultGateCases = 120;

// Top-up runs a clean run may take to reach a feature its budget missed. On kernels that refuse many
// generated cases (known defects excluded from the contract), 120 cases can miss a rare feature by
// chance; a top-up with another seed reaches it, while a feature the generator never produces stays
// missing however many runs there are.
constexpr int kCoverageTopUps = 3;


int run_gate(const GateOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Kernel*> kernels;
  if (!resolve_kernels(o.kernels, kernels)) return kExitUsage;
  GateResult g;
  g.seed = o.seed;
  g.cases_per_run = o.cases > 0 ? o.cases : kDefaultGateCases;

  // 1. The fixture corpus.
  std::vector<Fixture> fixtures;
  try {
    if (!fs::exists(o.fixtures)) throw InputError(o.fixtures, "", "no such file or directory");
    for (const std::string& f : find_fixture_files(o.fixtures)) fixtures.push_back(load_fixture(f));
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck gate: {}\n", e.what());
    return kExitUsage;
  }
  fmt::print(stderr, "gate: replaying {} fixture files on {} kernels\n", fixtures.size(), kernels.size());
  g.replay = replay_fixtures(fixtures, kernels, IsolationOptions{});

  // 2. A bounded run of every property on every kernel, each in its own worker process.
  fs::create_directories(o.out);
  for (Kernel* k : kernels)
    for (const Property* p : all_properties()) {
      FuzzOptions fo;
      fo.cases = g.cases_per_run;
      fo.seed = o.seed;
      fo.max_size = 100;
      fo.shrink = {200, 20};
      fo.out_dir = (fs::path(o.out) / "found").string();
      FuzzReport r = run_fuzz_isolated(*k, *p, fo);
      for (int t = 1; t <= kCoverageTopUps && !r.ok() && r.findings.empty() && r.crashes == 0 &&
                      r.not_applicable.empty() && !r.coverage_missing.empty();
           ++t) {
        FuzzOptions more = fo;
        more.seed = o.seed + 7919 * static_cast<std::uint64_t>(t);
        fmt::print(stderr, "gate: {:<16} {:<19} coverage top-up {} (seed {}) for: {}\n", k->name(), p->name(), t, more.seed,
                   fmt::join(r.coverage_missing, " "));
        const FuzzReport extra = run_fuzz_isolated(*k, *p, more);
        merge_reports(r, extra);
        r.seconds += extra.seconds;
        std::erase_if(r.coverage_missing, [&](const std::string& f) {  // missing only if missed by every run
          return std::find(extra.coverage_missing.begin(), extra.coverage_missing.end(), f) == extra.coverage_missing.end();
        });
      }
      fmt::print(stderr, "gate: {:<16} {:<19} {}\n", k->name(), p->name(), gate_line(r));
      g.runs.push_back(r);
    }

  // 3. The mutants: every one must be killed by some property within the same budget.
  if (o.mutants) {
    MutantMatrixOptions mo;
    mo.cases = g.cases_per_run;
    mo.seed = o.seed;
    mo.progress = [](const MutantRow& row) {
      fmt::print(stderr, "gate: {:<32} {}\n", row.mutant, row.killed() ? fmt::format("killed by {} after {} cases", row.first_killer, row.cases_to_kill) : "SURVIVED");
    };
    g.mutants = run_mutant_matrix(builtin_registry().mutants(), mo);
    g.ran_mutants = true;
  }

  // 4. Model level, last: these run in this process (LibTorch starts its thread pool here, after which
  // the gate forks no more workers). The integration property on hf-main for every kernel, then the
  // model-level mutants.
  for (Kernel* k : kernels) {
    FuzzOptions fo;
    fo.cases = g.cases_per_run;
    fo.seed = o.seed;
    fo.shrink = {200, 20};
    fo.out_dir = (fs::path(o.out) / "found").string();
    const FuzzReport r = run_model_fuzz(hf::Profile::kHfMain, *k, fo);
    fmt::print(stderr, "gate: {:<16} {:<19} {}\n", k->name(), "integration/hf-main", gate_line(r));
    g.runs.push_back(r);
  }
  if (o.mutants) {
    MutantMatrixOptions mo;
    mo.cases = g.cases_per_run;
    mo.seed = o.seed;
    for (MutantRow& row : run_model_mutants({}, mo)) {
      fmt::print(stderr, "gate: {:<32} {}\n", row.mutant,
                 row.killed() ? fmt::format("killed by {} after {} cases", row.first_killer, row.cases_to_kill) : "SURVIVED");
      g.mutants.push_back(std::move(row));
    }
  }
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  write_gate_files(g, o.out);
  if (o.json) std::cout << gate_json(g).dump(2) << "\n";
  else std::cout << gate_markdown(g);
  return g.ok() ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
