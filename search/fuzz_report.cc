#include "search/fuzz_report.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/case_json.h"
#include "core/files.h"
#include "core/model_case_json.h"
#include "search/coverage.h"

namespace flashcheck {

std::int64_t case_size(const Finding& f) {
  if (f.model_case) {
    const ModelCase& m = *f.model_case;
    return m.batch * (m.q_len + m.past) + m.heads * m.head_dim;
  }
  const KernelCase& c = f.minimized;
  std::int64_t n = c.heads * (c.head_dim + c.v_head_dim);
  for (const Sequence& s : c.seqs) n += s.q_len + s.k_len + 1;
  return n;
}

namespace {

// A message with its numbers blanked: "cu_seqlens reach query row 3" and "... row 7" are one raise.
std::string message_shape(std::string_view reason) {
  std::string s;
  for (std::size_t i = 0; i < reason.size() && s.size() < 240; ++i) {
    const char ch = reason[i];
    if (ch >= '0' && ch <= '9') {
      if (s.empty() || s.back() != '#') s += '#';
    } else {
      s += ch;
    }
  }
  return s;
}

// Features a minimized case has because the shrinker made it small, whatever the bug: the first dtype, lengths at a
// tile boundary or of one query, odd head dims, one sequence or several. They would split one bug into many.
bool shrinking_artifact(std::string_view feature) {
  return feature.rfind("dtype-", 0) == 0 || feature.rfind("tile64", 0) == 0 || feature == "len=1mod32" ||
         feature == "decode" || feature == "head-dim-not-multiple-of-8" || feature == "batch>1";
}

}  // namespace

std::string cause_signature(const Finding& f) {
  std::string s(to_string(f.verdict.kind));
  // An error is its message: the same raise reached from cases of different features is one bug (hf-4.55's #39814
  // error came from ten feature sets, ten findings). A failure or a crash says less about its cause than the case does.
  if (f.verdict.kind == VerdictKind::kError) return s + "/" + message_shape(f.verdict.reason);
  for (const std::string& feature : f.model_case ? classify(*f.model_case) : classify(f.minimized))
    if (!shrinking_artifact(feature)) s += "/" + feature;
  return s;
}

std::string failure_signature(const std::string& property, const Finding& f) { return property + "/" + cause_signature(f); }

void add_finding(FuzzReport& r, Finding f, const std::function<std::string(const Finding&)>& save, bool keep_replaced) {
  const std::string sig = failure_signature(r.property, f);
  for (Finding& g : r.findings) {
    if (failure_signature(r.property, g) != sig) continue;
    f.count += g.count;
    g.count = f.count;
    if (case_size(f) < case_size(g)) {
      if (!g.fixture.empty() && !keep_replaced) {
        remove_file(g.fixture);
        remove_file(std::filesystem::path(g.fixture).replace_extension(".safetensors").string());
      }
      f.fixture = save(f);
      g = std::move(f);
    }
    return;
  }
  f.fixture = save(f);
  r.findings.push_back(std::move(f));
}

void merge_reports(FuzzReport& into, const FuzzReport& part, bool keep_replaced) {
  into.cases += part.cases;
  into.unsupported += part.unsupported;
  for (const auto& [reason, n] : part.unsupported_reasons) into.unsupported_reasons[reason] += n;
  into.crashes += part.crashes;
  into.failures += part.failures;
  for (const Finding& f : part.findings) add_finding(into, f, [](const Finding& x) { return x.fixture; }, keep_replaced);
  into.worst_ratio = std::max(into.worst_ratio, part.worst_ratio);
  if (part.worst_bound_use > into.worst_bound_use) {
    into.worst_bound_use = part.worst_bound_use;
    into.closest_pass = part.closest_pass;
  }
  for (const auto& [f, n] : part.coverage) into.coverage[f] += n;
  for (const std::string& f : part.coverage_refused)
    if (std::find(into.coverage_refused.begin(), into.coverage_refused.end(), f) == into.coverage_refused.end())
      into.coverage_refused.push_back(f);
  if (into.not_applicable.empty()) into.not_applicable = part.not_applicable;
  for (const auto& [id, n] : part.known_divergences) into.known_divergences[id] += n;
}

nlohmann::json to_json(const FuzzReport& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : r.findings)
    findings.push_back({{f.model_case ? "model_case" : "case", f.model_case ? model_case_to_json(*f.model_case) : case_to_json(f.minimized)},
                        {"summary", f.model_case ? summary(*f.model_case) : summary(f.minimized)},
                        {"verdict", to_json(f.verdict)},
                        {"line", describe(f.verdict)},
                        {"case_index", f.case_index},
                        {"shrink_steps", f.shrink_steps},
                        {"shrink_attempts", f.shrink_attempts},
                        {"shrink_budget_exhausted", f.shrink_budget_exhausted},
                        {"reproduce", f.reproduce},
                        {"fixture", f.fixture},
                        {"count", f.count}});
  return {{"kernel", r.kernel},
          {"property", r.property},
          {"seed", r.seed},
          {"cases", r.cases},
          {"unsupported", r.unsupported},
          {"unsupported_reasons", r.unsupported_reasons},
          {"crashes", r.crashes},
          {"failures", r.failures},
          {"findings", findings},
          {"seconds", r.seconds},
          {"worst_ratio", r.worst_ratio},
          {"worst_bound_use", r.worst_bound_use},
          {"closest_pass", r.closest_pass},
          {"coverage", r.coverage},
          {"coverage_missing", r.coverage_missing},
          {"coverage_refused", r.coverage_refused},
          {"not_applicable", r.not_applicable},
          {"known_divergences", r.known_divergences},
          {"ok", r.ok()}};
}

