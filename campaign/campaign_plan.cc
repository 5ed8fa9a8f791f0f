#include "campaign/campaign_plan.h"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace flashcheck {
namespace {

nlohmann::json limits_json(const CampaignSpec& s) {
  nlohmann::json j{{"max_size", s.max_size},
          {"max_len", s.limits.max_len},
          {"max_batch", s.limits.max_batch},
          {"max_heads", s.limits.max_heads},
          {"work_budget", s.limits.work_budget},
          {"model_max_batch", s.model_limits.max_batch},
          {"model_max_q_len", s.model_limits.max_q_len},
          {"model_max_past", s.model_limits.max_past},
          {"model_max_heads", s.model_limits.max_heads}};
  // Only when narrowed, so that the identity of an unnarrowed campaign is what it always was.
  if (!s.limits.dtypes.empty()) {
    std::vector<std::string> names;
    for (DType t : s.limits.dtypes) names.emplace_back(to_string(t));
    j["dtypes"] = names;
  }
  if (!s.limits.head_dims.empty()) j["head_dims"] = s.limits.head_dims;
  return j;
}

}  // namespace

std::optional<Shard> parse_shard(std::string_view text, std::string& error) {
  const std::size_t slash = text.find('/');
  Shard s;
  auto number = [](std::string_view t, int& out) {
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc() && end == t.data() + t.size() && !t.empty();
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), s.index) || !number(text.substr(slash + 1), s.count)) {
    error = fmt::format("shard '{}' is not i/N (two whole numbers, e.g. 0/4)", text);
    return std::nullopt;
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count) {
    error = fmt::format("shard '{}': the index must be 0..N-1 and N at least 1", text);
    return std::nullopt;
  }
  return s;
}

std::optional<int> CampaignSpec::planned_chunks() const {
  if (cases <= 0) return std::nullopt;
  return static_cast<int>((cases + kChunkCases - 1) / kChunkCases);
}

std::int64_t CampaignSpec::chunk_cases(int chunk) const {
  if (cases <= 0) return kChunkCases;
  return std::clamp<std::int64_t>(cases - kChunkCases * chunk, 0, kChunkCases);
}

FuzzOptions CampaignSpec::chunk_options(int chunk) const {
  FuzzOptions o;
  o.cases = chunk_cases(chunk);
  o.seed = seed;
  o.max_size = max_size;
  o.limits = limits;
  o.model_limits = model_limits;
  o.shrink = shrink;
  return o;
}

nlohmann::json campaign_identity(const CampaignSpec& s, bool with_shard) {
  nlohmann::json units = nlohmann::json::array();
  for (const CampaignUnit& u : s.units) units.push_back({{"kernel", u.kernel}, {"property", u.property}});
  nlohmann::json j{{"units", units}, {"seed", s.seed}, {"cases", s.cases}, {"limits", limits_json(s)}};
  if (with_shard) j["shard"] = fmt::format("{}/{}", s.shard.index, s.shard.count);
  return j;
}

nlohmann::json to_json(const CampaignSpec& s) {
  nlohmann::json units = nlohmann::json::array();
  for (const CampaignUnit& u : s.units)
    units.push_back({{"kernel", u.kernel},
                     {"property", u.property},
                     {"not_applicable", u.not_applicable},
                     {"required_coverage", u.required_coverage},
                     {"coverage_min_cases", u.coverage_min_cases}});
  return {{"format", "flashcheck-campaign/1"},
          {"units", units},
          {"seed", s.seed},
          {"cases", s.cases},
          {"seconds", s.seconds},
          {"shard", fmt::format("{}/{}", s.shard.index, s.shard.count)},
          {"limits", limits_json(s)},
          {"shrink_attempts", s.shrink.attempts},
          {"shrink_seconds", s.shrink.seconds},
          {"case_timeout", s.case_timeout}};
}

CampaignSpec campaign_spec_from_json(const nlohmann::json& j, const std::string& where) {
  std::string field = "format";
  try {
    if (j.at("format") != "flashcheck-campaign/1")
      throw std::runtime_error(fmt::format("{}: format: '{}' is not flashcheck-campaign/1", where, j.at("format").dump()));
    CampaignSpec s;
    field = "units";
    for (const auto& u : j.at("units"))
      s.units.push_back({u.at("kernel"), u.at("property"), u.at("not_applicable"),
                         u.at("required_coverage").get<std::vector<std::string>>(), u.at("coverage_min_cases")});
    field = "seed";
    s.seed = j.at("seed");
    field = "cases";
    s.cases = j.at("cases");
    field = "seconds";
    s.seconds = j.at("seconds");
    field = "shard";
    std::string error;
    const std::optional<Shard> shard = parse_shard(j.at("shard").get<std::string>(), error);
    if (!shard) throw std::runtime_error(fmt::format("{}: shard: {}", where, error));
    s.shard = *shard;
    field = "limits";
    const nlohmann::json& l = j.at("limits");
    s.max_size = l.at("max_size");
    s.limits = {l.at("max_len"), l.at("max_batch"), l.at("max_heads"), l.at("work_budget"), {}, {}};
    if (l.contains("dtypes"))
      for (const std::string& name : l.at("dtypes").get<std::vector<std::string>>()) {
        const std::optional<DType> t = parse_dtype(name);
        if (!t) throw std::runtime_error(fmt::format("{}: limits.dtypes: unknown dtype '{}'", where, name));
        s.limits.dtypes.push_back(*t);
      }
    if (l.contains("head_dims")) s.limits.head_dims = l.at("head_dims").get<std::vector<std::int64_t>>();
    s.model_limits = {l.at("model_max_batch"), l.at("model_max_q_len"), l.at("model_max_past"), l.at("model_max_heads")};
    field = "shrink_attempts";
    s.shrink.attempts = j.at("shrink_attempts");
    field = "shrink_seconds";
    s.shrink.seconds = j.at("shrink_seconds");
    field = "case_timeout";
    s.case_timeout = j.at("case_timeout");
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}: {}", where, field, e.what()));
  }
}

ShardPlan::ShardPlan(const CampaignSpec& s) : spec_(s) {}

std::optional<WorkItem> ShardPlan::next() {
  const std::optional<int> planned = spec_.planned_chunks();
  bool runnable = false;
  for (const CampaignUnit& u : spec_.units) runnable = runnable || u.not_applicable.empty();
  if (!runnable) return std::nullopt;
  for (;;) {
    const int chunk = spec_.shard.index + round_ * spec_.shard.count;
    if (planned && chunk >= *planned) return std::nullopt;
    const int unit = unit_;
    if (++unit_ == static_cast<int>(spec_.units.size())) {
      unit_ = 0;
      ++round_;
    }
    if (spec_.units[unit].not_applicable.empty()) return WorkItem{unit, chunk};
  }
}

}  // namespace flashcheck
