// `flashcheck merge`: campaign directories (shards, resumed runs, other campaigns) added up into one result:
// totals per kernel x property, findings de-duplicated by signature across directories (the smallest case
// kept, counts summed), coverage as the union, the plots' statistics, and throughput per worker. A merge
// reads its inputs and never changes them.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "campaign/campaign_plan.h"
#include "search/case_stats.h"
#include "search/fuzz_report.h"
#include "search/root_causes.h"

namespace flashcheck {

struct MergedCampaign {  // one input directory
  std::string dir;
  CampaignSpec spec;
  int chunks_done = 0;
  std::optional<int> chunks_planned;  // case budget: the chunks this shard owns
  double seconds_used = 0;
  int sessions = 0;
  int torn_lines = 0;
};

struct MergedUnit {
  FuzzReport report;  // finding fixtures are paths under their campaign directory
  CaseStats stats;
  std::vector<std::string> required_coverage;  // empty when the merged cases are too few to be held to it
};

// One chunk as a point of a worker's throughput over time.
struct ThroughputPoint {
  double finished = 0;  // seconds since the first chunk of the merge started
  std::int64_t cases = 0;
  double seconds = 0;
};

struct WorkerThroughput {
  std::string dir, host, device;
  int worker = 0;
  std::int64_t cases = 0;
  double busy_seconds = 0;  // sum of its chunks' spans
  std::vector<ThroughputPoint> points;
  double cases_per_second() const { return busy_seconds > 0 ? cases / busy_seconds : 0; }
};

struct MergeResult {
  std::vector<MergedCampaign> campaigns;
  std::vector<MergedUnit> units;  // in order of first appearance
  std::vector<WorkerThroughput> workers;
  std::vector<std::string> warnings;  // shards missing, campaigns not finished
  double first_start = 0;             // Unix time of the earliest chunk
  std::vector<RootCause> root_causes;  // every unit's findings by condition (set by the caller: it knows the fixtures)
  bool ok() const;
};

// Bad input: a directory that is not a campaign, a malformed journal, one shard given twice.
struct MergeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

MergeResult merge_campaigns(const std::vector<std::string>& dirs);

}  // namespace flashcheck
