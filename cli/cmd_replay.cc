#include <fmt/format.h>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
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
    for (const ReplayRecord& r : records) print_replay_line(r);
    print_replay_summary(records);
  }
  for (const ReplayRecord& r : records)
    if (!r.as_expected) return kExitFailure;
  return kExitOk;
}

}  // namespace flashcheck::cli
