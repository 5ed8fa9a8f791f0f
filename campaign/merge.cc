#include "campaign/merge.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "campaign/campaign_journal.h"
#include "search/coverage.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;

CampaignSpec read_spec(const std::string& dir) {
  const fs::path path = fs::path(dir) / "campaign.json";
  std::ifstream in(path);
  if (!in) throw MergeError(fmt::format("{}: no campaign.json: not a campaign directory (flashcheck campaign --out DIR)", dir));
  try {
    return campaign_spec_from_json(nlohmann::json::parse(in), path.string());
  } catch (const nlohmann::json::exception& e) {
    throw MergeError(fmt::format("{}: not JSON: {}", path.string(), e.what()));
  } catch (const std::runtime_error& e) {
    throw MergeError(e.what());
  }
}

std::string shard_text(const Shard& s) { return fmt::format("{}/{}", s.index, s.count); }

// Shards of one campaign given twice would count its cases twice; shards missing leave it partial.
void check_shards(MergeResult& m) {
  std::map<std::string, std::map<int, std::string>> shards;  // identity without shard -> index -> dir
  std::map<std::string, int> counts;
  for (const MergedCampaign& c : m.campaigns) {
    const std::string id = campaign_identity(c.spec, false).dump();
    auto& seen = shards[id];
    if (seen.count(c.spec.shard.index))
      throw MergeError(fmt::format("{} and {} hold the same shard {} of one campaign: merging both would count its cases twice",
                                   seen[c.spec.shard.index], c.dir, shard_text(c.spec.shard)));
    if (counts.count(id) && counts[id] != c.spec.shard.count)
      throw MergeError(fmt::format("{}: shard {} of a campaign that {} splits into {} shards", c.dir, shard_text(c.spec.shard),
                                   seen.begin()->second, counts[id]));
    counts[id] = c.spec.shard.count;
    seen[c.spec.shard.index] = c.dir;
  }
  for (const auto& [id, seen] : shards) {
    const int n = counts[id];
    std::string missing;
    for (int i = 0; i < n; ++i)
      if (!seen.count(i)) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", i);
    if (!missing.empty())
      m.warnings.push_back(fmt::format("campaign of {}: shards {} of {} are not in this merge", seen.begin()->second, missing, n));
  }
  for (const MergedCampaign& c : m.campaigns)
    if (c.chunks_planned && c.chunks_done < *c.chunks_planned)
      m.warnings.push_back(fmt::format("{}: {} of its {} chunks done: rerun its campaign command to finish it", c.dir,
                                       c.chunks_done, *c.chunks_planned));
}

int chunks_owned(const CampaignSpec& s) {
  const std::optional<int> planned = s.planned_chunks();
  int runnable = 0;
  for (const CampaignUnit& u : s.units) runnable += u.not_applicable.empty();
  const int per_unit = *planned > s.shard.index ? (*planned - s.shard.index + s.shard.count - 1) / s.shard.count : 0;
  return per_unit * runnable;
}

}  // namespace

bool MergeResult::ok() const {
  return std::all_of(units.begin(), units.end(), [](const MergedUnit& u) { return u.report.ok() || !u.report.not_applicable.empty(); });
}

