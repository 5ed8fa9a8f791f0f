#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "core/device/device_memory.h"
#include "core/device/recipe_fill.h"
#include "core/recipe.h"

namespace flashcheck::device {
namespace {

__global__ void fill_kernel(float* dst, Distribution dist, std::uint64_t seed, TensorId t, double scale, DType dt,
                            std::uint32_t b, std::uint32_t pos0, std::uint64_t n, std::uint32_t heads,
                            std::uint32_t dim, bool onehot) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const auto ch = static_cast<std::uint32_t>(i % dim);
    const auto h = static_cast<std::uint32_t>((i / dim) % heads);
    const auto pos = pos0 + static_cast<std::uint32_t>(i / (static_cast<std::uint64_t>(dim) * heads));
    const double v = onehot ? onehot_value(pos, ch, dim) : recipe_value(dist, seed, t, scale, b, pos, h, ch);
    dst[i] = round_to_float(dt, v);
  }
}

__global__ void fill_mapped_kernel(float* dst, const RowMap* rows, std::uint64_t n, Distribution dist,
                                   std::uint64_t seed, TensorId t, double scale, DType dt, std::uint32_t heads,
                                   std::uint32_t dim, bool onehot) {
  const std::uint64_t per_row = static_cast<std::uint64_t>(heads) * dim;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const RowMap m = rows[i / per_row];
    const auto within = static_cast<std::uint32_t>(i % per_row);
    const std::uint32_t ch = within % dim, h = within / dim;
    const auto pos = static_cast<std::uint32_t>(m.pos);
    const double v = onehot ? onehot_value(pos, ch, dim)
                            : recipe_value(dist, seed, t, scale, static_cast<std::uint32_t>(m.b), pos, h, ch);
    dst[static_cast<std::uint64_t>(m.row) * per_row + within] = round_to_float(dt, v);
  }
}

__global__ void fill_value_kernel(float* dst, std::uint64_t n, float value) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

unsigned blocks_for(std::uint64_t n) { return static_cast<unsigned>(std::min<std::uint64_t>((n + 255) / 256, 65535)); }

}  // namespace

void fill_recipe_mapped(float* dst, const RowMap* rows, std::size_t n_rows, const DataRecipe& r, TensorId t,
                        double scale, DType dt, std::uint32_t heads, std::uint32_t dim, bool onehot) {
  if (n_rows == 0) return;
  const std::uint64_t n = n_rows * static_cast<std::uint64_t>(heads) * dim;
  fill_mapped_kernel<<<blocks_for(n), 256>>>(dst, rows, n, r.dist, r.seed, t, scale, dt, heads, dim, onehot);
  check(cudaGetLastError(), "fill_recipe_mapped launch");
}

void fill_value(float* dst, std::size_t n, float value) {
  if (n == 0) return;
  fill_value_kernel<<<blocks_for(n), 256>>>(dst, n, value);
  check(cudaGetLastError(), "fill_value launch");
}

void fill_recipe_rows(float* dst, const DataRecipe& r, TensorId t, double scale, DType dt, std::uint32_t b,
                      std::uint32_t pos0, std::uint32_t rows, std::uint32_t heads, std::uint32_t dim, bool onehot) {
  const std::uint64_t n = static_cast<std::uint64_t>(rows) * heads * dim;
  if (n == 0) return;
  // The element -> value map is independent of the grid, so any launch shape gives the same bits.
  const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>((n + 255) / 256, 65535));
  fill_kernel<<<blocks, 256>>>(dst, r.dist, r.seed, t, scale, dt, b, pos0, n, heads, dim, onehot);
  check(cudaGetLastError(), "fill_recipe_rows launch");
}

std::vector<float> recipe_rows_via_device(const DataRecipe& r, TensorId t, double scale, DType dt, std::uint32_t b,
                                          std::uint32_t pos0, std::uint32_t rows, std::uint32_t heads,
                                          std::uint32_t dim, bool onehot) {
  const std::size_t n = static_cast<std::size_t>(rows) * heads * dim;
  std::vector<float> host(n);
  float* dev = nullptr;
  check(cudaMalloc(&dev, n * sizeof(float) + 1), "cudaMalloc");
  try {
    fill_recipe_rows(dev, r, t, scale, dt, b, pos0, rows, heads, dim, onehot);
    check(cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  } catch (...) {
    cudaFree(dev);
    throw;
  }
  check(cudaFree(dev), "cudaFree");
  return host;
}

}  // namespace flashcheck::device
