#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
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

struct FillArgs {
  TensorFill t[kMaxTensorFills];
  std::uint64_t first[kMaxTensorFills + 1];  // flat index of each tensor's first element; first[n] = total
  int n;
  Distribution dist;
  std::uint64_t seed;
  DType dt;
  DoutRecipe dout;
};

// Every element of every tensor of a case, grid-stride over one flat index. Within a tensor all index
// arithmetic is 32-bit (64-bit division is a long software sequence on the GPU), and each element runs
// the very recipe code of the host (recipe_value, round_to_float), so the bits are the host's.
__global__ void fill_tensors_kernel(FillArgs a) {
  const std::uint64_t total = a.first[a.n];
  for (std::uint64_t e = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    int s = 0;
    while (s + 1 < a.n && e >= a.first[s + 1]) ++s;
    const TensorFill& f = a.t[s];
    const auto local = static_cast<std::uint32_t>(e - a.first[s]);
    const std::uint32_t per_row = f.heads * f.dim;
    const std::uint32_t row = local / per_row, within = local - row * per_row;
    const std::uint32_t h = within / f.dim, ch = within - h * f.dim;
    const RowSource src = f.rows[row];
    float value = f.fill;
    if (src.b >= 0) {
      const auto pos = static_cast<std::uint32_t>(src.pos), b = static_cast<std::uint32_t>(src.b);
      value = round_to_float(a.dt, f.id == TensorId::kDO ? dout_value(a.dout, a.seed, b, pos, h, ch, f.dim)
                                   : f.onehot        ? onehot_value(pos, ch, f.dim)
                                                     : recipe_value(a.dist, a.seed, f.id, f.scale, b, pos, h, ch));
    }
    f.dst[local] = value;
  }
}

unsigned blocks_for(std::uint64_t n) { return static_cast<unsigned>(std::min<std::uint64_t>((n + 255) / 256, 65535)); }

}  // namespace

void fill_tensors(const TensorFill* fills, int n, const DataRecipe& r, DType dt, const DoutRecipe& dout) {
  if (n < 0 || n > kMaxTensorFills) throw std::invalid_argument("fill_tensors: at most 6 tensors");
  FillArgs a{};
  a.n = 0;
  std::uint64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t elems = static_cast<std::uint64_t>(fills[i].n_rows) * fills[i].heads * fills[i].dim;
    if (elems == 0) continue;
    if (elems >= (std::uint64_t{1} << 32)) throw std::invalid_argument("fill_tensors: a tensor of 2^32 elements or more");
    a.t[a.n] = fills[i];
    a.first[a.n] = total;
    total += elems;
    ++a.n;
  }
  a.first[a.n] = total;
  if (total == 0) return;
  a.dist = r.dist;
  a.seed = r.seed;
  a.dt = dt;
  a.dout = dout;
  fill_tensors_kernel<<<blocks_for(total), 256, 0, harness_stream()>>>(a);
  check(cudaGetLastError(), "fill_tensors launch");
}

void fill_recipe_rows(float* dst, const DataRecipe& r, TensorId t, double scale, DType dt, std::uint32_t b,
                      std::uint32_t pos0, std::uint32_t rows, std::uint32_t heads, std::uint32_t dim, bool onehot) {
  const std::uint64_t n = static_cast<std::uint64_t>(rows) * heads * dim;
  if (n == 0) return;
  // The element -> value map is independent of the grid, so any launch shape gives the same bits.
  const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>((n + 255) / 256, 65535));
  fill_kernel<<<blocks, 256, 0, harness_stream()>>>(dst, r.dist, r.seed, t, scale, dt, b, pos0, n, heads, dim, onehot);
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
    copy_to_host(host.data(), dev, n * sizeof(float));
  } catch (...) {
    cudaFree(dev);
    throw;
  }
  check(cudaFree(dev), "cudaFree");
  return host;
}

}  // namespace flashcheck::device
