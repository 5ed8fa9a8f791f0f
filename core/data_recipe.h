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

}  // namespace flashcheck
