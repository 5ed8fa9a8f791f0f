#include "cli/report.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "properties/integration_property.h"

namespace flashcheck::cli {

std::vector<KnownDefect> load_known_defects(const std::vector<std::string>& given, const char* command) {
  if (!given.empty()) return known_defects(given);  // asked for: bad input is the user's to fix (exit 2)
  if (!path_exists("fixtures")) return {};
  try {
    return known_defects({"fixtures"});
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck {}: findings are not matched against ./fixtures ({})\n", command, e.what());
    return {};
  }
}

bool resolve_kernels(const std::vector<std::string>& names, std::vector<Kernel*>& out) {
  Registry& reg = builtin_registry();
  if (names.empty()) {  // every kernel under test that can run on this machine
    for (Kernel* k : reg.kernels())
      if (k->unavailable_reason().empty()) out.push_back(k);
    return true;
  }
  for (const std::string& n : names) {
    Kernel* k = nullptr;
    try {
      k = reg.find(n);
    } catch (const InputError& e) {  // a name a plugin could not resolve: say why
      fmt::print(stderr, "flashcheck: kernel '{}': {}\n", n, e.what());
      return false;
    }
    if (!k) {
      std::string known;
      for (const std::string& s : reg.names(true)) known += " " + s;
      fmt::print(stderr, "flashcheck: unknown kernel '{}'; known kernels:{}\n", n, known);
      return false;
    }
    out.push_back(k);
  }
  return true;
}

bool resolve_properties(const std::vector<std::string>& names, std::vector<const Property*>& out) {
  for (const std::string& n : names) {
    if (n == "all") {
      out = all_properties();
      return true;
    }
    const Property* p = find_property(n);
    if (!p) {
      std::string known;
      for (const Property* q : all_properties()) known += " " + std::string(q->name());
      fmt::print(stderr, "flashcheck: unknown property '{}'; known properties:{} integration integration-sdpa (or all)\n", n,
                 known);
      return false;
    }
    out.push_back(p);
  }
  return true;
}

bool resolve_runs(const std::vector<std::string>& properties, const std::vector<std::string>& profiles,
                  const std::string& command, std::vector<std::unique_ptr<Property>>& owned,
                  std::vector<const Property*>& runs) {
  std::vector<std::string> kernel_level;
  std::vector<IntegrationKind> paths;  // the integration properties asked for, in order
  for (const std::string& n : properties) {
    if (const auto kind = integration_kind(n)) {
      if (std::find(paths.begin(), paths.end(), *kind) == paths.end()) paths.push_back(*kind);
    } else {
      kernel_level.push_back(n);
    }
  }
  std::vector<const Property*> props;
  if (!kernel_level.empty() && !resolve_properties(kernel_level, props)) return false;
  // Every profile named is checked, whether or not an integration property uses it: a typo is not a silent no-op.
  for (const std::string& n : profiles)
    if (!hf::parse_profile(n)) {
      fmt::print(stderr, "{}: unknown profile '{}' ({})\n", command, printable(n, 80), hf::profile_name_list());
      return false;
    }
  // The integration properties run once per profile, before the kernel-level properties.
  for (const IntegrationKind path : paths)
    for (const std::string& n : profiles) {
      owned.push_back(integration_property(*hf::parse_profile(n), hf::PathDefect::kNone, path));
      runs.push_back(owned.back().get());
    }
  runs.insert(runs.end(), props.begin(), props.end());
  return true;
}

void apply_case_sizes(const CaseSizeOptions& s, int& max_size, GenLimits& limits, ModelGenLimits& model_limits) {
  max_size = s.max_size;
  limits.max_len = s.max_len;
  limits.max_batch = s.max_batch;
  limits.max_heads = s.max_heads;
  limits.work_budget = s.work_budget;
  limits.dtypes.clear();
  for (const std::string& name : s.dtypes) limits.dtypes.push_back(*parse_dtype(name));  // names checked by CLI11
  limits.head_dims = s.head_dims;
  model_limits.max_batch = std::min<std::int64_t>(s.max_batch, model_limits.max_batch);
  model_limits.max_heads = s.max_heads;
}

void print_fuzz_report(const FuzzReport& r) {
  fmt::print("{} / {}: ", r.kernel, r.property);
  if (!r.not_applicable.empty()) {
    fmt::print("not applicable: {}\n", r.not_applicable);
    return;
  }
  fmt::print("{} cases in {:.1f} s ({:.1f} cases/s), seed {}, {} failing case{} in {} distinct finding{}, {} crash{}, "
             "worst passing ratio {:.3g} (err/bound {:.2f})\n",
             r.cases, r.seconds, r.cases / std::max(r.seconds, 1e-9), r.seed, r.failures, r.failures == 1 ? "" : "s",
             r.findings.size(), r.findings.size() == 1 ? "" : "s", r.crashes, r.crashes == 1 ? "" : "es", r.worst_ratio,
             r.worst_bound_use);
  if (r.worst_bound_use >= kCloseCallBoundUse && !r.closest_pass.empty())
    fmt::print("  closest pass: err/bound {:.2f} on {}\n", r.worst_bound_use, r.closest_pass);
  for (const Finding& f : r.findings) {
    fmt::print("  FOUND at case {}: {}\n", f.case_index, f.model_case ? summary(*f.model_case) : summary(f.minimized));
    fmt::print("    {}\n", describe(f.verdict));
    fmt::print("    shrunk in {} steps ({} attempts{})\n", f.shrink_steps, f.shrink_attempts,
               f.shrink_budget_exhausted ? ", budget exhausted" : "");
    // hf-live's "kernel" is a transformers release: its fixtures replay on the release's profile, every kernel.
    const bool live = r.property.rfind("hf-live/", 0) == 0;
    if (!f.fixture.empty())
      fmt::print("    fixture: {}\n    replay:  {} replay {}{}\n", f.fixture, command_name(), f.fixture,
                 live ? "" : " --kernel " + r.kernel);
    if (!f.reproduce.empty()) {
      // Model-level runs are labelled integration[-sdpa]/<profile>; the command takes them as two options.
      const auto slash = r.property.find('/');
      const std::string prop = f.model_case && slash != std::string::npos
                                   ? fmt::format("{} --profile {}", r.property.substr(0, slash), r.property.substr(slash + 1))
                                   : r.property;
      fmt::print("    rapidcheck: {} fuzz --kernel {} --property {} --reproduce '{}'\n", command_name(), r.kernel, prop,
                 f.reproduce);
    }
  }
  if (!r.known_divergences.empty()) {
    fmt::print("  documented divergences met (counted, not findings):\n");
    for (const auto& [id, n] : r.known_divergences) fmt::print("    {:>6}  {}\n", n, id);
  }
  if (r.unsupported > 0) {
    fmt::print("  {} generated case{} not judged:\n", r.unsupported, r.unsupported == 1 ? "" : "s");
    for (const auto& [why, n] : r.unsupported_reasons) fmt::print("    {:>6}  {}\n", n, why);
  }
  fmt::print("  coverage:");
  int col = 0;
  for (const auto& [f, n] : r.coverage) {
    fmt::print("{}{:>28} {:>6}", col % 4 == 0 ? "\n    " : "", f, n);
    ++col;
  }
  fmt::print("\n");
  if (!r.coverage_missing.empty()) {
    std::string m;
    for (const std::string& f : r.coverage_missing) m += " " + f;
    fmt::print("  COVERAGE MISSING (the kernel supports these, no case reached them):{}\n", m);
  }
}

namespace {
std::string& command_name_storage() {
  static std::string name = "flashcheck";
  return name;
}
}  // namespace

void set_command_name(const char* argv0) {
  if (argv0 && std::string_view(argv0).find('/') != std::string_view::npos) command_name_storage() = argv0;
}

const std::string& command_name() { return command_name_storage(); }

std::string property_name_list() {
  std::string names;
  for (const Property* p : all_properties()) names += (names.empty() ? "" : ", ") + std::string(p->name());
  return names;
}

void print_replay_line(const ReplayRecord& r) {
  const std::string where = fmt::format("{}#{}{}", r.fixture, r.model_case ? "m" : "", r.case_index);
  std::string outcome = r.outcome;
  if (!r.as_expected) outcome += " !";
  fmt::print("{:<13} {:<20} {}  [{}]\n", outcome, r.verdict.kernel, where, r.case_summary);
  fmt::print("              {}\n", describe(r.verdict));
  if (r.has_expectation && !r.as_expected)
    fmt::print("              expected {}{}\n", to_string(r.expected.verdict),
               r.expected.reason_contains.empty() ? "" : fmt::format(" mentioning \"{}\"", r.expected.reason_contains));
  // A recorded bug's replay says in words what its outcome means: "xfail ok" once read as "the bug is gone".
  if (r.outcome == "xfail" && r.as_expected) fmt::print("              still fails as recorded (known bug)\n");
  if (r.outcome == "xpass")
    fmt::print("              NOW PASSES: the recorded bug is fixed (or no longer reached) -- update the fixture\n");
}

void print_replay_summary(const std::vector<ReplayRecord>& records) {
  struct Row {
    int pass = 0, fail = 0, xfail = 0, unsupported = 0, error = 0, crash = 0, unexpected = 0;
    double worst_ratio = 0;
  };
  std::map<std::string, Row> rows;
  for (const ReplayRecord& r : records) {
    Row& row = rows[r.verdict.kernel];
    const std::string& o = r.outcome;
    if (o == "pass") ++row.pass;
    else if (o == "xfail") ++row.xfail;
    else if (o == "unsupported") ++row.unsupported;
    else if (o == "fail" || o == "xpass") ++row.fail;
    else if (o == "error") ++row.error;
    else ++row.crash;  // crash, timeout
    if (!r.as_expected) ++row.unexpected;
    if (r.verdict.cmp && r.verdict.kind == VerdictKind::kPass)
      row.worst_ratio = std::max(row.worst_ratio, r.verdict.cmp->ratio());
  }
  std::size_t width = 20;  // model cases are keyed "<profile>@<kernel>"
  for (const auto& [k, row] : rows) width = std::max(width, k.size());
  fmt::print("\n{:<{}} {:>5} {:>5} {:>6} {:>11} {:>6} {:>12} {:>11}  {}\n", "kernel", width, "pass", "fail", "xfail",
             "unsupported", "error", "crash/hang", "worst ratio", "status");
  int unexpected = 0;
  for (const auto& [k, row] : rows) {
    fmt::print("{:<{}} {:>5} {:>5} {:>6} {:>11} {:>6} {:>12} {:>11.3g}  {}\n", k, width, row.pass, row.fail, row.xfail,
               row.unsupported, row.error, row.crash, row.worst_ratio, row.unexpected ? "UNEXPECTED" : "ok");
    unexpected += row.unexpected;
  }
  int known = 0, fixed = 0;
  for (const ReplayRecord& r : records) {
    known += r.outcome == "xfail" && r.as_expected;
    fixed += r.outcome == "xpass";
  }
  if (known > 0) fmt::print("{} still fail as recorded (known bugs)\n", known);
  if (fixed > 0) fmt::print("{} NOW PASS where a failure was recorded: update those fixtures\n", fixed);
  fmt::print("{} case-kernel runs, {} unexpected\n", records.size(), unexpected);
}

nlohmann::json replay_json(const std::vector<ReplayRecord>& records) {
  nlohmann::json arr = nlohmann::json::array();
  for (const ReplayRecord& r : records) {
    nlohmann::json j = to_json(r.verdict);
    j["fixture"] = r.fixture;
    j["case"] = r.case_index;
    j["model_case"] = r.model_case;
    j["case_summary"] = r.case_summary;
    j["line"] = describe(r.verdict);
    j["outcome"] = r.outcome;
    j["as_expected"] = r.as_expected;
    if (r.has_expectation) j["expected"] = to_string(r.expected.verdict);
    arr.push_back(std::move(j));
  }
  return {{"records", arr}};
}

void write_junit_file(const std::string& path, const std::string& xml) { write_file_atomic(path, xml); }

}  // namespace flashcheck::cli
