#include <algorithm>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/report.h"
#include "kernels/kernel.h"
#include "properties/integration_property.h"
#include "gate/mutant_matrix.h"

namespace flashcheck::cli {

int run_mutants(const MutantsOptions& o) {
  if (!check_count("mutants", "--budget", o.budget, 1, 10'000'000)) return kExitUsage;
  std::vector<Kernel*> mutants;
  std::vector<std::string> kernel_names, model_names;
  for (const std::string& n : o.mutants) (is_model_mutant(n) ? model_names : kernel_names).push_back(n);
  if (o.mutants.empty()) {
    mutants = builtin_registry().mutants();
  } else if (!kernel_names.empty() && !resolve_kernels(kernel_names, mutants)) {
    return kExitUsage;
  }
  std::vector<hf::HfPath> paths;  // the integration properties asked for (empty: all)
  std::vector<std::string> kernel_props;
  for (const std::string& p : o.properties) {
    if (const auto path = integration_path(p)) paths.push_back(*path);
    else kernel_props.push_back(p);
  }
  const bool want_integration = o.properties.empty() || !paths.empty();
  for (Kernel* m : mutants)
    if (!m->is_mutant()) {
      fmt::print(stderr, "flashcheck mutants: '{}' is not a mutant (see flashcheck list --mutants)\n", m->name());
      return kExitUsage;
    }
  std::vector<const Property*> props;
  if (!kernel_props.empty() && !resolve_properties(kernel_props, props)) return kExitUsage;
  MutantMatrixOptions mo;
  mo.cases = o.budget;
  mo.seed = o.seed;
  for (const Property* p : props) mo.properties.emplace_back(p->name());
  mo.progress = [](const MutantRow& r) {
    fmt::print(stderr, "{:<32} {}\n", r.mutant,
               r.killed() ? fmt::format("killed by {} property(ies); first: {} after {} case(s)", r.kills.size(),
                                        r.first_killer, r.cases_to_kill)
                          : "SURVIVED");
  };
  std::vector<MutantRow> rows;
  if (!mutants.empty() && (o.properties.empty() || !kernel_props.empty())) rows = run_mutant_matrix(mutants, mo);
  if (want_integration && (o.mutants.empty() || !model_names.empty())) {
    const std::vector<MutantRow> model_rows = run_model_mutants(model_names, mo, paths);
    rows.insert(rows.end(), model_rows.begin(), model_rows.end());
  }
  if (o.json) std::cout << to_json(rows).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else std::cout << mutant_markdown(rows);
  for (const MutantRow& r : rows)
    if (!r.killed()) return kExitFailure;
  return kExitOk;
}

}  // namespace flashcheck::cli
