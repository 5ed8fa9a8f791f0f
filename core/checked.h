// Size arithmetic that cannot wrap. Every product or sum that sizes a tensor, a page pool or a buffer from
// input values goes through here, so that a hostile fixture (a page size of 2^62, a length of 2^40) makes
// the limit checks refuse the case instead of overflowing int64 into a small, "valid" size.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>

namespace flashcheck {

inline constexpr std::int64_t kSizeSaturated = std::numeric_limits<std::int64_t>::max();

// a * b and a + b, or nothing when the exact result does not fit in int64.
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// For sizes (non-negative operands): the exact value, or kSizeSaturated when it does not fit. A saturated
// size is larger than every limit, so comparing it with a limit refuses the case; negative operands (an
// invalid length that another check reports) count as 0.
inline std::int64_t size_mul(std::int64_t a, std::int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  const auto r = checked_mul(a, b);
  return r ? *r : kSizeSaturated;
}
inline std::int64_t size_add(std::int64_t a, std::int64_t b) {
  const auto r = checked_add(a < 0 ? 0 : a, b < 0 ? 0 : b);
  return r ? *r : kSizeSaturated;
}
inline std::int64_t size_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t r = 1;
  for (std::int64_t f : factors) {
    if (f <= 0) return 0;
    r = size_mul(r, f);
  }
  return r;
}
// ceil(a / b) for a >= 0, b >= 1, without forming a + b - 1.
inline std::int64_t size_ceil_div(std::int64_t a, std::int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace flashcheck
