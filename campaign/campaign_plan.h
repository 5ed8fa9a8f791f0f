// What a campaign is (its definition, kept in DIR/campaign.json) and which chunks of which runs a shard
// owns. A campaign runs every listed property on every listed kernel (a unit each); each unit's cases come
// in chunks of kChunkCases, chunk c seeded by chunk_seed(seed, c) (search/fuzz.h). Shard i of N owns the
// chunks i, i + N, i + 2N, ... of every unit: shards never share a chunk, so they never repeat a case, and a
// shard run again runs the same chunks, so the same cases. With a case budget the chunks are fixed in
// advance (ceil(cases / kChunkCases) per unit, over all shards together); with a time budget a shard takes
// its chunks in order until its time is spent.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "search/fuzz.h"

namespace flashcheck {

struct Shard {
  int index = 0, count = 1;
};
// "i/N" with 0 <= i < N; nothing (and `error` says why) otherwise.
std::optional<Shard> parse_shard(std::string_view text, std::string& error);

// One property on one kernel. What its coverage must reach is settled when the campaign starts (from the
// kernel's contract), so that a merge needs no kernel of its own build.
struct CampaignUnit {
  std::string kernel, property;  // property: its label ("conformance", "integration/hf-main")
  std::string not_applicable;    // the property cannot run on this kernel (reason): no chunk runs
  std::vector<std::string> required_coverage;
  std::int64_t coverage_min_cases = 0;  // runs shorter than this are held to no feature list
};

struct CampaignSpec {
  std::vector<CampaignUnit> units;
  std::uint64_t seed = 1;
  std::int64_t cases = 0;  // per unit, all shards together (0: time budget)
  double seconds = 0;      // per shard, all its sessions together (0: case budget)
  Shard shard;
  int max_size = 100;
  GenLimits limits;
  ModelGenLimits model_limits;
  ShrinkBudget shrink;
  double case_timeout = 120;  // seconds before one case counts as hung

  // Chunks of one unit with a case budget, all shards together (with a time budget: no limit).
  std::optional<int> planned_chunks() const;
  // Cases chunk `chunk` judges at most.
  std::int64_t chunk_cases(int chunk) const;
  // The FuzzOptions of one chunk (the caller adds out_dir, inflight_dir and the time left).
  FuzzOptions chunk_options(int chunk) const;
};

// The part of a definition that decides which cases run: rerunning a campaign in its directory must not
// change it. Shards of one campaign differ only in `shard`.
nlohmann::json campaign_identity(const CampaignSpec& s, bool with_shard = true);

nlohmann::json to_json(const CampaignSpec& s);
// `where` names the file in errors (std::runtime_error "FILE: field: reason").
CampaignSpec campaign_spec_from_json(const nlohmann::json& j, const std::string& where);

// One chunk of one unit (an index into CampaignSpec::units).
struct WorkItem {
  int unit = 0, chunk = 0;
  bool operator<(const WorkItem& o) const { return unit != o.unit ? unit < o.unit : chunk < o.chunk; }
  bool operator==(const WorkItem&) const = default;
};
// A shard's chunks in campaign order: round r holds chunk index + r * count of every unit in turn.
class ShardPlan {
 public:
  explicit ShardPlan(const CampaignSpec& s);
  // Items in order, skipping units that cannot run; ends with a case budget, never with a time budget.
  std::optional<WorkItem> next();

 private:
  const CampaignSpec& spec_;
  int round_ = 0, unit_ = 0;
};

}  // namespace flashcheck
