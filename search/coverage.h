// Which features a generated case exercises, counted over a run: a fuzz run (or a gate run) whose cases
// never touched a feature the kernel supports has not tested it, and fails saying which.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/kernel_case.h"
#include "core/model_case.h"
#include "kernels/contract.h"
#include "kernels/kernel.h"
#include "properties/property.h"
#include "search/limits.h"

namespace flashcheck {

// Feature names of one case: kernel level ("gqa", "q>k", "empty-rows", "tile64-1", ...), model level
// ("mask-left", "position-ids", "past", "gqa", "window", ...).
std::vector<std::string> classify(const KernelCase& c);
std::vector<std::string> classify(const ModelCase& m);
std::vector<std::string> classify(const AnyCase& c);

// The features a kernel-level run on this kernel under these requirements must reach.
std::vector<std::string> required_coverage(const Contract& k, const CaseRequirements& req);
// Features a long integration run on a profile that demands them must reach.
const std::vector<std::string>& required_model_coverage();
// Model-level runs shorter than this are too short to be held to a feature list.
inline constexpr std::int64_t kModelCoverageMinCases = 1000;
// What a run of `cases` cases of `p` on `k` must reach.
std::vector<std::string> required_coverage(const Property& p, const Contract& k, std::int64_t cases);

// The kernel-level feature names `classify` can give, plus "causal" (either alignment), in the order `fuzz --help`
// lists them.
const std::vector<std::string>& kernel_feature_names();
// Parses `fuzz --require` ("gqa=3,leftpad,causal": names of kernel_feature_names(), and gqa=N for a group of N query
// heads per KV head) into lim.require and lim.gqa_group; returns why it cannot ("" when it can).
std::string parse_required_features(const std::string& spec, GenLimits& lim);
// Whether a case has every feature the run requires.
bool has_required_features(const KernelCase& c, const GenLimits& lim);

struct Coverage {
  std::map<std::string, std::int64_t> counts;
  // Model level: features that were generated but that the contract refused every time (softcap on SDPA,
  // say); they count as unsupported, not missing.
  std::set<std::string> refused;
  void add(const AnyCase& c);
  // Required features with no case, in order.
  std::vector<std::string> missing(const std::vector<std::string>& required) const;
};

}  // namespace flashcheck
