// The judge of the device gradient reference, tested on the host: the host reference agrees with itself, with a copy
// moved within the stated bounds, and not with one moved past them, with a NaN, or with a wrong shape.
#include "reference/gradient_agreement.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

#include "reference/host/gradients.h"

namespace flashcheck::reference {
namespace {

KernelCase bf16_case() {
  KernelCase c;
  c.dtype = DType::kBF16;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.v_head_dim = 8;
  c.causal = true;
  c.seqs = {{.q_len = 5, .k_len = 9}, {.q_len = 7, .k_len = 7}};
  c.data.seed = 3;
  c.dout = DoutRecipe{};
  return c;
}

struct Computed {
  KernelCase c = bf16_case();
  CaseTensors t = materialize(c);
  GradientResult truth = host_gradients(c, t);
  GradientResult base = low_precision_gradients(c, t);
};

// The largest |dk| element, where a move is meaningful.
std::size_t largest(const std::vector<double>& v) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::fabs(v[i]) > std::fabs(v[at])) at = i;
  return at;
}

TEST(GradientAgreement, AgreesWithItself) {
  const Computed x;
  EXPECT_EQ(gradient_disagreement(x.c, x.truth, x.base, x.truth, x.base), "");
}

TEST(GradientAgreement, ReferenceWithinSumOrderPasses) {
  const Computed x;
  GradientResult moved = x.truth;
  const std::size_t at = largest(moved.dk);
  moved.dk[at] += std::ldexp(x.truth.dk_noise[at], -40);
  EXPECT_EQ(gradient_disagreement(x.c, x.truth, x.base, moved, x.base), "");
}

TEST(GradientAgreement, ReferenceMovedPastItsBoundFails) {
  const Computed x;
  GradientResult moved = x.truth;
  const std::size_t at = largest(moved.dk);
  moved.dk[at] += std::ldexp(x.truth.dk_noise[at] + std::fabs(x.truth.dk[at]), -30);
  const std::string why = gradient_disagreement(x.c, x.truth, x.base, moved, x.base);
  EXPECT_NE(why.find("reference dk element"), std::string::npos) << why;
}

TEST(GradientAgreement, SensitivityMovedFails) {
  const Computed x;
  GradientResult moved = x.truth;
  moved.dv_noise[largest(moved.dv_noise)] *= 1.001;
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, moved, x.base).find("dv noise"), std::string::npos);
}

// At fp32 accuracy (the tensor-core reference) the values may move by u (8 sensitivity + magnitude), u = 2^-24, and
// the sensitivities and terms by 2^-5 relative; past either the judge names the element.
TEST(GradientAgreement, Fp32AccuracyHasItsOwnBounds) {
  const Computed x;
  GradientResult moved = x.truth;
  const std::size_t at = largest(moved.dk);
  const double unit = std::ldexp(8 * x.truth.dk_noise[at] + std::fabs(x.truth.dk[at]), -24);
  moved.dk[at] += 0.9 * unit;
  moved.dv_noise[largest(moved.dv_noise)] *= 1.03;
  moved.dq_terms[largest(moved.dq_terms)] *= 0.97;
  EXPECT_EQ(gradient_disagreement(x.c, x.truth, x.base, moved, x.base, GradientAccuracy::kFp32), "");
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, moved, x.base), "") << "past fp64's bounds";
  moved.dk[at] += 0.2 * unit;
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, moved, x.base, GradientAccuracy::kFp32).find("reference dk element"),
            std::string::npos);
  moved = x.truth;
  moved.dv_noise[largest(moved.dv_noise)] *= 1.04;
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, moved, x.base, GradientAccuracy::kFp32).find("dv noise"),
            std::string::npos);
}

// What a device run of fp16 one-hot softmaxes found: every dK of 1e-229 or so in fp64, 0 in fp32 and bf16 pieces. At
// fp32 accuracy that passes (far below every floor of the rule), at fp64 it does not; a difference of 2^-30, still
// far below the rule's floors and 2^-40 of the tensor's largest magnitude, names the element.
TEST(GradientAgreement, Fp32LosesOnlyWhatNoVerdictCanSee) {
  const Computed x;
  GradientResult tiny = x.truth, flushed = x.truth;
  for (std::vector<double>* v : {&tiny.dk, &tiny.dk_noise, &tiny.dk_terms})
    for (double& e : *v) e *= 1e-220;
  for (std::vector<double>* v : {&flushed.dk, &flushed.dk_noise, &flushed.dk_terms}) std::fill(v->begin(), v->end(), 0.0);
  EXPECT_EQ(gradient_disagreement(x.c, tiny, x.base, flushed, x.base, GradientAccuracy::kFp32), "");
  EXPECT_NE(gradient_disagreement(x.c, tiny, x.base, flushed, x.base).find("reference dk element"), std::string::npos);
  flushed.dk[largest(tiny.dk)] = std::ldexp(1.0, -30);
  EXPECT_NE(gradient_disagreement(x.c, tiny, x.base, flushed, x.base, GradientAccuracy::kFp32).find("reference dk element"),
            std::string::npos);
}

