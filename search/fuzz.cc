#include "search/fuzz.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <rapidcheck.h>
#include <set>
#include <stdexcept>
#include <variant>

#include "core/error.h"
#include "core/files.h"
#include "kernels/device_errors.h"
#include "search/case_gen.h"
#include "search/coverage.h"
#include "search/found_cases.h"
#include "search/worker.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// RapidCheck prints nothing: the driver reports.
class QuietListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// What a run must reach: the property's feature list on the run's contract, or, when the run requires features
// (--require), those (a steered run is not expected to reach the rest).
std::vector<std::string> run_coverage(const Property& p, const Kernel& k, const GenLimits& lim, std::int64_t cases) {
  if (lim.require.empty() && lim.gqa_group == 0) return required_coverage(p, run_contract(k, lim), cases);
  std::vector<std::string> r;
  for (const std::string& f : lim.require)
    if (f != "causal") r.push_back(f);
  return r;
}

// Everything the property lambda updates while RapidCheck drives it.
struct RunState {
  Kernel& k;
  const Property& p;
  const FuzzOptions& o;
  const FuzzHooks& hooks;
  // The run's narrowing (--dtype/--head-dim), which shrinking must respect too: a JIT-compiled kernel would
  // compile every head dim the shrinker tries.
  const bool narrowed_run = !o.limits.dtypes.empty() || !o.limits.head_dims.empty();
  const Contract narrowed = run_contract(k, o.limits);
  Clock::time_point start = Clock::now();
  Clock::time_point last_progress = Clock::now();
  FuzzReport report;
  Coverage coverage;
  std::set<std::string> generated;  // model level: features of every generated case, the refused ones too
  bool time_up = false;
  // Shrinking of the current failure.
  bool failing = false;
  Clock::time_point fail_start;
  int attempts = 0, steps = 0;
  bool exhausted = false;
  Finding current;
  std::string inflight;
  // A harness error (the output folder cannot be written): the run stops, keeping what it found. Never thrown
  // inside the property: RapidCheck would take the exception for a failure and shrink on it.
  std::string harness_error;

  bool budget_left() {
    if (!harness_error.empty()) return false;
    if (o.seconds > 0 && since(start) >= o.seconds) time_up = true;
    return !time_up && (o.cases == 0 || report.cases < o.cases);
  }

  // One generated (or shrunk) case: judged, counted, and reported to RapidCheck as pass, discard or failure.
  void on_case(const AnyCase& c) {
    if (!harness_error.empty()) return;
    if (!failing) {
      if (!budget_left()) return;  // over budget: let RapidCheck finish its count without work
    } else if (++attempts > o.shrink.attempts || since(fail_start) > o.shrink.seconds) {
      exhausted = true;
      return;  // stop the greedy descent: every further candidate "passes"
    }
    if (narrowed_run)
      if (const KernelCase* kc = std::get_if<KernelCase>(&c); kc && !check_contract(narrowed, *kc).supported)
        RC_DISCARD("outside the run's --dtype/--head-dim");
    if (const KernelCase* kc = std::get_if<KernelCase>(&c); kc && !has_required_features(*kc, o.limits))
      RC_DISCARD("without a feature the run requires (--require)");
    if (!inflight.empty()) {
      try {
        write_inflight(inflight, c);
      } catch (const OutputError& e) {
        harness_error = e.what();
        return;
      }
    }
    if (hooks.on_case_start) hooks.on_case_start();
    std::optional<Judgement> judged;
    try {
      judged = p.judge(k, c);
    } catch (const std::bad_alloc&) {
      // The kernel's own allocations fail inside its call and come back as its error; this one is the harness's
      // (inputs, references, comparisons): never the kernel's fault, and never a finding to shrink.
      harness_error = fmt::format(
          "the harness ran out of memory judging a case ({}){}: a harness error, not a kernel finding; give the worker "
          "more memory (--worker-memory) or draw smaller cases",
          std::visit([](const auto& x) { return summary(x); }, c),
          worker_memory_limit() > 0 ? " under " + worker_memory_limit_text() : "");
      return;
    }
    if (hooks.on_case_end) hooks.on_case_end();
    const Judgement& j = *judged;
    const Verdict& v = j.verdict;
    if (!failing && p.level() == CaseLevel::kModel)
      for (const std::string& f : classify(c)) generated.insert(f);
    if (v.kind == VerdictKind::kUnsupported) {
      if (!failing) {
        ++report.unsupported;
        ++report.unsupported_reasons[v.reason];
      }
      RC_DISCARD(v.reason);
    }
    if (!failing) {
      ++report.cases;
      if (hooks.on_counted) hooks.on_counted(report.cases);
      coverage.add(c);
      if (hooks.on_judged) hooks.on_judged(c, v);
      if (o.on_progress && since(last_progress) > 0.5) {
        last_progress = Clock::now();
        o.on_progress(report.cases, static_cast<std::int64_t>(report.findings.size()), since(start));
      }
    }
    const bool known = !j.known_divergence.empty();
    if (v.kind == VerdictKind::kPass || known) {
      if (!failing && known) ++report.known_divergences[j.known_divergence];
      if (!failing && v.kind == VerdictKind::kPass && v.cmp) {
        if (std::isfinite(v.cmp->ratio())) report.worst_ratio = std::max(report.worst_ratio, v.cmp->ratio());
        if (std::isfinite(v.cmp->bound_use()) && v.cmp->bound_use() > report.worst_bound_use) {
          report.worst_bound_use = v.cmp->bound_use();
          report.closest_pass = std::visit([](const auto& x) { return summary(x); }, c);
        }
      }
      return;  // a known divergence met while shrinking is another bug, not a smaller case of this one
    }
    if (!failing) {
      failing = true;
      fail_start = Clock::now();
      current = Finding{};
      current.case_index = report.cases;
    } else {
      ++steps;
    }
    set_finding_case(current, c);
    current.verdict = v;
    RC_FAIL(v.reason);
  }
};