MergeResult merge_campaigns(const std::vector<std::string>& dirs) {
  if (dirs.empty()) throw MergeError("no campaign directory given");
  MergeResult m;
  std::map<std::pair<std::string, std::string>, std::size_t> unit_index;  // (kernel, property) -> units
  std::map<std::tuple<std::string, std::string, int>, std::size_t> worker_index;  // (dir, host, worker) -> workers
  std::vector<std::pair<std::string, ChunkRecord>> all;  // (dir, chunk) for the time axis
  m.first_start = std::numeric_limits<double>::infinity();
  for (const std::string& dir : dirs) {
    MergedCampaign c;
    c.dir = dir;
    c.spec = read_spec(dir);
    JournalContents j;
    try {
      j = read_journal((fs::path(dir) / "journal.jsonl").string());
    } catch (const std::runtime_error& e) {
      throw MergeError(e.what());
    }
    c.chunks_done = static_cast<int>(j.chunks.size());
    if (c.spec.planned_chunks()) c.chunks_planned = chunks_owned(c.spec);
    c.seconds_used = j.seconds_used();
    for (const SessionRecord& s : j.sessions) c.sessions += !s.end;
    c.torn_lines = j.torn_lines;
    for (const CampaignUnit& u : c.spec.units) {
      const auto key = std::make_pair(u.kernel, u.property);
      if (unit_index.count(key)) continue;
      unit_index[key] = m.units.size();
      MergedUnit mu;
      mu.report.kernel = u.kernel;
      mu.report.property = u.property;
      mu.report.seed = c.spec.seed;
      mu.report.not_applicable = u.not_applicable;
      mu.required_coverage = u.required_coverage;
      m.units.push_back(std::move(mu));
    }
    std::set<std::pair<int, int>> seen;  // (unit, chunk): a campaign records each chunk once
    const std::optional<int> planned = c.spec.planned_chunks();
    for (ChunkRecord& r : j.chunks) {
      const std::string where = fmt::format("{}/journal.jsonl: chunk {} of unit {}", dir, r.chunk, r.unit);
      if (r.unit < 0 || r.unit >= static_cast<int>(c.spec.units.size()))
        throw MergeError(fmt::format("{}: the campaign has no such unit", where));
      const CampaignUnit& unit = c.spec.units[static_cast<std::size_t>(r.unit)];
      if (unit.kernel != r.kernel || unit.property != r.property)
        throw MergeError(fmt::format("{}: names {} / {}, the unit is {} / {}", where, r.kernel, r.property, unit.kernel, unit.property));
      if (!seen.insert({r.unit, r.chunk}).second) throw MergeError(fmt::format("{}: recorded twice", where));
      if (r.chunk % c.spec.shard.count != c.spec.shard.index || (planned && r.chunk >= *planned))
        throw MergeError(fmt::format("{}: not a chunk of shard {}/{}{}", where, c.spec.shard.index, c.spec.shard.count,
                                     planned ? fmt::format(" (of {} chunks)", *planned) : std::string()));
      for (Finding& f : r.report.findings) {
        if (f.fixture.empty()) continue;
        // A finding's fixture is the campaign's own file, under its folder: a path that leaves it is not read.
        const fs::path rel = fs::path(f.fixture).lexically_normal();
        if (rel.is_absolute() || rel.empty() || *rel.begin() == "..")
          throw MergeError(fmt::format("{}: its finding's fixture {} lies outside the campaign folder", where, f.fixture));
        f.fixture = (fs::path(dir) / rel).string();
        std::error_code ec;
        if (!fs::is_regular_file(fs::symlink_status(f.fixture, ec)))
          m.warnings.push_back(fmt::format("{}: its finding's fixture {} is missing (deleted or moved)", where, f.fixture));
      }
      MergedUnit& mu = m.units[unit_index.at({r.kernel, r.property})];
      merge_reports(mu.report, r.report, /*keep_replaced=*/true);
      mu.report.seconds += r.report.seconds;
      mu.stats.merge(r.stats);
      const auto wkey = std::make_tuple(dir, r.host, r.worker);
      if (!worker_index.count(wkey)) {
        worker_index[wkey] = m.workers.size();
        m.workers.push_back(WorkerThroughput{dir, r.host, r.device, r.worker, 0, 0, {}});
      }
      WorkerThroughput& w = m.workers[worker_index[wkey]];
      w.cases += r.report.cases;
      w.busy_seconds += r.finished - r.started;
      m.first_start = std::min(m.first_start, r.started);
      all.emplace_back(dir, std::move(r));
    }
    m.campaigns.push_back(std::move(c));
  }
  if (all.empty()) m.first_start = 0;
  std::sort(m.workers.begin(), m.workers.end(), [](const WorkerThroughput& a, const WorkerThroughput& b) {
    return std::tie(a.dir, a.host, a.worker) < std::tie(b.dir, b.host, b.worker);
  });
  worker_index.clear();
  for (std::size_t i = 0; i < m.workers.size(); ++i) worker_index[{m.workers[i].dir, m.workers[i].host, m.workers[i].worker}] = i;
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second.finished < b.second.finished; });
  for (const auto& [dir, r] : all)
    m.workers[worker_index.at({dir, r.host, r.worker})].points.push_back({r.finished - m.first_start, r.report.cases, r.finished - r.started});
  // Coverage: the union of the inputs against the requirement the campaign settled from the kernel's contract.
  for (MergedUnit& mu : m.units) {
    if (!mu.report.not_applicable.empty()) {
      mu.required_coverage.clear();
      continue;
    }
    std::int64_t min_cases = 0;
    for (const MergedCampaign& c : m.campaigns)
      for (const CampaignUnit& u : c.spec.units)
        if (u.kernel == mu.report.kernel && u.property == mu.report.property) min_cases = u.coverage_min_cases;
    if (mu.report.cases < min_cases) mu.required_coverage.clear();
    Coverage cov;
    cov.counts = mu.report.coverage;
    cov.refused.insert(mu.report.coverage_refused.begin(), mu.report.coverage_refused.end());
    mu.report.coverage_missing = cov.missing(mu.required_coverage);
  }
  check_shards(m);
  return m;
}

}  // namespace flashcheck