FuzzReport fuzz_report_from_json(const nlohmann::json& j) {
  FuzzReport r;
  r.kernel = j.at("kernel");
  r.property = j.at("property");
  r.seed = j.at("seed");
  r.cases = j.at("cases");
  r.unsupported = j.at("unsupported");
  r.unsupported_reasons = j.at("unsupported_reasons").get<std::map<std::string, std::int64_t>>();
  r.crashes = j.at("crashes");
  r.failures = j.at("failures");
  for (const auto& f : j.at("findings")) {
    Finding x;
    if (f.contains("model_case")) x.model_case = model_case_from_json(f.at("model_case"), "fuzz report", "findings");
    else x.minimized = case_from_json(f.at("case"), "fuzz report", "findings");
    x.verdict = verdict_from_json(f.at("verdict"));
    x.case_index = f.at("case_index");
    x.shrink_steps = f.at("shrink_steps");
    x.shrink_attempts = f.at("shrink_attempts");
    x.shrink_budget_exhausted = f.at("shrink_budget_exhausted");
    x.reproduce = f.at("reproduce");
    x.fixture = f.at("fixture");
    x.count = f.value("count", std::int64_t{1});
    r.findings.push_back(std::move(x));
  }
  r.seconds = j.at("seconds");
  r.worst_ratio = j.at("worst_ratio");
  r.worst_bound_use = j.value("worst_bound_use", 0.0);
  r.closest_pass = j.value("closest_pass", std::string());
  r.coverage = j.at("coverage").get<std::map<std::string, std::int64_t>>();
  r.coverage_missing = j.at("coverage_missing").get<std::vector<std::string>>();
  r.coverage_refused = j.value("coverage_refused", std::vector<std::string>{});
  r.not_applicable = j.at("not_applicable");
  r.known_divergences = j.value("known_divergences", std::map<std::string, std::int64_t>{});
  return r;
}

std::string report_line(const FuzzReport& r) {
  if (!r.not_applicable.empty()) return "n/a: " + r.not_applicable;
  std::string s = fmt::format("{} cases in {:.1f} s, {} finding{}, worst ratio {:.3g}, worst err/bound {:.2f}", r.cases,
                              r.seconds, r.findings.size(), r.findings.size() == 1 ? "" : "s", r.worst_ratio,
                              r.worst_bound_use);
  if (r.unsupported) s += fmt::format(", {} unsupported", r.unsupported);
  if (!r.known_divergences.empty()) {
    std::vector<std::string> known;
    for (const auto& [id, n] : r.known_divergences) known.push_back(fmt::format("{} x{}", id, n));
    s += fmt::format(", documented divergences: {}", fmt::join(known, " "));
  }
  if (!r.coverage_missing.empty()) s += fmt::format(", COVERAGE MISSING: {}", fmt::join(r.coverage_missing, " "));
  return s;
}

}  // namespace flashcheck