FuzzReport drive(Kernel& k, const Property& p, const FuzzOptions& o, const FuzzHooks& hooks) {
  RunState st{k, p, o, hooks};
  FuzzReport& report = st.report;
  report.kernel = std::string(k.name());
  report.property = p.label();
  report.seed = o.seed;
  report.not_applicable = not_applicable_reason(k, p, o.limits);
  if (!report.not_applicable.empty()) return report;
  if (const std::string& dir = o.inflight_dir.empty() ? o.out_dir : o.inflight_dir; !dir.empty()) {
    fs::create_directories(dir);
    st.inflight = inflight_path(dir, k, p);
  }
  const rc::Gen<AnyCase> gen = case_gen(p, k, o.limits, o.model_limits);
  const std::string id = fmt::format("flashcheck/{}/{}", k.name(), p.label());
  const auto property = rc::detail::toProperty([&st, &gen]() { st.on_case(*gen); });

  QuietListener listener;
  if (const std::string why = reproduce_problem(o.reproduce); !why.empty()) throw std::invalid_argument("--reproduce: " + why);
  std::unordered_map<std::string, rc::detail::Reproduce> reproduce_map;
  if (!o.reproduce.empty())
    for (const auto& [key, r] : rc::detail::configFromString(o.reproduce).reproduce) reproduce_map[id] = r;  // one property
  for (int chunk = hooks.first_chunk; st.budget_left() && (hooks.max_chunks == 0 || chunk < hooks.first_chunk + hooks.max_chunks);
       ++chunk) {
    if (hooks.on_chunk) hooks.on_chunk(chunk);
    rc::detail::TestParams params;
    params.seed = chunk_seed(o.seed, chunk);
    params.maxSize = o.max_size;
    params.maxDiscardRatio = 20;
    const std::int64_t left = o.cases == 0 ? kChunkCases : o.cases - report.cases;
    params.maxSuccess = static_cast<int>(std::min(left, kChunkCases));
    rc::detail::TestMetadata meta;
    meta.id = id;
    meta.description = id;
    st.failing = st.exhausted = false;
    st.attempts = st.steps = 0;
    const rc::detail::TestResult result = rc::detail::checkProperty(property, meta, params, listener, reproduce_map);
    rc::detail::FailureResult failure;
    if (result.match(failure) && st.failing) {
      Finding f = st.current;
      f.shrink_steps = st.steps;
      f.shrink_attempts = st.attempts;
      f.shrink_budget_exhausted = st.exhausted;
      rc::detail::Configuration cfg;
      cfg.reproduce[id] = failure.reproduce;
      f.reproduce = rc::detail::configToMinimalString(cfg);
      ++report.failures;
      add_finding(report, std::move(f), [&](const Finding& x) {
        try {
          return save_finding(o.out_dir, k, p, o.seed, x);
        } catch (const OutputError& e) {  // reported without a fixture; the run stops below
          st.harness_error = e.what();
          return std::string();
        }
      });
      if (o.stop_at_first_failure || !st.harness_error.empty()) break;
    }
    rc::detail::GaveUpResult gave_up;
    if (result.match(gave_up)) break;  // the generator cannot produce enough judgeable cases
    if (!o.reproduce.empty()) break;   // a reproduction runs once
  }
  report.seconds = since(st.start);
  report.coverage = st.coverage.counts;
  if (report.unsupported > 0) {
    st.coverage.refused = st.generated;
    report.coverage_refused.assign(st.generated.begin(), st.generated.end());
  }
  report.coverage_missing = st.coverage.missing(run_coverage(p, k, o.limits, report.cases));
  if (!st.inflight.empty()) remove_file(st.inflight);
  if (!st.harness_error.empty()) throw FuzzAborted(st.harness_error, std::move(report));
  return report;
}

