// What a campaign keeps of every judged case for its plots, aggregated so that hours of cases stay small:
// a histogram of err/bound (how much of its tolerance a case used), the worst err/bound over the case's
// longest query and key lengths (log2 buckets), and per coverage feature the cases and worst err/bound.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/verdict.h"
#include "properties/property.h"

namespace flashcheck {

// One judged case as a campaign worker reports it to its supervisor.
struct CaseSample {
  std::vector<std::string> features;
  std::int64_t q_len = 0, k_len = 0;  // longest query and key sequence of the case
  bool compared = false;              // the verdict has an error measurement
  double bound_use = 0;               // err / bound when compared (NaN/inf when the output was not finite)
};

CaseSample case_sample(const AnyCase& c, const Verdict& v);
nlohmann::json to_json(const CaseSample& s);
CaseSample case_sample_from_json(const nlohmann::json& j);

// Bucket b of a length: 0 for 0, else floor(log2(len)) + 1 (1: [1,1], 2: [2,3], 3: [4,7], ...).
int length_bucket(std::int64_t len);
// Histogram bin of a positive err/bound: floor(10 * log10(x)), clamped to [kMinBin, kMaxBin].
inline constexpr int kMinBin = -80, kMaxBin = 19;
int bound_use_bin(double x);

struct WorstCell {
  std::int64_t cases = 0;
  double worst = 0;  // largest finite err/bound
};

struct CaseStats {
  std::int64_t cases = 0;
  std::map<int, std::int64_t> histogram;  // bound_use_bin -> cases
  std::int64_t exact = 0;                 // err/bound == 0
  std::int64_t nonfinite = 0;             // err/bound NaN or infinite
  std::map<std::pair<int, int>, WorstCell> by_length;  // (q bucket, k bucket)
  std::map<std::string, WorstCell> by_feature;

  void add(const CaseSample& s);
  void merge(const CaseStats& other);
};

nlohmann::json to_json(const CaseStats& s);
CaseStats case_stats_from_json(const nlohmann::json& j);

}  // namespace flashcheck
