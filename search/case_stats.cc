#include "search/case_stats.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "search/coverage.h"

namespace flashcheck {
namespace {

void add_cell(WorstCell& cell, const CaseSample& s) {
  ++cell.cases;
  if (s.compared && std::isfinite(s.bound_use)) cell.worst = std::max(cell.worst, s.bound_use);
}

void merge_cell(WorstCell& into, const WorstCell& part) {
  into.cases += part.cases;
  into.worst = std::max(into.worst, part.worst);
}

nlohmann::json cell_json(const WorstCell& c) { return nlohmann::json::array({c.cases, c.worst}); }
WorstCell cell_from_json(const nlohmann::json& j) { return {j.at(0).get<std::int64_t>(), j.at(1).get<double>()}; }

}  // namespace

CaseSample case_sample(const AnyCase& c, const Verdict& v) {
  CaseSample s;
  s.features = classify(c);
  if (const KernelCase* k = std::get_if<KernelCase>(&c)) {
    for (const Sequence& q : k->seqs) {
      s.q_len = std::max(s.q_len, q.q_len);
      s.k_len = std::max(s.k_len, q.k_len);
    }
  } else {
    const ModelCase& m = std::get<ModelCase>(c);
    s.q_len = m.q_len;
    s.k_len = m.past + m.q_len;
  }
  if (v.cmp) {
    s.compared = true;
    s.bound_use = v.cmp->bound_use();
  }
  return s;
}

nlohmann::json to_json(const CaseSample& s) {
  nlohmann::json j{{"f", s.features}, {"q", s.q_len}, {"k", s.k_len}};
  // JSON has no NaN or infinity: a non-finite measurement travels as a string.
  if (s.compared) j["b"] = std::isfinite(s.bound_use) ? nlohmann::json(s.bound_use) : nlohmann::json("nonfinite");
  return j;
}

CaseSample case_sample_from_json(const nlohmann::json& j) {
  CaseSample s;
  s.features = j.at("f").get<std::vector<std::string>>();
  s.q_len = j.at("q");
  s.k_len = j.at("k");
  if (j.contains("b")) {
    s.compared = true;
    s.bound_use = j["b"].is_number() ? j["b"].get<double>() : NAN;
  }
  return s;
}

int length_bucket(std::int64_t len) {
  int b = 0;
  while (len > 0) {
    ++b;
    len >>= 1;
  }
  return b;
}

int bound_use_bin(double x) {
  const double bin = std::floor(10 * std::log10(x));
  return static_cast<int>(std::clamp(bin, static_cast<double>(kMinBin), static_cast<double>(kMaxBin)));
}

void CaseStats::add(const CaseSample& s) {
  ++cases;
  for (const std::string& f : s.features) add_cell(by_feature[f], s);
  add_cell(by_length[{length_bucket(s.q_len), length_bucket(s.k_len)}], s);
  if (!s.compared) return;
  if (!std::isfinite(s.bound_use)) ++nonfinite;
  else if (s.bound_use <= 0) ++exact;
  else ++histogram[bound_use_bin(s.bound_use)];
}

void CaseStats::merge(const CaseStats& o) {
  cases += o.cases;
  exact += o.exact;
  nonfinite += o.nonfinite;
  for (const auto& [bin, n] : o.histogram) histogram[bin] += n;
  for (const auto& [key, cell] : o.by_length) merge_cell(by_length[key], cell);
  for (const auto& [key, cell] : o.by_feature) merge_cell(by_feature[key], cell);
}

nlohmann::json to_json(const CaseStats& s) {
  nlohmann::json hist = nlohmann::json::object(), lengths = nlohmann::json::object(), features = nlohmann::json::object();
  for (const auto& [bin, n] : s.histogram) hist[std::to_string(bin)] = n;
  for (const auto& [key, cell] : s.by_length) lengths[std::to_string(key.first) + "," + std::to_string(key.second)] = cell_json(cell);
  for (const auto& [key, cell] : s.by_feature) features[key] = cell_json(cell);
  return {{"cases", s.cases}, {"exact", s.exact},         {"nonfinite", s.nonfinite},
          {"histogram", hist}, {"by_length", lengths}, {"by_feature", features}};
}

CaseStats case_stats_from_json(const nlohmann::json& j) {
  CaseStats s;
  s.cases = j.at("cases");
  s.exact = j.at("exact");
  s.nonfinite = j.at("nonfinite");
  for (const auto& [bin, n] : j.at("histogram").items()) s.histogram[std::stoi(bin)] = n.get<std::int64_t>();
  for (const auto& [key, cell] : j.at("by_length").items()) {
    const std::size_t comma = key.find(',');
    s.by_length[{std::stoi(key.substr(0, comma)), std::stoi(key.substr(comma + 1))}] = cell_from_json(cell);
  }
  for (const auto& [key, cell] : j.at("by_feature").items()) s.by_feature[key] = cell_from_json(cell);
  return s;
}

}  // namespace flashcheck
