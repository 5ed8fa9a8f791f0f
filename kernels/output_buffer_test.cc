#include "kernels/output_buffer.h"

#include "kernels/grad_buffer.h"

#include <cmath>
#include <gtest/gtest.h>

namespace flashcheck {
namespace {

TEST(OutputBuffer, PoisonIsTheUnwrittenPatternAndNotAComputedNaN) {
  OutputBuffer b(6, 2, 4);
  EXPECT_TRUE(OutputBuffer::unwritten(b.out()[0]));
  EXPECT_TRUE(std::isnan(b.out()[5]));
  EXPECT_FALSE(OutputBuffer::unwritten(std::nanf("")));
  EXPECT_FALSE(OutputBuffer::unwritten(0.0f / 0.0f * 1.0f));
  EXPECT_EQ(b.canary_damage(), 0);
}

TEST(OutputBuffer, WritesPastEitherEndDamageCanaries) {
  OutputBuffer b(6, 2, 4);
  b.out()[6] = 1.0f;
  EXPECT_EQ(b.canary_damage(), 1);
  b.out()[-1] = 1.0f;
  b.lse()[2] = 0.0f;
  EXPECT_EQ(b.canary_damage(), 3);
  b.poison();
  EXPECT_EQ(b.canary_damage(), 0);
}

TEST(OutputBuffer, ResultCarriesLseOnlyWhenWritten) {
  OutputBuffer b(2, 1, 1);
  b.out()[0] = 1.5f;
  b.out()[1] = -2.0f;
  EXPECT_TRUE(b.to_result().lse.empty());
  b.lse()[0] = 0.25f;
  b.lse_written = true;
  const AttentionResult r = b.to_result();
  EXPECT_EQ(r.out, (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(r.lse, (std::vector<double>{0.25}));
}

TEST(GradBuffer, EachGradientIsPoisonedAndFramedByItsOwnCanaries) {
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 3;
  c.v_head_dim = 5;
  c.seqs = {{.q_len = 2, .k_len = 3}};
  c.slack = {.q_rows = 1, .kv_rows = 2};
  c.dout = DoutRecipe{};
  GradBuffer g(c);
  EXPECT_EQ(g.dq_elems(), 3 * 4 * 3);  // q rows with slack, H, d
  EXPECT_EQ(g.dk_elems(), 5 * 2 * 3);  // kv rows with slack, Hk, d
  EXPECT_EQ(g.dv_elems(), 5 * 2 * 5);
  EXPECT_TRUE(PoisonedArray::unwritten(g.dq()[0]));
  EXPECT_TRUE(PoisonedArray::unwritten(g.dv()[g.dv_elems() - 1]));
  EXPECT_EQ(g.canary_damage(), 0);
  g.dk()[g.dk_elems()] = 0.0f;   // one past dK
  g.dv()[-1] = 0.0f;             // one before dV
  EXPECT_EQ(g.canary_damage(), 2);
  g.poison();
  EXPECT_EQ(g.canary_damage(), 0);
  g.dq()[1] = 2.5f;
  const GradientResult r = g.to_result();
  EXPECT_EQ(r.dq[1], 2.5);
  EXPECT_TRUE(std::isnan(r.dq[0]));
}

}  // namespace
}  // namespace flashcheck
