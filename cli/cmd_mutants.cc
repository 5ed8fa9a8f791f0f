#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/report.h"
#include "kernels/kernel.h"
#include "properties/mutant_matrix.h"

namespace flashcheck::cli {

int run_mutants(const MutantsOptions& o) {
  std::vector<Kernel*> mutants;
  if (o.mutants.empty()) {
    mutants = builtin_registry().mutants();
  } else if (!resolve_kernels(o.mutants, mutants)) {
    return kExitUsage;
  }
  for (Kernel* m : mutants)
    if (!m->is_mutant()) {
      fmt::print(stderr, "flashcheck mutants: '{}' is not a mutant (see flashcheck list --mutants)\n", m->name());
      return kExitUsage;
    }
  std::vector<const Property*> props;
  if (!o.properties.empty() && !resolve_properties(o.properties, props)) return kExitUsage;
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
  const std::vector<MutantRow> rows = run_mutant_matrix(mutants, mo);
  if (o.json) std::cout << to_json(rows).dump(2) << "\n";
  else std::cout << mutant_markdown(rows);
  for (const MutantRow& r : rows)
    if (!r.killed()) return kExitFailure;
  return kExitOk;
}

}  // namespace flashcheck::cli
