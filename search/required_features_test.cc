// `fuzz --require`: the feature list parses or is refused with its reason, a steered run judges only cases with every
// required feature (the steered toggles and the derived features alike), and features a kernel cannot have together
// are refused before the run.
#include <gtest/gtest.h>

#include "search/coverage.h"
#include "search/fuzz.h"

namespace flashcheck {
namespace {

Kernel& kernel(const char* name) { return *builtin_registry().find(name); }

TEST(RequiredFeatures, ParsesNamesAndAGroupAndRefusesTheRest) {
  GenLimits lim;
  EXPECT_EQ(parse_required_features("gqa=3,leftpad,causal,leftpad", lim), "");
  EXPECT_EQ(lim.gqa_group, 3);
  EXPECT_EQ(lim.require, (std::vector<std::string>{"leftpad", "causal"}));
  EXPECT_NE(parse_required_features("gqa=3,lefpad", lim).find("'lefpad' is not a feature; the features are gqa=N, causal"),
            std::string::npos);
  for (const char* bad : {"gqa=1", "gqa=65", "gqa=x", "gqa=", "leftpad,,causal", "causal,", ""})
    EXPECT_NE(parse_required_features(bad, lim), "") << bad;
}

bool has_leftpad(const KernelCase& c) {
  for (const Sequence& s : c.seqs)
    if (s.leftpad_k > 0) return true;
  return false;
}

// Checked on the cases themselves, not through has_required_features: every judged case of a steered run, and the
// run still reaches its count.
TEST(RequiredFeatures, ASteeredRunJudgesOnlyCasesWithEveryFeature) {
  FuzzOptions o;
  o.cases = 150;
  o.seed = 7;
  ASSERT_EQ(parse_required_features("gqa=3,leftpad,causal,softcap,decode", o.limits), "");
  std::int64_t judged = 0, lacking = 0;
  FuzzHooks hooks;
  hooks.on_judged = [&](const AnyCase& a, const Verdict&) {
    const KernelCase& c = std::get<KernelCase>(a);
    ++judged;
    bool decode = false;
    for (const Sequence& s : c.seqs) decode = decode || s.q_len == 1;
    lacking += !(c.heads == 3 * c.kv_heads && has_leftpad(c) && c.causal && c.softcap > 0 && decode);
  };
  const FuzzReport r = run_fuzz(kernel("tiled-cpu"), *find_property("conformance"), o, hooks);
  EXPECT_EQ(r.cases, 150);
  EXPECT_EQ(judged, 150);
  EXPECT_EQ(lacking, 0);
  EXPECT_TRUE(r.coverage_missing.empty()) << r.coverage_missing.front();  // held to the required features only
  EXPECT_TRUE(r.findings.empty());
}

TEST(RequiredFeatures, FeaturesTheContractExcludesAreRefusedBeforeTheRun) {
  GenLimits lim;
  ASSERT_EQ(parse_required_features("causal-top-left", lim), "");  // tiled-cpu is bottom-right only
  EXPECT_NE(required_features_unmet(*find_property("conformance"), kernel("tiled-cpu"), lim).find("none of 2000 cases"),
            std::string::npos);
  EXPECT_EQ(required_features_unmet(*find_property("conformance"), kernel("sdpa-math-cpu"), lim), "");
  ASSERT_EQ(parse_required_features("softcap", lim), "");  // SDPA has no softcap
  EXPECT_NE(required_features_unmet(*find_property("conformance"), kernel("sdpa-math-cpu"), lim), "");
}

}  // namespace
}  // namespace flashcheck
