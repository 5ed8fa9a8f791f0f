#include "gate/mutant_matrix.h"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/case_json.h"
#include "core/geometry.h"
#include "core/model_case_json.h"
#include "kernels/native/mutants.h"
#include "properties/integration_property.h"
#include "properties/property.h"
#include "search/fuzz.h"

namespace flashcheck {
namespace {

// One mutant against one property, stopping at the first (shrunk) failure, in worker processes.
FuzzReport hunt(Kernel& mutant, const Property& p, const MutantMatrixOptions& o) {
  FuzzOptions fo;
  fo.cases = o.cases;
  fo.seed = o.seed;
  fo.stop_at_first_failure = true;
  fo.shrink = {300, 20};
  return run_fuzz_isolated(mutant, p, fo, 60);
}

// The kill a run's first finding records, sized by its minimized case.
MutantKill kill_of(const Property& p, const FuzzReport& r) {
  const Finding& f = r.findings.front();
  MutantKill k;
  k.property = std::string(p.name());
  k.cases_to_kill = f.case_index;
  k.seconds = r.seconds;
  k.verdict = f.verdict;
  if (f.model_case) {
    k.model = f.model_case;
    k.batch = f.model_case->batch;
    k.heads = f.model_case->heads;
    k.longest = f.model_case->past + f.model_case->q_len;
  } else {
    k.minimized = f.minimized;
    k.batch = f.minimized.batch();
    k.heads = f.minimized.heads;
    for (const Sequence& s : f.minimized.seqs) k.longest = std::max({k.longest, s.q_len, s.k_len});
  }
  return k;
}

void add_kill(MutantRow& row, MutantKill k) {
  if (row.cases_to_kill < 0 || k.cases_to_kill < row.cases_to_kill) {
    row.cases_to_kill = k.cases_to_kill;
    row.first_killer = k.property;
  }
  row.kills.push_back(std::move(k));
}

}  // namespace

std::vector<MutantRow> run_mutant_matrix(const std::vector<Kernel*>& mutants, const MutantMatrixOptions& o) {
  std::vector<const Property*> props;
  for (const Property* p : all_properties())
    if (o.properties.empty() || std::find(o.properties.begin(), o.properties.end(), p->name()) != o.properties.end())
      props.push_back(p);
  std::vector<MutantRow> rows;
  for (Kernel* m : mutants) {
    MutantRow row;
    row.mutant = std::string(m->name());
    row.description = std::string(m->mutant_description());
    bool backward = false;
    for (const MutantInfo& info : mutant_catalog())
      if (info.name == row.mutant) {
        row.imitates = info.imitates;
        backward = info.backward;
      }
    for (const Property* p : props) {
      // A forward defect is the forward properties' to find, a backward one the gradient properties'.
      if (is_gradient_property(*p) != backward) continue;
      if (o.first_kill_only && row.killed()) break;
      const FuzzReport r = hunt(*m, *p, o);
      row.seconds += r.seconds;
      if (!r.not_applicable.empty()) {
        row.not_applicable.push_back(std::string(p->name()));
        continue;
      }
      if (!r.findings.empty()) add_kill(row, kill_of(*p, r));
    }
    if (o.progress) o.progress(row);
    rows.push_back(std::move(row));
  }
  return rows;
}

bool is_model_mutant(const std::string& name) {
  for (const hf::PathDefectInfo& d : hf::path_defects())
    if (d.name == name) return true;
  return false;
}

std::vector<MutantRow> run_model_mutants(const std::vector<std::string>& names, const MutantMatrixOptions& o,
                                         const std::vector<hf::HfPath>& paths) {
  Kernel* tiled = builtin_registry().find("tiled-cpu");
  std::vector<MutantRow> rows;
  for (const hf::PathDefectInfo& d : hf::path_defects()) {
    if (!names.empty() && std::find(names.begin(), names.end(), d.name) == names.end()) continue;
    if (!paths.empty() && std::find(paths.begin(), paths.end(), d.path) == paths.end()) continue;
    MutantRow row;
    row.mutant = std::string(d.name);
    row.description = std::string(d.description);
    row.imitates = std::string(d.imitates);
    const std::unique_ptr<Property> p = integration_property(hf::Profile::kHfMain, d.defect, d.path);
    const FuzzReport r = hunt(*tiled, *p, o);
    row.seconds = r.seconds;
    if (!r.findings.empty()) add_kill(row, kill_of(*p, r));
    if (o.progress) o.progress(row);
    rows.push_back(std::move(row));
  }
  return rows;
}

nlohmann::json to_json(const std::vector<MutantRow>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const MutantRow& r : rows) {
    nlohmann::json kills = nlohmann::json::array();
    for (const MutantKill& k : r.kills)
      kills.push_back({{"property", k.property},
                       {"cases_to_kill", k.cases_to_kill},
                       {"seconds", k.seconds},
                       {"batch", k.batch},
                       {"heads", k.heads},
                       {"longest", k.longest},
                       {"summary", k.model ? summary(*k.model) : summary(k.minimized)},
                       {k.model ? "model_case" : "case", k.model ? model_case_to_json(*k.model) : case_to_json(k.minimized)},
                       {"verdict", to_json(k.verdict)}});
    arr.push_back({{"mutant", r.mutant},
                   {"description", r.description},
                   {"imitates", r.imitates},
                   {"killed", r.killed()},
                   {"first_killer", r.first_killer},
                   {"cases_to_kill", r.cases_to_kill},
                   {"seconds", r.seconds},
                   {"not_applicable", r.not_applicable},
                   {"kills", kills}});
  }
  return arr;
}

std::string mutant_markdown(const std::vector<MutantRow>& rows) {
  std::string md = "| mutant | killed by (cases to kill) | first kill | minimized (batch, heads, longest) | seconds |\n"
                   "|---|---|---|---|---|\n";
  std::vector<std::int64_t> firsts;
  int survivors = 0, single = 0;
  for (const MutantRow& r : rows) {
    std::string by;
    for (const MutantKill& k : r.kills) by += fmt::format("{}{} ({})", by.empty() ? "" : ", ", k.property, k.cases_to_kill);
    std::string size = "-";
    for (const MutantKill& k : r.kills)
      if (k.property == r.first_killer) size = fmt::format("b{} h{} L{}", k.batch, k.heads, k.longest);
    md += fmt::format("| {} | {} | {} | {} | {:.1f} |\n", r.mutant, r.killed() ? by : "**SURVIVED**",
                      r.killed() ? fmt::format("{} after {}", r.first_killer, r.cases_to_kill) : "-", size, r.seconds);
    if (r.killed()) firsts.push_back(r.cases_to_kill);
    else ++survivors;
    if (r.kills.size() == 1) ++single;
  }
  std::sort(firsts.begin(), firsts.end());
  const auto pct = [&](double q) { return firsts.empty() ? 0 : firsts[static_cast<std::size_t>(q * (firsts.size() - 1))]; };
  md += fmt::format("\n{} of {} mutants killed; cases to the first kill: min {}, median {}, 90th percentile {}, max {}; "
                    "{} mutant{} killed by a single property.\n",
                    rows.size() - survivors, rows.size(), pct(0), pct(0.5), pct(0.9), pct(1.0), single, single == 1 ? "" : "s");
  return md;
}

}  // namespace flashcheck
