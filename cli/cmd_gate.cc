#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/gate_report.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/fixture.h"
#include "search/gate.h"

namespace flashcheck::cli {

namespace fs = std::filesystem;

// Cases per kernel and property when the gate is not told: sized so that the whole gate stays within
// five minutes on two cores (docs/PERFORMANCE.md has the measurement).
constexpr std::int64_t kDefaultGateCases = 120;

int run_gate(const GateOptions& o) {
  std::vector<Kernel*> kernels;
  if (!resolve_kernels(o.kernels, kernels)) return kExitUsage;
  std::vector<Fixture> fixtures;
  try {
    if (!fs::exists(o.fixtures)) throw InputError(o.fixtures, "", "no such file or directory");
    for (const std::string& f : find_fixture_files(o.fixtures)) fixtures.push_back(load_fixture(f));
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck gate: {}\n", e.what());
    return kExitUsage;
  }
  GatePlan plan;
  plan.cases = o.cases > 0 ? o.cases : kDefaultGateCases;
  plan.seed = o.seed;
  plan.found_dir = (fs::path(o.out) / "found").string();
  plan.mutants = o.mutants;
  fs::create_directories(o.out);
  const GateResult g = flashcheck::run_gate(fixtures, kernels, plan, [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  write_gate_files(g, o.out);
  if (o.json) std::cout << gate_json(g).dump(2) << "\n";
  else std::cout << gate_markdown(g);
  return g.ok() ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
