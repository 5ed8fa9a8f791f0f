// The value of one logical tensor element under a data recipe. Header-only and FC_HD so that device-side
// materialization runs this very code and produces the same bits as the host.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/data_recipe.h"
#include "core/portable.h"
#include "core/rng.h"

namespace flashcheck {

// Value of element (b, pos, head, ch) of tensor `t`, before rounding to the dtype. `pos` is the logical
// position within the sequence (for keys, before leftpad), so a layout change never changes the data.
FC_HD inline double recipe_value(Distribution dist, std::uint64_t seed, TensorId t, double scale, std::uint32_t b,
                                 std::uint32_t pos, std::uint32_t head, std::uint32_t ch) {
  const Philox4 bits = element_bits(seed, t, b, pos, head, ch);
  switch (dist) {
    case Distribution::kNormal: return portable::mul(irwin_hall_normal(bits), scale);
    case Distribution::kUniform:
      return portable::mul(2.0 * unit_uniform(bits.w[0]) - 1.0, scale);  // 2u - 1 is exact
    case Distribution::kIntegers:
      // Small exact integers in [-2, 2], half of them zero: dot products and logits are exact.
      return (bits.w[1] & 1u) ? 0.0 : portable::mul(static_cast<double>(static_cast<int>(bits.w[0] % 5u) - 2), scale);
    case Distribution::kLarge:
      // Magnitudes spread over 2^0..2^7 times the scale: logits far past any softcap.
      return portable::mul(portable::mul(irwin_hall_normal(bits), scale), std::ldexp(1.0, static_cast<int>(bits.w[0] & 7u)));
  }
  return 0.0;
}

// The largest magnitude `recipe_value` can return for a scale of 1: Irwin-Hall normals lie in [-2 sqrt(3),
// 2 sqrt(3)], uniforms in [-1, 1], integers in [-2, 2], large values up to 2^7 normals.
FC_HD inline double recipe_magnitude_bound(Distribution dist) {
  constexpr double kNormalBound = 3.4641016151377546;  // 2 sqrt(3): (2^25 / 2^24) * sqrt(3)
  switch (dist) {
    case Distribution::kNormal: return kNormalBound;
    case Distribution::kUniform: return 1.0;
    case Distribution::kIntegers: return 2.0;
    case Distribution::kLarge: return kNormalBound * 128.0;
  }
  return kNormalBound * 128.0;
}

// Whether every value of a tensor with this recipe and scale is finite in `dtype` (rounding included: half an
// ulp past the largest finite value rounds to infinity, hence the margin). An input that overflows makes the
// truth and the tolerance bound infinite: such a case cannot be judged, so generators stay inside this.
inline bool recipe_fits_dtype(Distribution dist, double scale, DType dtype) {
  return std::fabs(scale) * recipe_magnitude_bound(dist) < detail::format_of(dtype).max_finite / 2;
}

// The upstream gradient dO at (sequence b, query row pos, head, channel), before rounding to the dtype.
FC_HD inline double dout_value(const DoutRecipe& r, std::uint64_t seed, std::uint32_t b, std::uint32_t pos,
                               std::uint32_t head, std::uint32_t ch, std::uint32_t dv) {
  switch (r.kind) {
    case DoutKind::kOneHot: return ch == (pos + head) % dv ? r.scale : 0.0;
    case DoutKind::kZeroRows:
      if ((element_bits(seed, TensorId::kDORows, b, pos, head, 0).w[0] & 3u) == 0) return 0.0;
      return portable::mul(irwin_hall_normal(element_bits(seed, TensorId::kDO, b, pos, head, ch)), r.scale);
    case DoutKind::kNormal: break;
  }
  return portable::mul(irwin_hall_normal(element_bits(seed, TensorId::kDO, b, pos, head, ch)), r.scale);
}

// The largest magnitude dout_value can return for a scale of 1.
FC_HD inline double dout_magnitude_bound(DoutKind kind) {
  return kind == DoutKind::kOneHot ? 1.0 : recipe_magnitude_bound(Distribution::kNormal);
}

// One-hot V: the row of logical key position `pos` is e_(pos mod dim).
FC_HD inline double onehot_value(std::uint32_t pos, std::uint32_t ch, std::uint32_t dim) {
  return ch == pos % dim ? 1.0 : 0.0;
}

}  // namespace flashcheck
