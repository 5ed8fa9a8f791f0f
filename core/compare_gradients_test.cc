// The gradient comparators: NaN fails, each gradient is judged and named, the worst element is located, undefined
// rows (slack, keys outside a sequence unless promised zero) are ignored whatever they hold, softcap's absolute term
// and the mean check apply.
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

#include "core/compare.h"
#include "core/geometry.h"

namespace flashcheck {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Two sequences (2 and 1 queries; 3 and 2 keys, the first with leftpad 1), one query head, one KV head, d = dv = 2,
// one slack row on each side, fp32.
KernelCase grad_case() {
  KernelCase c;
  c.dtype = DType::kF32;
  c.head_dim = c.v_head_dim = 2;
  c.seqs = {{.q_len = 2, .k_len = 3, .leftpad_k = 1}, {.q_len = 1, .k_len = 2}};
  c.slack = {.q_rows = 1, .kv_rows = 1};
  c.dout = DoutRecipe{};
  return c;
}

// Gradients of the case's shapes, all `v`.
GradientResult filled(const KernelCase& c, double v) {
  const CaseGeometry g = geometry(c);
  GradientResult r;
  r.dq.assign(static_cast<std::size_t>(g.q_rows * 2), v);
  r.dk.assign(static_cast<std::size_t>(g.kv_rows * 2), v);
  r.dv.assign(static_cast<std::size_t>(g.kv_rows * 2), v);
  return r;
}

TEST(CompareGradients, ExactGradientsPassWithEveryTensorNamed) {
  const KernelCase c = grad_case();
  const GradientResult t = filled(c, 0.5);
  const GradientComparisons g = compare_gradients(c, t, t, t, true);
  EXPECT_EQ(failure_reason(g), "");
  EXPECT_EQ(g.dq.tensor, "dq");
  EXPECT_EQ(g.dk.tensor, "dk");
  EXPECT_EQ(g.dv.tensor, "dv");
  EXPECT_EQ(g.dq.compared, 3 * 2);      // three query rows of the sequences, not the slack row
  EXPECT_EQ(g.dk.compared, (3 + 2) * 2);  // both allocations, not the slack row
  EXPECT_EQ(compare_gradients(c, t, t, t, false).dk.compared, (2 + 2) * 2);  // only the used keys
}

TEST(CompareGradients, NaNInAnyGradientFailsAndIsLocated) {
  const KernelCase c = grad_case();
  const GradientResult t = filled(c, 0.5);
  GradientResult got = t;
  got.dv[static_cast<std::size_t>(4 * 2 + 1)] = kNaN;  // storage row 4: sequence 1, its key 1; channel 1
  const GradientComparisons g = compare_gradients(c, got, t, t, true);
  EXPECT_NE(failure_reason(g).find("dv: 1 NaN/Inf gradient element"), std::string::npos) << failure_reason(g);
  EXPECT_EQ(g.decisive().tensor, "dv");
  EXPECT_EQ(g.dv.worst.b, 1);
  EXPECT_EQ(g.dv.worst.i, 1);
  EXPECT_EQ(g.dv.worst.d, 1);
  EXPECT_TRUE(std::isnan(g.dv.worst.out));
}

TEST(CompareGradients, AnErrorPastTwiceTheBaselinesFailsTheMaxCheck) {
  const KernelCase c = grad_case();
  const GradientResult t = filled(c, 0.5);
  GradientResult base = t, got = t;
  base.dq[0] = 0.5 + 1e-3;  // the baseline errs by 1e-3 on one element
  got.dq[2] = 0.5 + 2.5e-3;
  const GradientComparisons g = compare_gradients(c, got, t, base, true);
  EXPECT_NE(failure_reason(g).find("dq: max error"), std::string::npos) << failure_reason(g);
  EXPECT_NEAR(g.dq.ratio(), 2.5, 1e-9);
  EXPECT_EQ(g.dq.worst.i, 1);
  got.dq[2] = 0.5 + 1.9e-3;
  EXPECT_EQ(failure_reason(compare_gradients(c, got, t, base, true)).find("max error"), std::string::npos);
}

TEST(CompareGradients, GarbageInUndefinedRowsChangesNothing) {
  const KernelCase c = grad_case();
  const GradientResult t = filled(c, 0.5);
  for (double garbage : {kNaN, std::numeric_limits<double>::infinity(), -1e30, 123.0}) {
    GradientResult got = t;
    got.dq[3 * 2] = got.dq[3 * 2 + 1] = garbage;        // the query slack row
    got.dk[5 * 2] = got.dv[5 * 2 + 1] = garbage;        // the key slack row
    got.dk[0] = got.dv[1] = garbage;                    // before leftpad: undefined unless promised zero
    EXPECT_EQ(failure_reason(compare_gradients(c, got, t, t, false)), "") << garbage;
    EXPECT_NE(failure_reason(compare_gradients(c, got, t, t, true)), "") << garbage;  // promised: judged
  }
}

TEST(CompareGradients, SoftcapAddsFlashAttentionsAbsoluteTerm) {
  KernelCase c = grad_case();
  const GradientResult t = filled(c, 0.5);
  GradientResult got = t;
  got.dk[2] = 0.5 + 2e-4;
  EXPECT_NE(failure_reason(compare_gradients(c, got, t, t, true)), "");
  c.softcap = 30;
  const GradientComparisons g = compare_gradients(c, got, t, t, true);
  EXPECT_EQ(failure_reason(g), "");
  EXPECT_GE(g.dk.bound, tolerance::kGradSoftcapAtol);
}

TEST(CompareGradients, ABiasEveryElementSharesFailsTheMeanCheck) {
  KernelCase c = grad_case();
  c.dtype = DType::kBF16;
  c.seqs = {{.q_len = 64, .k_len = 64}};
  c.slack = {};
  GradientResult t = filled(c, 0.5), base = t, got = t;
  // The baseline errs by one spacing on one element in 64; the kernel by 0.9 spacings on every element: within the
  // max bound (2 spacings + floor) but far past 1.5x the baseline's mean.
  const double spacing = 0x1.0p-8;
  for (std::size_t i = 0; i < t.dq.size(); i += 64) base.dq[i] += spacing;
  for (double& x : got.dq) x += 0.9 * spacing;
  const GradientComparisons g = compare_gradients(c, got, t, base, true);
  EXPECT_NE(failure_reason(g).find("dq: mean error"), std::string::npos) << failure_reason(g);
}

// The calibration run's false alarms (docs/TOLERANCE.md): keys no query sees diluted the mean's small-sample
// floor, and dK's mean was taken to settle over its key rows where its errors share the few query rows' D.
TEST(CompareGradients, KeysNoQuerySeesLeaveTheMeanCheckAsItWas) {
  KernelCase bare = grad_case(), padded = grad_case();
  bare.dtype = padded.dtype = DType::kBF16;
  bare.slack = padded.slack = {};
  bare.seqs = {{.q_len = 2, .k_len = 2}};
  padded.seqs = {{.q_len = 2, .k_len = 34, .leftpad_k = 32}};
  const double spacing = 0x1.0p-8;
  const auto judge = [&](const KernelCase& c, std::size_t first_key) {
    GradientResult t = filled(c, 0.5), base = t, got = t;
    for (std::size_t i = 0; i < first_key * 2; ++i) t.dk[i] = base.dk[i] = got.dk[i] = 0.0;
    for (std::size_t i = first_key * 2; i < t.dk.size(); ++i) got.dk[i] += 0.6 * spacing;
    return compare_gradients(c, got, t, base, true).dk;
  };
  const Comparison a = judge(bare, 0), b = judge(padded, 32);
  EXPECT_EQ(a.compared, 4);
  EXPECT_EQ(b.compared, 68);  // the zero keys are still judged (by the max check)
  EXPECT_DOUBLE_EQ(a.err_mean, b.err_mean);
  EXPECT_DOUBLE_EQ(a.mean_bound, b.mean_bound);
  EXPECT_EQ(failure_reason(a), "");
  EXPECT_EQ(failure_reason(b), "");
}

TEST(CompareGradients, DkMeanSettlesNoFasterThanOverTheQueryCells) {
  const double spacing = 0x1.0p-8;
  const auto judge = [&](std::int64_t q_len) {
    KernelCase c = grad_case();
    c.dtype = DType::kBF16;
    c.slack = {};
    c.seqs = {{.q_len = q_len, .k_len = 64}};
    GradientResult t = filled(c, 0.5), base = t, got = t;
    for (double& x : got.dk) x += 0.6 * spacing;  // every key off by 0.6 spacings, as one query's D would put them
    return compare_gradients(c, got, t, base, true);
  };
  EXPECT_EQ(failure_reason(judge(1)), "");  // one query: one independent cell, a floor of one spacing
  EXPECT_NE(failure_reason(judge(64)).find("dk: mean error"), std::string::npos);  // 64: an eighth of one
}

// Where the terms cancel, a flash backward errs by about u * terms; the mean check allows it there and only there.
TEST(CompareGradients, CancellingTermsWidenTheMeanFloorOnlyWhereTheyCancel) {
  KernelCase c = grad_case();
  c.dtype = DType::kF16;
  c.slack = {};
  c.seqs = {{.q_len = 256, .k_len = 64}};  // enough rows that the small-sample floor stays below the error
  const double u = 0x1.0p-11;
  const auto judge = [&](double terms) {
    GradientResult t = filled(c, 0.5), base = t, got = t;
    t.dq_terms.assign(t.dq.size(), terms);
    for (double& x : got.dq) x += 0.9 * u;  // 0.9 spacings at 0.5 on every element: within the max bound
    return compare_gradients(c, got, t, base, true);
  };
  EXPECT_EQ(failure_reason(judge(4.0)), "");  // terms of 4 cancelling to 0.5: u * 3.5 per element
  EXPECT_NE(failure_reason(judge(0.5)).find("dq: mean error"), std::string::npos);  // no cancellation: a bias
}

TEST(CompareGradients, PairsUseTheGivenBoundsAndFailOnNaN) {
  const KernelCase c = grad_case();
  const GradientResult a = filled(c, 0.5);
  GradientComparisons bounds;
  bounds.dq.bound = bounds.dk.bound = bounds.dv.bound = 1e-3;
  GradientResult b = a;
  b.dk[4] = 0.5 + 5e-4;
  EXPECT_EQ(failure_reason(compare_gradient_pair(c, a, b, bounds, true)), "");
  b.dk[4] = 0.5 + 2e-3;
  EXPECT_NE(failure_reason(compare_gradient_pair(c, a, b, bounds, true)).find("dk"), std::string::npos);
  b = a;
  b.dq[1] = kNaN;
  EXPECT_NE(failure_reason(compare_gradient_pair(c, a, b, bounds, true)).find("NaN"), std::string::npos);
}

}  // namespace
}  // namespace flashcheck
