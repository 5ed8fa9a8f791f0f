// How tensor contents are generated: a distribution, per-tensor magnitudes and a seed. Shared with device
// code (core/recipe.h), which nvcc compiles as C++17: no C++20-only constructs outside the guard.
#pragma once

#include <cstdint>

namespace flashcheck {

enum class Distribution : std::uint8_t { kNormal, kUniform, kIntegers, kLarge };

struct DataRecipe {
  Distribution dist = Distribution::kNormal;
  double q_scale = 1.0;
  double k_scale = 1.0;
  double v_scale = 1.0;
  // V row of logical key j is the unit vector e_(j mod dv): the output reads back the softmax weights.
  bool v_onehot = false;
  // NaN in every allocated slot that is not part of a sequence (padding, unused cache, spare pages).
  bool poison = true;
  std::uint64_t seed = 0;
#if __cplusplus >= 202002L
  bool operator==(const DataRecipe&) const = default;
#endif
};

// The upstream gradient dO of a backward case (the gradient of the loss w.r.t. the attention output), drawn by
// the inputs' seed from its own stream (core/recipe.h dout_value). kNormal: normal values times the scale; kZeroRows:
// the same with about a quarter of the (row, head) cells all zero (rows that contribute nothing to dK/dV and whose
// dpsum is 0); kOneHot: cell (query row i, head h) is scale * e_((i + h) mod dv).
enum class DoutKind : std::uint8_t { kNormal, kZeroRows, kOneHot };

struct DoutRecipe {
  DoutKind kind = DoutKind::kNormal;
  double scale = 1.0;
#if __cplusplus >= 202002L
  bool operator==(const DoutRecipe&) const = default;
#endif
};

}  // namespace flashcheck
