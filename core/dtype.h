// The element types a kernel computes in, and exact rounding into them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "core/portable.h"

namespace flashcheck {

enum class DType : std::uint8_t { kF16, kBF16, kF32 };

std::string_view to_string(DType t);
std::optional<DType> parse_dtype(std::string_view s);

namespace detail {

// Format parameters: explicit mantissa bits, the exponent of the smallest normal, the largest finite.
struct FloatFormat {
  int mantissa_bits;
  int min_normal_exp;
  double max_finite;
};

FC_HD inline FloatFormat format_of(DType t) {
  switch (t) {
    case DType::kF16: return {10, -14, 65504.0};
    case DType::kBF16: return {7, -126, 3.3895313892515355e38};
    default: return {23, -126, 3.4028234663852886e38};
  }
}

}  // namespace detail

// Rounds x to the nearest value representable in `t` (ties to even, gradual underflow, overflow to
// infinity), returned as a double. Exact: no double rounding through float.
FC_HD inline double round_to(DType t, double x) {
  if (!(x == x) || x == 0.0 || x - x != 0.0) return x;  // NaN, zero, infinity pass through
  const detail::FloatFormat f = detail::format_of(t);
  int e = 0;
  std::frexp(x, &e);  // |x| = m * 2^e, m in [0.5, 1): the leading bit has exponent e - 1
  const int lead = (e - 1) < f.min_normal_exp ? f.min_normal_exp : (e - 1);
  const double quantum = std::ldexp(1.0, lead - f.mantissa_bits);
  const double r = std::nearbyint(x / quantum) * quantum;  // both scalings exact; nearbyint is RNE
  if (std::fabs(r) > f.max_finite) return x > 0 ? INFINITY : -INFINITY;
  return r;
}

FC_HD inline float round_to_float(DType t, double x) { return static_cast<float>(round_to(t, x)); }

// Fast path for the hot loops of the low-precision baseline: float in, float out, same result as
// round_to for every finite input (bf16 by bit manipulation; fp16 and fp32 through the exact rule).
inline float round_float(DType t, float x) {
  if (t == DType::kF32) return x;
  if (t == DType::kBF16) {
    if (!(x == x)) return x;
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    float r;
    std::memcpy(&r, &u, 4);
    return r;
  }
  return static_cast<float>(round_to(t, x));
}

// Size of one element in memory, for reports and byte counts.
inline int element_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

}  // namespace flashcheck
