// Device-side generation of recipe data: the GPU runs the same header code as the host
// (core/recipe.h, core/rng.h, core/dtype.h), so a tensor generated on either side has the same bits.
// Host-callable; the CUDA code sits in recipe_fill.cu.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data_recipe.h"
#include "core/dtype.h"
#include "core/rng.h"

namespace flashcheck::device {

// Values of `rows` logical positions pos0.. of sequence b, (rows, heads, dim) row-major, into device
// memory `dst` (float). Rounded to `dt`; one-hot when `onehot`.
void fill_recipe_rows(float* dst, const DataRecipe& r, TensorId t, double scale, DType dt, std::uint32_t b,
                      std::uint32_t pos0, std::uint32_t rows, std::uint32_t heads, std::uint32_t dim, bool onehot);

// What one storage row of a tensor holds: the logical row (sequence b, logical position pos) of the recipe,
// or, when b < 0, the tensor's fill value (the poison of slack rows and of unused cache positions).
struct RowSource {
  std::int32_t b;
  std::int32_t pos;
};

// One tensor of a case, filled completely (recipe rows and fill rows alike) by fill_tensors.
struct TensorFill {
  float* dst = nullptr;
  const RowSource* rows = nullptr;  // device array, one entry per storage row
  std::int64_t n_rows = 0;
  std::uint32_t heads = 0, dim = 0;
  TensorId id = TensorId::kQ;
  double scale = 1.0;
  bool onehot = false;
  float fill = 0.0f;
};
inline constexpr int kMaxTensorFills = 6;  // q, k, v, k_new, v_new, dout

// Fills the `n` (<= kMaxTensorFills) tensors of a case with one launch: a case's input generation is one
// kernel whatever its layout, instead of a poison pass and a recipe pass per tensor. Each tensor must have
// fewer than 2^32 elements (checked). A tensor with id TensorId::kDO takes its values from `dout` (core/recipe.h
// dout_value), as the host's materialize does.
void fill_tensors(const TensorFill* fills, int n, const DataRecipe& r, DType dt, const DoutRecipe& dout = {});

// Host convenience for tests: the same rows, generated on the GPU and copied back.
std::vector<float> recipe_rows_via_device(const DataRecipe& r, TensorId t, double scale, DType dt, std::uint32_t b,
                                          std::uint32_t pos0, std::uint32_t rows, std::uint32_t heads,
                                          std::uint32_t dim, bool onehot);

}  // namespace flashcheck::device