// Before a run writes its in-flight descriptor: the output folder exists, and a descriptor left by an
// earlier run that was killed (its only record of the case it died in) is kept under another name.
void prepare_out_dir(const FuzzOptions& o, const Kernel& k, const Property& p) {
  if (o.out_dir.empty()) return;
  ensure_output_dir(o.out_dir);
  keep_earlier_inflight(inflight_path(o.out_dir, k, p));
}

}  // namespace

std::string not_applicable_reason(const Kernel& k, const Property& p, const GenLimits& lim) {
  std::string why = p.unsupported_reason(k);
  if (why.empty()) why = requirements_unmet(k.contract(), p.requirements());
  if (why.empty() && p.level() == CaseLevel::kKernel) why = narrowing_unmet(k, lim);
  return why;
}

std::uint64_t chunk_seed(std::uint64_t seed, int chunk) {  // splitmix64 of the run's seed
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(chunk + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string reproduce_problem(const std::string& s) {
  if (s.empty()) return "";
  try {
    const std::size_t n = rc::detail::configFromString(s).reproduce.size();
    if (n == 1) return "";
    return n == 0 ? "holds no reproduce= entry (give the rc_reproduce string of a found fixture, e.g. \"reproduce=...\")"
                  : fmt::format("holds {} reproduce entries; a fuzz run replays one", n);
  } catch (const std::exception& e) {
    return std::string("not a RapidCheck reproduce string: ") + e.what();
  }
}

FuzzReport run_fuzz(Kernel& k, const Property& p, const FuzzOptions& o, const FuzzHooks& hooks) {
  prepare_out_dir(o, k, p);
  return drive(k, p, o, hooks);
}

FuzzReport run_fuzz_isolated(Kernel& k, const Property& p, const FuzzOptions& o, double case_timeout_seconds) {
  FuzzReport total;
  total.kernel = std::string(k.name());
  total.property = p.label();
  total.seed = o.seed;
  prepare_out_dir(o, k, p);
  const std::string dir = o.out_dir.empty() ? (fs::temp_directory_path() / fmt::format("flashcheck-{}", ::getpid())).string()
                                            : o.out_dir;
  ensure_output_dir(dir);
  const auto start = Clock::now();
  int next_chunk = 0;
  for (;;) {
    const std::int64_t done_cases = total.cases;
    FuzzOptions child = o;
    child.out_dir = dir;
    if (o.cases > 0) child.cases = o.cases - done_cases;
    if (o.seconds > 0) child.seconds = std::max(0.01, o.seconds - since(start));
    std::int64_t child_cases = 0, child_failures = 0;
    bool reported = false;
    std::string aborted;
    // Messages: "C <chunk>" a chunk starts; "N <cases>" a case was counted; "P <cases> <failures>" progress;
    // "R <report JSON>" the end; "A <reason>" the run stopped on a harness error (after its "R").
    const WorkerBody body = [&, child](WorkerChannel& ch) mutable {
      child.on_progress = [&ch](std::int64_t c, std::int64_t f, double) { ch.send('P', fmt::format("{} {}", c, f)); };
      FuzzHooks hooks;
      hooks.first_chunk = next_chunk;
      hooks.on_chunk = [&ch](int chunk) { ch.send('C', std::to_string(chunk)); };
      hooks.on_case_start = [&ch] { ch.begin("case"); };
      hooks.on_case_end = [&ch] { ch.end(); };
      hooks.on_counted = [&ch](std::int64_t cases) { ch.send('N', std::to_string(cases)); };
      // Fixtures were written by the worker. Bytes of a kernel's message that are not UTF-8 are replaced.
      const auto send_report = [&ch](const FuzzReport& r) {
        ch.send('R', to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      };
      try {
        send_report(drive(k, p, child, hooks));
      } catch (const FuzzAborted& e) {  // the report so far, then why the run stopped
        send_report(e.report);
        ch.send('A', printable(e.what(), 2000));
      }
    };
    const WorkerHandler on_message = [&](char tag, const std::string& payload) {
      if (tag == 'C') {
        next_chunk = std::stoi(payload);
      } else if (tag == 'N') {
        child_cases = std::stoll(payload);
      } else if (tag == 'P') {
        std::int64_t shown = 0;
        std::sscanf(payload.c_str(), "%ld %ld", &shown, &child_failures);
        if (o.on_progress)
          o.on_progress(done_cases + child_cases, static_cast<std::int64_t>(total.findings.size()) + child_failures,
                        since(start));
      } else if (tag == 'R') {
        merge_reports(total, fuzz_report_from_json(nlohmann::json::parse(payload)));
        reported = true;
      } else if (tag == 'A') {
        aborted = payload;
      }
    };
    WorkerOptions wo{.isolate = true, .item_timeout = case_timeout_seconds};
    if (stays_on_the_host(k, p))
      wo.memory_limit = o.worker_memory < 0 ? default_worker_memory() : o.worker_memory;
    const WorkerExit x = run_worker(body, on_message, wo);
    if (!aborted.empty() || !x.error.empty()) {  // a harness error (an unwritable --out): stop, keeping what was found
      if (!reported) total.cases += child_cases;
      total.seconds = since(start);
      throw FuzzAborted(aborted.empty() ? "fuzz worker: " + x.error : aborted, std::move(total));
    }
    if (reported) break;
    // The worker died (or hung): the case in flight is the last descriptor it wrote. It counts as a judged
    // case, so that a kernel that hangs on every case still ends a run of N cases after N workers.
    total.cases += child_cases + 1;
    ++total.crashes;
    ++total.failures;
    Finding f;
    f.case_index = done_cases + child_cases + 1;
    f.verdict.kernel = std::string(k.name());
    f.verdict.property = p.label();
    f.verdict.kind = x.timed_out ? VerdictKind::kTimeout : VerdictKind::kCrash;
    f.verdict.reason = x.died_in ? x.reason : "worker died between cases: " + x.reason;
    if (const std::optional<AnyCase> c = read_inflight(inflight_path(o.inflight_dir.empty() ? dir : o.inflight_dir, k, p))) {
      set_finding_case(f, *c);
      std::string save_error;
      add_finding(total, f, [&](const Finding& y) {
        try {
          return save_finding(o.out_dir, k, p, o.seed, y);
        } catch (const OutputError& e) {  // reported without a fixture, and the run stops
          save_error = e.what();
          return std::string();
        }
      });
      if (!save_error.empty()) {
        total.seconds = since(start);
        throw FuzzAborted(save_error, std::move(total));  // the descriptor stays: the crash's only record on disk
      }
      remove_file(inflight_path(dir, k, p));  // saved as the finding's fixture: not a killed run's record
    } else {
      total.findings.push_back(f);  // no descriptor: still a recorded crash
    }
    if (o.stop_at_first_failure) break;
    if ((o.cases > 0 && total.cases >= o.cases) || (o.seconds > 0 && since(start) >= o.seconds)) break;
    ++next_chunk;  // resume after the chunk that crashed, with a fresh seed
  }
  total.seconds = since(start);
  Coverage cov;
  cov.counts = total.coverage;
  cov.refused.insert(total.coverage_refused.begin(), total.coverage_refused.end());
  total.coverage_missing = total.not_applicable.empty() ? cov.missing(run_coverage(p, k, o.limits, total.cases))
                                                        : std::vector<std::string>{};
  if (o.out_dir.empty()) remove_tree(dir);
  return total;
}

std::string required_features_unmet(const Property& p, const Kernel& k, const GenLimits& lim) {
  if (lim.require.empty() && lim.gqa_group == 0) return "";
  if (p.level() == CaseLevel::kModel)
    return fmt::format("{} draws model-level cases; --require steers kernel-level properties", p.label());
  constexpr int kDraws = 2000;
  const rc::Gen<AnyCase> gen = case_gen(p, k, lim, {});
  rc::Random random(std::uint64_t{0x5eed});
  for (int i = 0; i < kDraws; ++i) {
    const rc::Random one = random.split();
    try {
      const AnyCase c = gen(one, i % 101).value();
      if (const KernelCase* kc = std::get_if<KernelCase>(&c); kc && has_required_features(*kc, lim)) return "";
    } catch (const std::exception&) {  // a generation failure: draw again
    }
  }
  std::vector<std::string> names = lim.require;
  if (lim.gqa_group > 0) names.push_back(fmt::format("gqa={}", lim.gqa_group));
  return fmt::format("none of {} cases drawn for {} / {} has {}: the kernel's contract (`flashcheck list`), the property's "
                     "requirements or the size limits (--max-len, --max-heads, --max-batch) exclude them",
                     kDraws, k.name(), p.label(), fmt::join(names, ", "));
}

}  // namespace flashcheck
