#include "core/compare.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>

namespace flashcheck {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// One sequence, two query rows, one head, two channels; fp32 so that the floor is tiny.
KernelCase tiny_case(DType dt = DType::kF32) {
  KernelCase c;
  c.dtype = dt;
  c.head_dim = 2;
  c.v_head_dim = 2;
  c.seqs = {{.q_len = 2, .k_len = 2}};
  return c;
}

AttentionResult result(std::vector<double> out, std::vector<std::uint8_t> empty = {0, 0}) {
  return AttentionResult{std::move(out), {}, std::move(empty)};
}

Comparison run(const std::vector<double>& out, const std::vector<double>& truth, const std::vector<double>& base,
               std::vector<std::uint8_t> empty = {0, 0}, EmptyRow conv = EmptyRow::kZero, DType dt = DType::kF32) {
  const KernelCase c = tiny_case(dt);
  return compare(c, result(out), result(truth, empty), result(base, empty), conv, tolerance_for(c));
}

TEST(Compare, NaNOutputFailsEvenWhenEverythingElseIsExact) {
  const Comparison c = run({0.5, kNaN, 0.25, 0.75}, {0.5, 0.5, 0.25, 0.75}, {0.5, 0.5, 0.25, 0.75});
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_EQ(c.err_max, kInf);
  EXPECT_EQ(c.worst.i, 0);
  EXPECT_EQ(c.worst.d, 1);
  EXPECT_NE(failure_reason(c), "");
}

TEST(Compare, InfinityOutputFails) {
  const Comparison c = run({0.5, 0.5, kInf, 0.75}, {0.5, 0.5, 0.25, 0.75}, {0.5, 0.5, 0.25, 0.75});
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_NE(failure_reason(c), "");
}

TEST(Compare, AnOverflowedBaselineCountsAsTheRoundedTruth) {
  // An fp16 baseline whose logits overflowed returns inf or NaN where the truth is finite. It must not
  // make the bound infinite (any output would pass): such an element counts as half an ulp of the dtype.
  const Comparison wrong = run({0.5, 0.9, 0.25, 0.75}, {0.5, 0.5, 0.25, 0.75}, {0.5, kNaN, 0.25, kInf});
  EXPECT_TRUE(std::isfinite(wrong.base_max));
  EXPECT_EQ(wrong.base_max, 0.5 * rounding_floor(DType::kF32, 0.75));
  EXPECT_TRUE(std::isfinite(wrong.bound));
  EXPECT_GT(wrong.err_max, wrong.bound);
  EXPECT_NE(failure_reason(wrong).find("max error"), std::string::npos) << failure_reason(wrong);
  // fp16 with |truth| near 137, as in the H200 finding: an output one ulp off passes, ten ulps fail.
  const double ulp = rounding_floor(DType::kF16, 137.3);  // 0.125
  const Comparison near = run({137.25, 1, 1, 1}, {137.3, 1, 1, 1}, {kInf, 1, 1, 1}, {0, 0}, EmptyRow::kZero, DType::kF16);
  EXPECT_EQ(failure_reason(near), "");
  const Comparison far = run({137.3 + 10 * ulp, 1, 1, 1}, {137.3, 1, 1, 1}, {kInf, 1, 1, 1}, {0, 0}, EmptyRow::kZero, DType::kF16);
  EXPECT_NE(failure_reason(far), "");
}

TEST(Compare, NaNOnAnEmptyRowBreaksTheZeroConvention) {
  const Comparison c = run({kNaN, kNaN, 0.25, 0.75}, {0, 0, 0.25, 0.75}, {0, 0, 0.25, 0.75}, {1, 0});
  EXPECT_EQ(c.empty_rows, 1);
  EXPECT_EQ(c.empty_wrong, 1);
  EXPECT_EQ(c.first_empty_wrong.i, 0);
  EXPECT_NE(failure_reason(c), "");
}

TEST(Compare, NaNConventionDemandsNaN) {
  const Comparison ok = run({kNaN, kNaN, 0.25, 0.75}, {kNaN, kNaN, 0.25, 0.75}, {kNaN, kNaN, 0.25, 0.75}, {1, 0},
                            EmptyRow::kNaN);
  EXPECT_EQ(failure_reason(ok), "");
  const Comparison zero = run({0, 0, 0.25, 0.75}, {kNaN, kNaN, 0.25, 0.75}, {kNaN, kNaN, 0.25, 0.75}, {1, 0},
                              EmptyRow::kNaN);
  EXPECT_EQ(zero.empty_wrong, 1);
}

TEST(Compare, ZeroConventionRejectsAnyNonZeroValue) {
  const Comparison c = run({1e-30, 0, 0.25, 0.75}, {0, 0, 0.25, 0.75}, {0, 0, 0.25, 0.75}, {1, 0});
  EXPECT_EQ(c.empty_wrong, 1);
  EXPECT_EQ(run({-0.0, 0, 0.25, 0.75}, {0, 0, 0.25, 0.75}, {0, 0, 0.25, 0.75}, {1, 0}).empty_wrong, 0);
}

TEST(Compare, MatchingTruthNaNIsNotAMismatch) {
  const Comparison c = run({kNaN, 0.5, 0.25, 0.75}, {kNaN, 0.5, 0.25, 0.75}, {kNaN, 0.5, 0.25, 0.75});
  EXPECT_EQ(c.nonfinite, 0);
  EXPECT_EQ(failure_reason(c), "");
}

TEST(Compare, AnInfiniteBoundFailsInsteadOfPassingAnything) {
  // Infinite inputs give the truth an infinite sensitivity (noise), and so an infinite floor: any output would
  // be within it. The case is not judged: it fails and says why.
  const KernelCase c = tiny_case(DType::kF16);
  AttentionResult truth = result({0.5, 0.5, 0.25, 0.75});
  truth.noise = {0, kInf, 0, 0};
  Comparison cmp = compare(c, result({0.5, 9.0, 0.25, 0.75}), truth, result({0.5, 0.5, 0.25, 0.75}), EmptyRow::kZero,
                           tolerance_for(c));
  EXPECT_EQ(cmp.bound, kInf);
  EXPECT_NE(failure_reason(cmp).find("bound is not finite"), std::string::npos) << failure_reason(cmp);
  cmp.bound = 1.0;  // a finite output bound, but an LSE bound that is not
  cmp.err_max = 0.0;
  cmp.lse_checked = true;
  cmp.lse_bound = kNaN;
  EXPECT_NE(failure_reason(cmp).find("bound is not finite"), std::string::npos) << failure_reason(cmp);
  cmp.lse_checked = false;  // a pair's mean bound is infinite by design: only the max bound applies
  cmp.mean_bound = kInf;
  EXPECT_EQ(failure_reason(cmp), "");
}

TEST(Compare, BoundIsTwiceTheBaselineErrorPlusTheFloor) {
  // Baseline error 1e-3; kernel error 1.9e-3 passes, 2.1e-3 fails (fp32 floor is ~1e-7). The baseline
  // errs on two elements so that the mean check (1.5 x its mean error) is not what decides.
  const std::vector<double> truth{0.5, 0.5, 0.25, 0.75}, base{0.501, 0.5, 0.251, 0.75};
  const Comparison pass = run({0.5, 0.5019, 0.25, 0.75}, truth, base);
  EXPECT_NEAR(pass.base_max, 1e-3, 1e-12);
  EXPECT_NEAR(pass.bound, 2e-3 + pass.floor, 1e-12);
  EXPECT_GT(pass.floor, 0);
  EXPECT_LT(pass.floor, 1e-6);
  EXPECT_EQ(failure_reason(pass), "") << failure_reason(pass);
  EXPECT_NEAR(pass.ratio(), 1.9, 1e-9);
  EXPECT_NEAR(pass.bound_use(), 1.9e-3 / pass.bound, 1e-9);
  EXPECT_LT(pass.bound_use(), 1.0);
  const Comparison fail = run({0.5, 0.5021, 0.25, 0.75}, truth, base);
  EXPECT_EQ(fail.mismatches, 1);
  EXPECT_EQ(fail.worst.b, 0);
  EXPECT_EQ(fail.worst.h, 0);
  EXPECT_EQ(fail.worst.i, 0);
  EXPECT_EQ(fail.worst.d, 1);
  EXPECT_DOUBLE_EQ(fail.worst.out, 0.5021);
  EXPECT_DOUBLE_EQ(fail.worst.truth, 0.5);
  EXPECT_DOUBLE_EQ(fail.worst.baseline, 0.5);
  EXPECT_NE(failure_reason(fail).find("max error"), std::string::npos);
  EXPECT_GT(fail.bound_use(), 1.0);
}

TEST(Compare, BoundUseStaysSmallWhenOnlyTheFloorAbsorbsTheError) {
  // An exact baseline makes the ratio infinite; the error is still a small part of the floor.
  const std::vector<double> truth{0.5, 0.5, 0.25, 0.75};
  const Comparison c = run({0.5, 0.5 + 1e-8, 0.25, 0.75}, truth, truth);
  EXPECT_EQ(failure_reason(c), "");
  EXPECT_TRUE(std::isinf(c.ratio()));
  EXPECT_GT(c.bound_use(), 0.0);
  EXPECT_LT(c.bound_use(), 1.0);
}

TEST(Compare, SoftcapLoosensTheMultiplierToThree) {
  KernelCase c = tiny_case();
  EXPECT_EQ(tolerance_for(c).k_max, 2.0);
  c.softcap = 30;
  EXPECT_EQ(tolerance_for(c).k_max, 3.0);
}

TEST(Compare, MeanCheckCatchesASystematicBiasThatTheMaxCheckAllows) {
  // Baseline: one element off by 1e-3, the rest exact. Kernel: every element off by 1e-3.
  const std::vector<double> truth{0.5, 0.5, 0.25, 0.75}, base{0.501, 0.5, 0.25, 0.75};
  const Comparison c = run({0.501, 0.501, 0.251, 0.751}, truth, base);
  EXPECT_LE(c.err_max, c.bound);
  EXPECT_GT(c.err_mean, c.mean_bound);
  EXPECT_NE(failure_reason(c).find("mean error"), std::string::npos);
}

// The same bias of 0.003 (3/4 of a bf16 step near 0.5) against an exact baseline: on one row it is one row's
// rounding, which the mean check cannot tell from a correct kernel's; over 400 rows it is a systematic bias.
TEST(Compare, TheMeanCheckHoldsBiasAgainstTheNumberOfRowsCompared) {
  auto judge = [](std::int64_t rows) {
    KernelCase c;
    c.dtype = DType::kBF16;
    c.head_dim = c.v_head_dim = 2;
    c.seqs = {{.q_len = rows, .k_len = 1}};
    const std::size_t n = static_cast<std::size_t>(rows * 2);
    const AttentionResult truth{std::vector<double>(n, 0.5), {}, std::vector<std::uint8_t>(static_cast<std::size_t>(rows), 0)};
    AttentionResult out = truth;
    for (double& x : out.out) x += 0.003;
    return compare(c, out, truth, truth, EmptyRow::kZero, tolerance_for(c));
  };
  const Comparison one = judge(1), many = judge(400);
  EXPECT_LE(one.err_max, one.bound);
  EXPECT_LE(one.err_mean, one.mean_bound);
  EXPECT_EQ(failure_reason(one), "");
  EXPECT_LE(many.err_max, many.bound);  // within the max check: only the mean can catch it
  EXPECT_GT(many.err_mean, many.mean_bound);
  EXPECT_NE(failure_reason(many).find("mean error"), std::string::npos) << failure_reason(many);
}

TEST(Compare, FloorIsTheDtypeSpacingAtTheMagnitudePlusPointThree) {
  EXPECT_EQ(rounding_floor(DType::kF32, 0.0), std::ldexp(1.0, -25));   // 0.3 lies in [2^-2, 2^-1)
  EXPECT_EQ(rounding_floor(DType::kBF16, 0.5), std::ldexp(1.0, -8));   // 0.8 in [2^-1, 1): 2^-1 * 2^-7
  EXPECT_EQ(rounding_floor(DType::kBF16, -1.5), std::ldexp(1.0, -7));  // 1.8 in [1, 2)
  EXPECT_EQ(rounding_floor(DType::kF16, 3.0), std::ldexp(1.0, -9));    // 3.3 in [2, 4): 2^1 * 2^-10
  // It is what FA3's |(t + 0.3 - 0.3) - t| reaches at most: never below it.
  for (double t : {0.1, 0.4, 0.9, 1.7, -2.2})
    EXPECT_GE(rounding_floor(DType::kBF16, t),
              std::fabs(round_to(DType::kBF16, round_to(DType::kBF16, round_to(DType::kBF16, t) + 0.3) - 0.3) -
                        round_to(DType::kBF16, t)));
}

TEST(Compare, LseIsCheckedOnNonEmptyRowsOnly) {
  const KernelCase c = tiny_case();
  AttentionResult truth = result({0, 0, 0.25, 0.75}, {1, 0});
  truth.lse = {-kInf, 1.0};
  AttentionResult base = truth;
  base.lse = {-kInf, 1.001};
  AttentionResult out = result({0, 0, 0.25, 0.75});
  out.lse = {kInf, 1.0005};  // the empty row's LSE follows another library's convention: not compared
  Comparison cmp = compare(c, out, truth, base, EmptyRow::kZero, tolerance_for(c));
  EXPECT_TRUE(cmp.lse_checked);
  EXPECT_EQ(failure_reason(cmp), "");
  out.lse[1] = kNaN;
  cmp = compare(c, out, truth, base, EmptyRow::kZero, tolerance_for(c));
  EXPECT_NE(failure_reason(cmp).find("LSE"), std::string::npos);
}

}  // namespace
}  // namespace flashcheck