// What a device run found on the fp64 path (seed 42, fp16, softcap, one-hot dO): dK's terms at 6.06e-22 on the host
// and 6.73e-23 on the device, both the rounding residue of D = dO . O at a channel where O cancels to 1e-16 relative.
// The terms may differ by the rounding the element's value may (2^-36 of its sensitivity at fp64); a term of ordinary
// size moved by 2^-20 of itself still names the element.
TEST(GradientAgreement, TermsOfARoundingResidueMayDifferByTheValuesRounding) {
  const Computed x;
  GradientResult host = x.truth, device = x.truth;
  const std::size_t at = largest(x.truth.dk_noise);
  ASSERT_GT(std::ldexp(x.truth.dk_noise[at], -36), 1e-20) << "the case's sensitivity is of ordinary size";
  host.dk_terms[at] = 6.0551001144603288e-22;
  device.dk_terms[at] = 6.7278890160670325e-23;
  EXPECT_EQ(gradient_disagreement(x.c, host, x.base, device, x.base), "");
  device.dk_terms[at] = 6.0551001144603288e-22 + 2 * std::ldexp(x.truth.dk_noise[at], -36);
  EXPECT_NE(gradient_disagreement(x.c, host, x.base, device, x.base).find("dk terms"), std::string::npos);
  device = x.truth;
  const std::size_t big = largest(x.truth.dq_terms);
  device.dq_terms[big] *= 1 + std::ldexp(1.0, -20);
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, device, x.base).find("dq terms"), std::string::npos);
}

TEST(GradientAgreement, NanAgainstNumberFailsAndNanAgainstNanPasses) {
  const Computed x;
  GradientResult moved = x.truth;
  const std::size_t at = largest(moved.dq);
  moved.dq[at] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, moved, x.base), "");
  GradientResult both = x.truth;
  both.dq[at] = moved.dq[at];
  EXPECT_EQ(gradient_disagreement(x.c, both, x.base, moved, x.base), "");
}

TEST(GradientAgreement, BaselineOneSpacingPassesAndAWrongValueFails) {
  const Computed x;
  GradientResult flipped = x.base;
  const std::size_t at = largest(flipped.dv);
  int e = 0;
  std::frexp(std::fabs(flipped.dv[at]), &e);
  flipped.dv[at] += std::ldexp(1.0, e - 1 - 7);  // one bf16 spacing
  EXPECT_EQ(gradient_disagreement(x.c, x.truth, x.base, x.truth, flipped), "");
  GradientResult wrong = x.base;
  wrong.dv[at] = -wrong.dv[at];
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, x.truth, wrong).find("baseline dv"), std::string::npos);
}

// What the device run found: elements of a dtype computation that differ by far more than their own rounding (a
// saturated tanh's 1 - t^2 an ulp apart), while the errors the rule scales from stay the same.
TEST(GradientAgreement, BaselineElementsMayDifferWithinTheErrorScale) {
  const Computed x;
  GradientResult other = x.base;
  double worst = 0;
  for (std::size_t i = 0; i < other.dq.size(); ++i) worst = std::max(worst, std::fabs(x.base.dq[i] - x.truth.dq[i]));
  ASSERT_GT(worst, 0);
  const std::size_t at = largest(other.dq);
  other.dq[at] = x.truth.dq[at] - worst;  // this element's error becomes the largest one, with the other sign
  EXPECT_EQ(gradient_disagreement(x.c, x.truth, x.base, x.truth, other), "");
  for (std::size_t i = 0; i < other.dq.size(); ++i) other.dq[i] = x.truth.dq[i] + 4 * (x.base.dq[i] - x.truth.dq[i]);
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, x.truth, other).find("baseline dq: largest error"), std::string::npos);
}

TEST(GradientAgreement, BaselineInfinitiesAndNans) {
  const Computed x;
  GradientResult host = x.base, device = x.base;
  const std::size_t at = largest(host.dk);
  host.dk[at] = device.dk[at] = std::numeric_limits<double>::infinity();  // an fp16 overflow on both sides
  EXPECT_EQ(gradient_disagreement(x.c, x.truth, host, x.truth, device), "");
  device.dk[at] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(gradient_disagreement(x.c, x.truth, host, x.truth, device).find("NaN"), std::string::npos);
}

TEST(GradientAgreement, ShapeMismatchFails) {
  const Computed x;
  GradientResult shorter = x.truth;
  shorter.dk.pop_back();
  EXPECT_NE(gradient_disagreement(x.c, x.truth, x.base, shorter, x.base).find("elements"), std::string::npos);
}

}  // namespace
}  // namespace flashcheck::reference
