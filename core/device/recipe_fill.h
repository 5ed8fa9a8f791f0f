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

// One storage row of a tensor and the logical element it holds: sequence b, logical position pos.
struct RowMap {
  std::int64_t row;
  std::int32_t b;
  std::int32_t pos;
};

// Fills the listed storage rows (each heads x dim values) of device tensor `dst` by the recipe, with one
// launch; `rows` is a device array of `n_rows` entries.
void fill_recipe_mapped(float* dst, const RowMap* rows, std::size_t n_rows, const DataRecipe& r, TensorId t,
                        double scale, DType dt, std::uint32_t heads, std::uint32_t dim, bool onehot);

// Sets n floats of device memory to `value` (NaN poison included).
void fill_value(float* dst, std::size_t n, float value);

// Host convenience for tests: the same rows, generated on the GPU and copied back.
std::vector<float> recipe_rows_via_device(const DataRecipe& r, TensorId t, double scale, DType dt, std::uint32_t b,
                                          std::uint32_t pos0, std::uint32_t rows, std::uint32_t heads,
                                          std::uint32_t dim, bool onehot);

}  // namespace flashcheck::device
