#include "core/dtype.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

namespace flashcheck {
namespace {

TEST(DTypeRounding, Bf16TiesGoToEven) {
  EXPECT_EQ(round_to(DType::kBF16, 1.0 + std::ldexp(1.0, -8)), 1.0);  // halfway to 1 + 2^-7: even is 1
  EXPECT_EQ(round_to(DType::kBF16, 1.0 + 3 * std::ldexp(1.0, -8)), 1.0 + std::ldexp(1.0, -6));  // halfway, odd below
  EXPECT_EQ(round_to(DType::kBF16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(round_to(DType::kBF16, 3.140625), 3.140625);  // representable: 1.1001001b x 2
  EXPECT_EQ(round_to(DType::kBF16, -0.1), -0.10009765625);
}

TEST(DTypeRounding, Fp16RangeAndSubnormals) {
  EXPECT_EQ(round_to(DType::kF16, 65504.0), 65504.0);
  EXPECT_EQ(round_to(DType::kF16, 65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_to(DType::kF16, 65520.0)));  // rounds up past the largest finite value
  EXPECT_EQ(round_to(DType::kF16, std::ldexp(1.0, -24)), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(round_to(DType::kF16, std::ldexp(1.0, -25)), 0.0);                  // tie to even (zero)
  EXPECT_EQ(round_to(DType::kF16, 3 * std::ldexp(1.0, -26)), std::ldexp(1.0, -24));
  EXPECT_EQ(round_to(DType::kF16, 0.1), 0.0999755859375);
}

TEST(DTypeRounding, Fp32MatchesTheHardwareConversion) {
  for (double x : {0.1, 1.0 / 3.0, 1e-40, 3.4028235e38, -2.5e-45, 123456789.123}) {
    EXPECT_EQ(round_to(DType::kF32, x), static_cast<double>(static_cast<float>(x))) << x;
  }
}

TEST(DTypeRounding, NanAndInfinityPassThrough) {
  for (DType t : {DType::kF16, DType::kBF16, DType::kF32}) {
    EXPECT_TRUE(std::isnan(round_to(t, NAN)));
    EXPECT_EQ(round_to(t, INFINITY), INFINITY);
    EXPECT_EQ(round_to(t, -INFINITY), -INFINITY);
    EXPECT_TRUE(std::isnan(round_float(t, NAN)));
  }
}

TEST(DTypeRounding, FastBf16PathAgreesWithTheExactRule) {
  // Walk bit patterns across the whole float range, including subnormals and the overflow edge.
  for (std::uint64_t u = 0; u < 0xFFFFFFFFull; u += 65521) {
    const auto bits = static_cast<std::uint32_t>(u);
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(static_cast<double>(round_float(DType::kBF16, f)), round_to(DType::kBF16, f)) << std::hex << bits;
  }
}

TEST(DTypeRounding, Fp16AgreesWithCompilerHalfConversion) {
  for (std::uint64_t u = 0; u < 0xFFFFFFFFull; u += 104729) {
    const auto bits = static_cast<std::uint32_t>(u);
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    ASSERT_EQ(round_to(DType::kF16, f), static_cast<double>(h)) << std::hex << bits;
  }
}

}  // namespace
}  // namespace flashcheck
