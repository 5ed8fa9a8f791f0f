// The tolerance rule of core/tolerance.h as the comparator applies it: bounds and floors of small
// hand-made cases recomputed here from the formulas (spacings derived by hand), NaN failing every check,
// and a guard that keeps the rule's constants and formulas in that one header.
#include "core/tolerance.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <gtest/gtest.h>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/compare.h"

namespace flashcheck {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
using tolerance::kUnitRoundoff32;

// 2^e, written out so that no expected value comes from the code under test.
double p2(int e) { return std::ldexp(1.0, e); }

// One sequence, two query rows, one head, two channels.
KernelCase tiny_case(DType dt) {
  KernelCase c;
  c.dtype = dt;
  c.head_dim = 2;
  c.v_head_dim = 2;
  c.seqs = {{.q_len = 2, .k_len = 2}};
  return c;
}

AttentionResult result(std::vector<double> out, std::vector<double> lse = {}) {
  AttentionResult r;
  r.out = std::move(out);
  r.lse = std::move(lse);
  r.empty = {0, 0};
  return r;
}

TEST(Tolerance, TheHostRuleReadsTheHeaderConstants) {
  // No value is pinned here: changing a constant in core/tolerance.h is the whole change of the rule.
  const ToleranceRule plain = tolerance_for(tiny_case(DType::kBF16));
  KernelCase capped = tiny_case(DType::kBF16);
  capped.softcap = 30;
  EXPECT_EQ(plain.k_max, tolerance::kMax);
  EXPECT_EQ(plain.k_mean, tolerance::kMean);
  EXPECT_EQ(plain.k_lse, tolerance::kLse);
  EXPECT_EQ(tolerance_for(capped).k_max, tolerance::kMaxSoftcap);
}

TEST(Tolerance, SpacingIsTheUlpOfTheDtypeAtTheMagnitudePlusPointThree) {
  // bf16 has 7 explicit mantissa bits: in [2^e, 2^(e+1)) its spacing is 2^(e-7).
  EXPECT_EQ(rounding_floor(DType::kBF16, 1.0), p2(-7));    // 1.3 in [1, 2)
  EXPECT_EQ(rounding_floor(DType::kBF16, 0.5), p2(-8));    // 0.8 in [1/2, 1)
  EXPECT_EQ(rounding_floor(DType::kBF16, -2.0), p2(-6));   // 2.3 in [2, 4)
  EXPECT_EQ(rounding_floor(DType::kBF16, 0.25), p2(-8));   // 0.55 in [1/2, 1)
  EXPECT_EQ(rounding_floor(DType::kF16, 1000.0), p2(-1));  // 1000.3 in [2^9, 2^10): 2^(9-10)
  EXPECT_EQ(rounding_floor(DType::kF32, 3.0), p2(-22));    // 3.3 in [2, 4): 2^(1-23)
  // The device evaluates it in float: same values.
  EXPECT_EQ(tolerance::spacing(1.0f, 7, -126), static_cast<float>(p2(-7)));
  EXPECT_EQ(tolerance::spacing(-2.0f, 7, -126), static_cast<float>(p2(-6)));
  // Below the smallest normal the spacing stops shrinking. |t| + 0.3 never gets there in a real dtype,
  // so the clamp is checked with a made-up format whose smallest normal is 2^5: 0.3 gets 2^(5 - 10).
  EXPECT_EQ(tolerance::spacing(0.0, 10, 5), p2(5 - 10));
}

// Truth, baseline and noise of a bf16 case whose floor the fp32 noise term decides on one element.
//   element   truth   spacing  2 * spacing   noise         8 u noise
//   (0, 0)    1.0     2^-7     2^-6          0             0
//   (0, 1)    0.5     2^-8     2^-7          3 * 2^16      3 * 2^-5
//   (1, 0)   -2.0     2^-6     2^-5          0             0
//   (1, 1)    0.25    2^-8     2^-7          0             0
struct Hand {
  KernelCase c = tiny_case(DType::kBF16);
  AttentionResult truth = result({1.0, 0.5, -2.0, 0.25}, {1.0, 3.0});
  AttentionResult base = result({1.0 + p2(-6), 0.5, -2.0 - p2(-5), 0.25}, {1.0 + p2(-4), 3.0});
  Hand() {
    truth.noise = {0, 3 * p2(16), 0, 0};
    truth.lse_noise = {0, p2(20)};
  }
  Comparison run(const AttentionResult& out) const { return compare(c, out, truth, base, EmptyRow::kZero, tolerance_for(c)); }
};

TEST(Tolerance, MaxBoundIsTheMultipleOfTheBaselineErrorPlusTheLargestElementFloor) {
  const Hand h;
  const Comparison cmp = h.run(h.truth);
  const double floor = tolerance::kNoiseLambda * kUnitRoundoff32 * 3 * p2(16);  // element (0, 1)
  EXPECT_EQ(floor, 3 * p2(-5));
  EXPECT_GT(floor, 2 * p2(-5));  // above every dtype term, the largest being element (1, 0)'s
  EXPECT_EQ(cmp.floor, floor);
  EXPECT_EQ(cmp.base_max, p2(-5));
  EXPECT_EQ(cmp.bound, tolerance::kMax * p2(-5) + floor);
  EXPECT_EQ(failure_reason(cmp), "");
  // Without the noise the dtype term of element (1, 0) decides.
  Hand quiet;
  quiet.truth.noise = {0, 0, 0, 0};
  EXPECT_EQ(quiet.run(quiet.truth).floor, 2 * p2(-6));
}

TEST(Tolerance, MeanBoundIsTheMultipleOfTheBaselineMeanPlusTheMeanOfTheElementFloors) {
  const Hand h;
  const Comparison cmp = h.run(h.truth);
  // Per element: the larger of 0.1 spacing and 2 u noise; only (0, 1) has noise: 2 * 2^-24 * 3 * 2^16.
  const double floors = tolerance::kMeanFloorFraction * p2(-7) +
                        tolerance::kNoiseLambdaMean * kUnitRoundoff32 * 3 * p2(16) +
                        tolerance::kMeanFloorFraction * p2(-6) + tolerance::kMeanFloorFraction * p2(-8);
  EXPECT_GT(tolerance::kNoiseLambdaMean * kUnitRoundoff32 * 3 * p2(16), tolerance::kMeanFloorFraction * p2(-8));
  const double base_mean = (p2(-6) + p2(-5)) / 4;
  EXPECT_DOUBLE_EQ(cmp.base_mean, base_mean);
  EXPECT_DOUBLE_EQ(cmp.mean_bound, tolerance::kMean * base_mean + floors / 4);
  // A bias of the whole output just over that bound fails on the mean alone.
  const double bias = cmp.mean_bound * 1.01;
  ASSERT_LT(bias, cmp.bound);
  const Comparison biased = h.run(result({1.0 + bias, 0.5 + bias, -2.0 + bias, 0.25 + bias}));
  EXPECT_LE(biased.err_max, biased.bound);
  EXPECT_NE(failure_reason(biased).find("mean error"), std::string::npos) << failure_reason(biased);
}

TEST(Tolerance, LseBoundIsTheMultipleOfTheBaselineErrorPlusTheRowFloor) {
  const Hand h;
  // Row 0: lse 1.0, spacing 2^-7, no noise. Row 1: lse 3.0, spacing 2^-6 (3.3 in [2, 4)), noise 2^20:
  // 8 u 2^20 = 2^-1 decides.
  const double floor = tolerance::kNoiseLambda * kUnitRoundoff32 * p2(20);
  EXPECT_EQ(floor, p2(-1));
  const double bound = tolerance::kLse * p2(-4) + floor;
  AttentionResult out = h.truth;
  out.lse = {1.0, 3.0 + 0.99 * bound};
  Comparison cmp = h.run(out);
  EXPECT_TRUE(cmp.lse_checked);
  EXPECT_EQ(cmp.lse_base, p2(-4));
  EXPECT_EQ(cmp.lse_bound, bound);
  EXPECT_EQ(failure_reason(cmp), "");
  out.lse[1] = 3.0 + 1.01 * bound;
  EXPECT_NE(failure_reason(h.run(out)).find("LSE"), std::string::npos);
}

TEST(Tolerance, AnOverflowedBaselineCountsAsHalfASpacing) {
  Hand h;
  h.base.out[0] = 1.0;   // exact, so that the overflowed element decides
  h.base.out[2] = kInf;  // truth -2.0: spacing 2^-6
  h.base.lse[0] = kNaN;  // truth 1.0: spacing 2^-7
  const Comparison cmp = h.run(h.truth);
  EXPECT_EQ(cmp.base_max, p2(-6) / 2);
  EXPECT_EQ(cmp.lse_base, p2(-7) / 2);
}

TEST(Tolerance, NaNFailsEveryCheck) {
  const Hand h;
  AttentionResult out = h.truth;
  out.out[3] = kNaN;  // max and mean
  Comparison cmp = h.run(out);
  EXPECT_EQ(cmp.nonfinite, 1);
  EXPECT_FALSE(cmp.err_max <= cmp.bound);
  EXPECT_FALSE(cmp.err_mean <= cmp.mean_bound);
  EXPECT_NE(failure_reason(cmp), "");

  out = h.truth;
  out.lse[0] = kNaN;  // the LSE alone
  cmp = h.run(out);
  EXPECT_FALSE(cmp.lse_err <= cmp.lse_bound);
  EXPECT_NE(failure_reason(cmp), "");

  Hand nan_truth;  // a NaN truth accepts only NaN
  nan_truth.truth.out[0] = nan_truth.base.out[0] = kNaN;
  out = nan_truth.truth;
  out.out[0] = 1.0;
  EXPECT_NE(failure_reason(nan_truth.run(out)), "");

  Hand empty;  // an empty row under the zero convention accepts only zeros
  empty.truth.empty = empty.base.empty = {1, 0};
  empty.truth.out[0] = empty.truth.out[1] = empty.base.out[0] = empty.base.out[1] = 0.0;
  out = empty.truth;
  out.out[1] = kNaN;
  EXPECT_EQ(empty.run(out).empty_wrong, 1);
  EXPECT_NE(failure_reason(empty.run(out)), "");

  const std::vector<std::uint8_t> none{0, 0};  // a metamorphic pair: NaN on either side fails
  out = h.truth;
  out.out[2] = kNaN;
  EXPECT_NE(failure_reason(compare_outputs(h.c, h.truth, out, none, 1.0)), "");
  EXPECT_NE(failure_reason(compare_outputs(h.c, out, h.truth, none, 1.0)), "");

  // A NaN noise cannot loosen a floor: the dtype term stays.
  EXPECT_EQ(tolerance::max_floor(p2(-7), kNaN), 2 * p2(-7));
  EXPECT_EQ(tolerance::mean_floor(p2(-7), kNaN), tolerance::kMeanFloorFraction * p2(-7));
}

// ---- One place -----------------------------------------------------------------------------------

struct Pattern {
  const char* regex;
  const char* what;
};

// What a copy of the rule outside core/tolerance.h looks like. Each pattern is matched against whole
// files, comments included: a comment that restates a constant goes stale the day the constant moves.
const std::vector<Pattern>& rule_patterns() {
  static const std::vector<Pattern> p = {
      {R"(0x1(\.0*)?p-24)", "the unit roundoff as a hex literal"},
      {R"(5\.96046)", "the unit roundoff as a decimal literal"},
      {R"(\b(8\.|1\.5|0\.1|0\.3|0\.5|2\.|3\.)0*f?(?![0-9]))", "a literal of the rule (8, 1.5, 0.1, 0.3, 0.5, 2.0, 3.0)"},
      {R"(\bk_(max|mean|lse)\s*=\s*[0-9])", "a multiplier set to a literal"},
      {R"(\bk(NoiseLambda(Mean)?|UnitRoundoff32|U32|Lambda|MeanFloorFraction|IntegrationK)\s*=[^=])",
       "a constant of the rule defined again"},
      {R"(\bsqrtf?\s*\()", "a square root of the sensitivity formula"},
      {R"(\*\s*\(\s*\w+\s*\+\s*(std::)?fabsf?\s*\()", "the output sensitivity written out"},
      {R"(\bfrexpf?\s*\()", "a dtype spacing computed again"},
  };
  return p;
}

// The first pattern `text` matches, or "".
std::string rule_literal_in(const std::string& text) {
  for (const Pattern& p : rule_patterns()) {
    std::smatch m;
    if (std::regex_search(text, m, std::regex(p.regex))) return std::string(p.what) + ": \"" + m.str() + "\"";
  }
  return "";
}

TEST(ToleranceOnePlace, ThePatternsCatchTheOldCopiesAndNothingElse) {
  // Lines the rule's users held before core/tolerance.h existed: each must be caught.
  for (const char* old : {"constexpr double kUnitRoundoff32 = 0x1.0p-24;",
                          "constexpr float kU32 = 5.9604644775390625e-08f;  // 2^-24",
                          "constexpr double kNoiseLambda = 8.0;",
                          "constexpr float kNoiseLambda = 8.0f, kNoiseLambdaMean = 2.0f, kMeanFloorFraction = 0.1f;",
                          "constexpr double kMeanFloorFraction = 0.1;",
                          "inline constexpr double kIntegrationK = 2.0;",
                          "const double fl = std::max(2.0 * rounding_floor(c.dtype, t[x]), lambda * u * nz);",
                          "const float fl = fmaxf(2.0f * sp, lam * u * nz);",
                          "if (c.softcap > 0) r.k_max = 3.0;",
                          "double k_mean = 1.5;",
                          "std::frexp(std::fabs(truth) + 0.3, &e);",
                          "if (!std::isfinite(be)) be = 0.5 * rounding_floor(c.dtype, t[x]);",
                          "if (!isfinite(be)) be = 0.5f * sp;",
                          "\"mean error {:.3g} exceeds the bound {:.3g} (1.5 x baseline mean {:.3g})\"",
                          "const float ds = sqrtf(static_cast<float>(p.d)) * smax;",
                          "const double ds = std::sqrt(static_cast<double>(D)) * smax;",
                          "noise[x] = ds * (a + fabsf(o)) + terms * a + fabsf(o);",
                          "r.noise[at] = ds * (ad + std::fabs(o[d])) + terms * ad + std::fabs(o[d]);"})
    EXPECT_NE(rule_literal_in(old), "") << old;
  // Lines the users hold legitimately.
  for (const char* fine : {"const float fl = tolerance::max_floor(sp, nz);", "r.k_max = tolerance::k_max(c.softcap > 0);",
                           "return err_max == 0 ? 0.0 : kInf;", "const bool ok = o == 0.0f;", "case DType::kF16: return -65504.0f;",
                           "return -3.3895313892515355e38f;", "x = y > x ? y : x; // 0xffffffffu", "for (int x0 = 0; x0 < p.d; x0 += 32) {",
                           "constexpr int kMaxPerLane = 16;", "const float s = round_dt(p.dtype, dot * 2);"})
    EXPECT_EQ(rule_literal_in(fine), "") << fine;
}

TEST(ToleranceOnePlace, NoUserOfTheRuleHoldsItsOwnCopy) {
  // Paths relative to the repository root, the tests' working directory.
  for (const char* path : {"core/compare.cc", "reference/device/compare.cu", "reference/device/attention.cu",
                           "reference/device/attention_tc.cu",
                           "reference/host/attention.cc", "reference/host/exact_row.cc", "properties/integration.cc",
                           "properties/device_reference_property.cc", "oracles/hf_eager.cc", "core/compare_gradients.cc",
                           "reference/host/gradients.cc", "properties/gradient_properties.cc"}) {
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << path << " not found: run from the repository root, or update this list if it moved";
    std::stringstream text;
    text << in.rdbuf();
    ASSERT_GT(text.str().size(), 0u) << path;
    EXPECT_EQ(rule_literal_in(text.str()), "") << path << " holds " << rule_literal_in(text.str())
                                                 << "; the rule lives in core/tolerance.h";
  }
}

}  // namespace
}  // namespace flashcheck
