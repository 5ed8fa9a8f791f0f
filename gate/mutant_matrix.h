// The mutant kill matrix: every deliberately broken kernel against every property, each run stopping at
// its first (shrunk) failure. A mutant no property kills means the harness is blind to its defect.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/kernel_case.h"
#include "core/model_case.h"
#include "core/verdict.h"
#include "kernels/kernel.h"
#include "oracles/hf_path_defects.h"

namespace flashcheck {

struct MutantKill {
  std::string property;
  std::int64_t cases_to_kill = 0;  // index of the first failing case
  double seconds = 0;              // until the failure was found and shrunk
  KernelCase minimized;
  std::optional<ModelCase> model;  // model-level mutants: the minimized model case
  Verdict verdict;
  // Size of the minimized counterexample.
  std::int64_t batch = 0, heads = 0, longest = 0;
};

struct MutantRow {
  std::string mutant;
  std::string description;
  std::string imitates;
  std::vector<MutantKill> kills;              // one per property that killed it
  std::vector<std::string> not_applicable;    // properties that cannot run on it
  std::string first_killer;                   // the property with the fewest cases to a kill
  std::int64_t cases_to_kill = -1;
  double seconds = 0;
  bool killed() const { return !kills.empty(); }
};

struct MutantMatrixOptions {
  std::int64_t cases = 120;  // budget per mutant and property
  std::uint64_t seed = 1;
  std::vector<std::string> properties;  // empty: all (of the mutant's pass: forward or backward)
  bool first_kill_only = false;          // stop hunting a mutant at its first kill (the gate: killed or not)
  std::function<void(const MutantRow&)> progress;
};

std::vector<MutantRow> run_mutant_matrix(const std::vector<Kernel*>& mutants, const MutantMatrixOptions& o);

// The model-level mutants (oracles/hf_path_defects.h PathDefect: integration bugs of transformers' flash or SDPA
// path), each run with its path's integration property on hf-main and tiled-cpu. `names` selects some, `paths`
// the paths (empty: all).
std::vector<MutantRow> run_model_mutants(const std::vector<std::string>& names, const MutantMatrixOptions& o,
                                         const std::vector<hf::HfPath>& paths = {});
bool is_model_mutant(const std::string& name);

nlohmann::json to_json(const std::vector<MutantRow>& rows);
// The kill matrix as a markdown table, with the distribution of cases to the first kill.
std::string mutant_markdown(const std::vector<MutantRow>& rows);

}  // namespace flashcheck
