#include "properties/model_fuzz.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <fmt/format.h>

#include "core/fixture.h"
#include "properties/fuzz_detail.h"
#include "properties/integration.h"

namespace flashcheck {
namespace {

using namespace detail;

std::string save_model_finding(const std::string& dir, hf::Profile profile, const Kernel& k, const FuzzOptions& o,
                               const Finding& f) {
  if (dir.empty()) return "";
  std::filesystem::create_directories(dir);
  Fixture fx;
  fx.path = (std::filesystem::path(dir) / (content_hash(*f.model_case) + ".json")).string();
  fx.title = fmt::format("integration {} on {} @ {}: {}", to_string(f.verdict.kind), hf::to_string(profile), k.name(),
                         summary(*f.model_case));
  fx.description = f.verdict.reason;
  fx.property = "integration";
  fx.profiles = {std::string(hf::to_string(profile))};
  fx.found_by = fmt::format("flashcheck fuzz --kernel {} --property integration --profile {} --seed {}", k.name(),
                            hf::to_string(profile), o.seed);
  fx.replay = fmt::format("flashcheck replay {} --kernel {}", fx.path, k.name());
  fx.rc_reproduce = f.reproduce;
  ModelFixtureCase mc;
  mc.mcase = *f.model_case;
  Expectation e;
  e.verdict = f.verdict.kind;
  e.why = f.verdict.reason;
  mc.expect[std::string(hf::to_string(profile))] = e;
  fx.model_cases.push_back(mc);
  save_fixture(fx);
  return fx.path;
}

}  // namespace

const std::vector<std::string>& required_model_coverage() {
  static const std::vector<std::string> r{"dtype-bf16", "dtype-fp16", "dtype-fp32", "batch>1", "decode", "past",
                                          "gqa", "mqa", "mask-left", "mask-holes", "position-ids", "window",
                                          "softcap"};
  return r;
}

FuzzReport run_model_fuzz(hf::Profile profile, Kernel& k, const FuzzOptions& o, const ModelGenLimits& limits,
                          hf::PathDefect defect) {
  FuzzReport report;
  report.kernel = std::string(k.name());
  report.property = fmt::format("integration/{}", hf::to_string(profile));
  report.seed = o.seed;
  const auto start = Clock::now();
  auto last_progress = Clock::now();
  std::map<std::string, std::int64_t> coverage;
  std::set<std::string> generated;  // features of every generated case, the unsupported ones too
  bool failing = false, time_up = false, exhausted = false;
  int attempts = 0, steps = 0;
  Clock::time_point fail_start;
  Finding current;
  auto budget_left = [&] {
    if (o.seconds > 0 && since(start) >= o.seconds) time_up = true;
    return !time_up && (o.cases == 0 || report.cases < o.cases);
  };

  const rc::Gen<ModelCase> gen = model_case_gen(limits);
  const std::string id = fmt::format("flashcheck/{}/integration/{}", k.name(), hf::to_string(profile));
  const auto property = rc::detail::toProperty([&]() {
    const ModelCase m = *gen;
    if (!failing) {
      if (!budget_left()) return;
    } else if (++attempts > o.shrink.attempts || since(fail_start) > o.shrink.seconds) {
      exhausted = true;
      return;
    }
    const IntegrationResult r = check_integration(profile, k, m, defect);
    const Verdict& v = r.verdict;
    if (!failing)
      for (const std::string& f : classify(m)) generated.insert(f);
    if (v.kind == VerdictKind::kUnsupported) {
      if (!failing) {
        ++report.unsupported;
        ++report.unsupported_reasons[v.reason];
      }
      RC_DISCARD(v.reason);
    }
    if (!failing) {
      ++report.cases;
      for (const std::string& f : classify(m)) ++coverage[f];
      if (o.on_progress && since(last_progress) > 0.5) {
        last_progress = Clock::now();
        o.on_progress(report.cases, static_cast<std::int64_t>(report.findings.size()), since(start));
      }
    }
    if (v.kind == VerdictKind::kPass || r.known) {
      if (!failing && r.known) ++report.known_divergences[r.known->id];
      if (!failing && v.kind == VerdictKind::kPass && v.cmp) {
        if (std::isfinite(v.cmp->ratio())) report.worst_ratio = std::max(report.worst_ratio, v.cmp->ratio());
        if (std::isfinite(v.cmp->bound_use())) report.worst_bound_use = std::max(report.worst_bound_use, v.cmp->bound_use());
      }
      return;  // a known divergence met while shrinking is another bug: not a smaller case of this one
    }
    if (!failing) {
      failing = true;
      fail_start = Clock::now();
      current = Finding{};
      current.case_index = report.cases;
    } else {
      ++steps;
    }
    current.model_case = m;
    current.verdict = v;
    RC_FAIL(v.reason);
  });

  QuietListener listener;
  std::unordered_map<std::string, rc::detail::Reproduce> reproduce_map;
  if (!o.reproduce.empty())
    for (const auto& [key, r] : rc::detail::configFromString(o.reproduce).reproduce) reproduce_map[id] = r;
  for (int chunk = 0; budget_left(); ++chunk) {
    rc::detail::TestParams params;
    params.seed = chunk_seed(o.seed, chunk);
    params.maxSize = o.max_size;
    params.maxDiscardRatio = 20;
    const std::int64_t left = o.cases == 0 ? 500 : o.cases - report.cases;
    params.maxSuccess = static_cast<int>(std::min<std::int64_t>(left, 500));
    rc::detail::TestMetadata meta;
    meta.id = id;
    meta.description = id;
    failing = exhausted = false;
    attempts = steps = 0;
    const rc::detail::TestResult result = rc::detail::checkProperty(property, meta, params, listener, reproduce_map);
    rc::detail::FailureResult failure;
    if (result.match(failure) && failing) {
      Finding f = current;
      f.shrink_steps = steps;
      f.shrink_attempts = attempts;
      f.shrink_budget_exhausted = exhausted;
      rc::detail::Configuration cfg;
      cfg.reproduce[id] = failure.reproduce;
      f.reproduce = rc::detail::configToMinimalString(cfg);
      ++report.failures;
      add_finding(report, std::move(f), [&](const Finding& x) { return save_model_finding(o.out_dir, profile, k, o, x); });
      if (o.stop_at_first_failure) break;
    }
    rc::detail::GaveUpResult gave_up;
    if (result.match(gave_up)) break;
    if (!o.reproduce.empty()) break;
  }
  report.seconds = since(start);
  report.coverage = coverage;
  // A feature the generator produced but the kernel's contract refused every time (softcap on SDPA, say)
  // is counted under unsupported, not missing; a feature never generated is missing.
  if (profile == hf::Profile::kHfMain && report.cases >= 1000)
    for (const std::string& f : required_model_coverage())
      if (!coverage.count(f) && !(generated.count(f) && report.unsupported > 0)) report.coverage_missing.push_back(f);
  return report;
}

}  // namespace flashcheck
