#include "kernels/output_buffer.h"

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

}  // namespace
}  // namespace flashcheck
