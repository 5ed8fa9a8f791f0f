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
#include "properties/property.h"
#include "search/replay.h"

namespace flashcheck::cli {

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
  IsolationOptions iso;
  iso.enabled = o.isolate;
  iso.timeout_seconds = o.timeout;
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
