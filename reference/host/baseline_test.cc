#include "reference/host/baseline.h"

#include <cmath>
#include <gtest/gtest.h>

#include "reference/host/attention.h"

namespace flashcheck::reference {
namespace {

KernelCase random_case(DType dt) {
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.v_head_dim = 32;
  c.dtype = dt;
  c.causal = true;
  c.seqs = {{.q_len = 7, .k_len = 19}, {.q_len = 5, .k_len = 3}};
  c.data.seed = 1234;
  return c;
}

double max_error(const Result& a, const Result& b) {
  double e = 0;
  for (std::size_t i = 0; i < a.out.size(); ++i) e = std::max(e, std::fabs(a.out[i] - b.out[i]));
  return e;
}

TEST(LowPrecisionBaseline, OutputIsRepresentableInTheDtype) {
  for (DType dt : {DType::kF16, DType::kBF16}) {
    const KernelCase c = random_case(dt);
    const Result r = low_precision_baseline(c, materialize(c));
    for (double x : r.out) ASSERT_EQ(x, round_to(dt, x));
  }
}

TEST(LowPrecisionBaseline, ErrorShrinksWithTheDtypesPrecision) {
  // bf16 has 8 significant bits, fp16 11, fp32 24: the baseline's distance to the truth must order so.
  double err[3];
  const DType types[3] = {DType::kBF16, DType::kF16, DType::kF32};
  for (int i = 0; i < 3; ++i) {
    const KernelCase c = random_case(types[i]);
    const CaseTensors t = materialize(c);
    err[i] = max_error(low_precision_baseline(c, t), host_attention(c, t));
  }
  EXPECT_GT(err[0], err[1]);
  EXPECT_GT(err[1], err[2]);
  EXPECT_GT(err[2], 0.0);
  EXPECT_LT(err[0], 0.1);
  EXPECT_LT(err[2], 1e-5);
}

TEST(LowPrecisionBaseline, EmptyRowsFollowTheConvention) {
  KernelCase c = random_case(DType::kBF16);
  c.seqs = {{.q_len = 4, .k_len = 2}};  // bottom-right causal: rows 0, 1 empty
  const CaseTensors t = materialize(c);
  EXPECT_EQ(low_precision_baseline(c, t, EmptyRow::kZero).out[0], 0.0);
  EXPECT_TRUE(std::isnan(low_precision_baseline(c, t, EmptyRow::kNaN).out[0]));
}

TEST(LowPrecisionBaseline, ExactWhereTheMathIsExact) {
  // One visible key: the output is that V row, whatever the dtype.
  KernelCase c = random_case(DType::kBF16);
  c.alignment = Alignment::kTopLeft;
  c.seqs = {{.q_len = 1, .k_len = 4}};
  const CaseTensors t = materialize(c);
  const Result r = low_precision_baseline(c, t);
  for (int x = 0; x < 32; ++x) EXPECT_EQ(r.out[x], t.v.data[x]);
}

}  // namespace
}  // namespace flashcheck::reference
