#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <unistd.h>

#include "report/github.h"
#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/files.h"
#include "core/input_limits.h"
#include "properties/integration_property.h"
#include "report/junit.h"
#include "search/coverage.h"
#include "search/fuzz.h"
#include "search/worker.h"

namespace flashcheck::cli {

namespace {

bool options_in_range(const FuzzCommandOptions& o) {
  return check_count("fuzz", "--cases", o.cases, 0, kMaxFuzzCases) && check_seconds("fuzz", "--time", o.time, 0, kMaxSeconds) &&
         check_timeout("fuzz", o.timeout) && check_count("fuzz", "--shrink-attempts", o.shrink_attempts, 0, 10'000'000) &&
         check_seconds("fuzz", "--shrink-seconds", o.shrink_seconds, 0, kMaxSeconds) &&
         check_count("fuzz", "--max-len", o.sizes.max_len, 1, limits::kMaxLength) &&
         check_count("fuzz", "--max-batch", o.sizes.max_batch, 1, 4096) &&
         check_count("fuzz", "--max-heads", o.sizes.max_heads, 1, limits::kMaxHeads) &&
         check_seconds("fuzz", "--work-budget", o.sizes.work_budget, 1, 1e15);  // not seconds, but a finite positive number
}

}  // namespace

std::string feature_name_list() { return fmt::format("{}", fmt::join(kernel_feature_names(), ", ")); }

int run_fuzz_command(const FuzzCommandOptions& o) {
  if (!options_in_range(o)) return kExitUsage;
  if (o.out.empty()) {
    fmt::print(stderr, "flashcheck fuzz: --out is empty (found fixtures and the in-flight case need a folder)\n");
    return kExitUsage;
  }
  std::vector<Kernel*> kernels;
  if (!resolve_kernels({o.kernel}, kernels)) return kExitUsage;
  const bool every_property = std::find(o.properties.begin(), o.properties.end(), "all") != o.properties.end();
  std::vector<std::unique_ptr<Property>> per_profile;
  std::vector<const Property*> runs;
  if (!resolve_runs(o.properties, o.profiles, "flashcheck fuzz", per_profile, runs)) return kExitUsage;
  // The features a steered run requires, checked on every run before any starts: a name that is no feature, or
  // features this kernel and property cannot have together.
  GenLimits steer;
  if (const std::string why = parse_required_features(o.require, steer); !o.require.empty() && !why.empty()) {
    fmt::print(stderr, "flashcheck fuzz: --require: {}\n", printable(why, 600));
    return kExitUsage;
  }
  if (steer.gqa_group > o.sizes.max_heads) {
    fmt::print(stderr, "flashcheck fuzz: --require gqa={} needs at least {} query heads; --max-heads is {}\n", steer.gqa_group,
               steer.gqa_group, o.sizes.max_heads);
    return kExitUsage;
  }
  const auto run_limits = [&](FuzzOptions& fo) {
    apply_case_sizes(o.sizes, fo.max_size, fo.limits, fo.model_limits);
    fo.limits.require = steer.require;
    fo.limits.gqa_group = steer.gqa_group;
  };
  if (!o.require.empty())
    for (const Property* p : runs) {
      FuzzOptions fo;
      run_limits(fo);
      if (const std::string why = required_features_unmet(*p, *kernels[0], fo.limits); !why.empty()) {
        fmt::print(stderr, "flashcheck fuzz: --require: {}\n", why);
        return kExitUsage;
      }
    }
  if (const std::string why = reproduce_problem(o.reproduce); !why.empty()) {
    fmt::print(stderr, "flashcheck fuzz: --reproduce: {}\n", printable(why, 300));
    return kExitUsage;
  }
  if (o.cases <= 0 && o.time <= 0 && o.reproduce.empty()) {
    fmt::print(stderr, "flashcheck fuzz: give --cases N or --time SECONDS\n");
    return kExitUsage;
  }
  // One run at a time per output folder: two would save their crashes under each other's in-flight cases.
  std::optional<FolderLock> lock;
  if (!o.out.empty()) {
    ensure_output_dir(o.out);
    lock.emplace(o.out, ".flashcheck-fuzz.lock", "flashcheck fuzz");
  }
  const std::vector<KnownDefect> known = load_known_defects(o.known, "fuzz");  // before the run: bad paths fail fast
  std::vector<FuzzReport> reports;
  const bool tty = ::isatty(STDERR_FILENO);
  nlohmann::json all = nlohmann::json::array();
  JunitSuite suite{"flashcheck-fuzz", 0, {}};
  bool ok = true;
  auto options = [&](const std::string& label) {
    FuzzOptions fo;
    fo.cases = o.cases;
    fo.seconds = o.time;
    fo.seed = o.seed;
    fo.shrink = {o.shrink_attempts, o.shrink_seconds};
    fo.out_dir = o.out;
    fo.reproduce = o.reproduce;
    fo.worker_memory = worker_memory_bytes(o.worker_memory);
    fo.on_progress = [label, tty, total = o.cases, limit = o.time, last_line = -10.0](std::int64_t cases, std::int64_t failures,
                                                                                    double seconds) mutable {
      const double rate = cases / std::max(seconds, 1e-9);
      // The budget and what is left of it: cases at the rate so far, or the time limit, whichever ends the run first.
      double eta = -1;
      if (total > 0 && rate > 0) eta = static_cast<double>(total - cases) / rate;
      if (limit > 0) eta = eta < 0 ? limit - seconds : std::min(eta, limit - seconds);
      const std::string of = total > 0 ? fmt::format(" of {}", total) : "";
      const std::string left = eta >= 0 ? fmt::format(", about {:.0f} s left", std::max(eta, 0.0)) : "";
      const std::string line = fmt::format("{}: {}{} cases, {:.1f} cases/s, {} failures, {:.0f} s{}", label, cases, of, rate,
                                           failures, seconds, left);
      if (tty) {
        fmt::print(stderr, "\r{:<100}", line);
      } else if (seconds - last_line >= 10) {
        fmt::print(stderr, "{}\n", line);
        last_line = seconds;
      }
    };
    return fo;
  };
  for (const Property* p : runs) {
    FuzzOptions fo = options(fmt::format("{} / {}", kernels[0]->name(), p->label()));
    run_limits(fo);
    FuzzReport r;
    try {
      r = o.isolate ? run_fuzz_isolated(*kernels[0], *p, fo, o.timeout) : run_fuzz(*kernels[0], *p, fo);
    } catch (const FuzzAborted& e) {  // the cases judged so far, then the reason
      if (tty) fmt::print(stderr, "\r{:<100}\r", "");
      if (o.json)
        std::cout << nlohmann::json::array({to_json(e.report)}).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                  << "\n";
      else print_fuzz_report(e.report);
      fmt::print(stderr, "flashcheck fuzz: stopped: {}\n", e.what());
      return kExitUsage;
    }
    if (tty) fmt::print(stderr, "\r{:<100}\r", "");
    // `--property all` means every property that applies: one that cannot run on this kernel is reported,
    // not failed. A property named explicitly that cannot run is a failure.
    const bool skipped = !r.not_applicable.empty() && every_property;
    ok = ok && (r.ok() || skipped);
    if (o.json) all.push_back(to_json(r));
    else print_fuzz_report(r);
    suite.seconds += r.seconds;
    suite.cases.push_back(junit_case(r, "fuzz", command_name()));
    reports.push_back(std::move(r));
  }
  // One bug, one row: the properties' findings grouped by their condition, each labelled with the fixture that
  // records it, if one does.
  if (!o.json && runs.size() > 1) fmt::print("{}", root_cause_lines(root_causes(reports, known)));
  if (o.json) std::cout << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!o.junit.empty()) write_junit_file(o.junit, junit_xml(suite));
  publish_to_github(suite, !o.json);
  return ok ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
