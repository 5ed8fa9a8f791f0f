#include <algorithm>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "report/github.h"
#include "cli/commands.h"
#include "report/junit.h"
#include "cli/option_checks.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/fixture.h"
#include "core/input_limits.h"
#include "properties/property.h"
#include "search/replay.h"
#include "search/worker.h"

namespace flashcheck::cli {
namespace {

// The host reference's time for `work` multiply-adds, at limits::kReferenceWorkPerSecond.
std::string reference_time(double work) {
  const double s = work / limits::kReferenceWorkPerSecond;
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.0f} h", s / 3600);
}

}  // namespace

int run_replay(const ReplayOptions& o) {
  std::vector<Kernel*> kernels;
  if (!resolve_kernels(o.kernels, kernels)) return kExitUsage;
  if (!check_timeout("replay", o.timeout)) return kExitUsage;
  std::vector<Fixture> fixtures;
  try {
    fixtures = load_fixtures(o.paths);
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck replay: {}\n", e.what());
    return kExitUsage;
  }
  // Estimated before anything runs: a valid case can still be enormous (a 65,536-token sequence), and would run for
  // minutes with no word.
  for (const Fixture& f : fixtures) {
    std::vector<std::pair<std::string, double>> works;
    for (std::size_t i = 0; i < f.cases.size(); ++i)
      works.emplace_back(fmt::format("case {} ({})", i, summary(f.cases[i].kcase)), case_work(f.cases[i].kcase));
    for (std::size_t i = 0; i < f.model_cases.size(); ++i)
      works.emplace_back(fmt::format("model case {} ({})", i, summary(f.model_cases[i].mcase)), case_work(f.model_cases[i].mcase));
    for (const auto& [which, work] : works) {
      if (work > o.max_work) {
        fmt::print(stderr,
                   "flashcheck replay: {}: {}: about {:.3g} multiply-adds for the fp64 reference (about {} of one core), "
                   "past --max-work {:.3g}; raise --max-work to run it\n",
                   f.path, which, work, reference_time(work), o.max_work);
        return kExitUsage;
      }
      if (work > limits::kWarnCaseWork)
        fmt::print(stderr, "flashcheck replay: {}: {}: about {:.3g} multiply-adds for the fp64 reference (about {} of one core)\n",
                   f.path, which, work, reference_time(work));
    }
  }
  IsolationOptions iso;
  iso.enabled = o.isolate;
  iso.timeout_seconds = o.timeout;
  // A fixture names its property; model-level ones (integration) stay on the host with a host kernel.
  const bool host_only = std::all_of(kernels.begin(), kernels.end(), [&](const Kernel* k) {
    return std::all_of(fixtures.begin(), fixtures.end(), [&](const Fixture& f) {
      const Property* p = find_property(f.property);
      return p ? stays_on_the_host(*k, *p) : k->device() == "cpu";
    });
  });
  if (host_only) iso.memory_limit = worker_memory_bytes(o.worker_memory);
  const std::vector<ReplayRecord> records = replay_fixtures(fixtures, kernels, iso);
  if (o.json) {
    std::cout << replay_json(records).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    // Quiet by default: a corpus replay is thousands of lines that went as recorded; what needs reading is what did
    // not (a fixed bug, NOW PASSES, included), then the table and the count of known bugs that still fail.
    std::size_t hidden = 0;
    for (const ReplayRecord& r : records) {
      if (o.verbose || !r.as_expected) print_replay_line(r);
      else ++hidden;
    }
    if (hidden > 0) fmt::print("({} case-kernel runs went as recorded and are not shown: --verbose shows them)\n", hidden);
    print_replay_summary(records);
  }
  JunitSuite suite{"flashcheck-replay", 0, {}};
  for (const ReplayRecord& r : records) {
    suite.seconds += r.verdict.seconds;
    suite.cases.push_back(junit_case(r));
  }
  if (!o.junit.empty()) write_junit_file(o.junit, junit_xml(suite));
  publish_to_github(suite, !o.json);
  for (const ReplayRecord& r : records)
    if (!r.as_expected) return kExitFailure;
  return kExitOk;
}

}  // namespace flashcheck::cli
