// The fp64 row routine against values derived by hand, its sensitivity included.
#include "reference/host/exact_row.h"
#include "reference/key_share.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <stdexcept>

namespace flashcheck::reference {
namespace {

// The softcap's derivative sech^2(x) where 1 - tanh(x)^2 holds it, and past tanh's saturation, where that difference
// is 0 or one ulp of 1 while the true value is 4 e^(-2x) (1 + O(e^(-2x))).
TEST(KeyShare, SoftcapDerivativeStaysAccurateWhereTanhSaturates) {
  EXPECT_EQ(softcap_derivative(0.0), 1.0);
  for (double x : {0.1, 0.7, 2.0, 5.0}) {
    EXPECT_NEAR(softcap_derivative(x), 1.0 - std::tanh(x) * std::tanh(x), 1e-15) << x;
    EXPECT_EQ(softcap_derivative(-x), softcap_derivative(x)) << x;
  }
  for (double x : {20.0, 31.0, 300.0}) {
    const double expected = 4.0 * std::exp(-2.0 * x);
    EXPECT_NEAR(softcap_derivative(x) / expected, 1.0, 1e-13) << x;
    EXPECT_LE(1.0 - std::tanh(x) * std::tanh(x), 2.3e-16) << x;  // what the old formula had left
  }
  EXPECT_EQ(softcap_derivative(400.0), 0.0);  // e^-800 underflows: the true value is below every double
}

// d = 1, dv = 1, scale 1: q = 1 and keys k = (1, 1) give equal logits 1, so P = (1/2, 1/2); with
// v = (1, 3) the output is O = 2.
TEST(ExactRow, OutputLseAndSensitivityOfATwoKeyRow) {
  const float q = 1, k[2] = {1, 1}, v[2] = {1, 3};
  ExactRow row({.head_dim = 1, .v_head_dim = 1, .scale = 1.0});
  row.add_key(&k[0], &v[0]);
  row.add_key(&k[1], &v[1]);
  double out = 0, noise = 0;
  const RowStats st = row.compute(&q, &out, &noise);
  EXPECT_EQ(out, 2.0);
  EXPECT_DOUBLE_EQ(st.lse, 1.0 + std::log(2.0));  // m + log(e^0 + e^0)
  // Logit magnitudes S_j = |1 * 1| = 1, so max_j |ds_j| = sqrt(d) * 1 = 1; the sum has n = 2 terms,
  // factor sqrt(3); a = sum_j P_j |v_j| = 2. Bound form: 1 * (a + |O|) + sqrt(3) a + |O| = 6 + 2 sqrt(3).
  // (The exact spread sum_j P_j |v_j - O| = 1 would give 3 + 2 sqrt(3): the bound is never below it.)
  EXPECT_DOUBLE_EQ(noise, 6.0 + 2.0 * std::sqrt(3.0));
  // LSE: max |ds| + |m| + |log Z| + sqrt(n + 1) = 1 + 1 + log 2 + sqrt(3).
  EXPECT_DOUBLE_EQ(st.lse_noise, 2.0 + std::log(2.0) + std::sqrt(3.0));
}

TEST(ExactRow, SoftcapAndScaleShapeTheLogits) {
  // Logits 0.5 * (0, 4) = (0, 2), capped: 3 tanh(0 / 3) = 0 and 3 tanh(2 / 3). One-hot V reads back P.
  const float q = 1, k[2] = {0, 4}, v[2][2] = {{1, 0}, {0, 1}};
  ExactRow row({.head_dim = 1, .v_head_dim = 2, .scale = 0.5, .softcap = 3.0});
  row.add_key(&k[0], v[0]);
  row.add_key(&k[1], v[1]);
  double out[2], noise[2];
  row.compute(&q, out, noise);
  const double s1 = 3.0 * std::tanh(2.0 / 3.0);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(s1)), 1e-15);
  EXPECT_NEAR(out[1], std::exp(s1) / (1.0 + std::exp(s1)), 1e-15);
}

TEST(ExactRow, ANaNLogitMakesTheRowNaN) {
  // NaN must surface rather than be skipped by the running max, whichever key carries it.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int at = 0; at < 2; ++at) {
    float k[2] = {1, 1};
    k[at] = nan;
    const float q = 1, v[2] = {1, 3};
    ExactRow row({.head_dim = 1, .v_head_dim = 1, .scale = 1.0});
    row.add_key(&k[0], &v[0]);
    row.add_key(&k[1], &v[1]);
    double out = 0, noise = 0;
    const RowStats st = row.compute(&q, &out, &noise);
    EXPECT_TRUE(std::isnan(out)) << at;
    EXPECT_TRUE(std::isnan(st.lse)) << at;
  }
}

TEST(ExactRow, ReuseForgetsThePreviousRowsKeys) {
  const float q = 1, k[2] = {1, 5}, v[2] = {1, 3};
  ExactRow row({.head_dim = 1, .v_head_dim = 1, .scale = 1.0});
  row.add_key(&k[0], &v[0]);
  row.add_key(&k[1], &v[1]);
  double out = 0, noise = 0;
  row.compute(&q, &out, &noise);
  row.clear();
  row.add_key(&k[1], &v[1]);
  row.compute(&q, &out, &noise);
  EXPECT_EQ(out, 3.0);  // one key: its value row
  EXPECT_EQ(row.keys(), 1u);
}

TEST(ExactRow, ARowWithoutKeysIsTheCallersBusiness) {
  ExactRow row({.head_dim = 1, .v_head_dim = 1});
  const float q = 1;
  double out = 0, noise = 0;
  EXPECT_THROW(row.compute(&q, &out, &noise), std::logic_error);
}

}  // namespace
}  // namespace flashcheck::reference
