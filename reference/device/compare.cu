#include "reference/device/compare.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
#include "core/tolerance.h"

namespace flashcheck::device {
namespace {

constexpr int kWarps = 4;
// Blocks of the first pass: enough to fill an H200's 132 SMs many times over, few enough that the atomics into
// Acc stay far from the time of reading the outputs.
constexpr unsigned kCompareBlocks = 2048;

struct Acc {
  unsigned long long worst;      // (error bits << 32) | element index; errors are >= 0 so bits order as values
  unsigned int base_max, floor_max;  // float bits
  double err_sum, base_sum, mean_floor_sum, spacing_sum;
  unsigned long long compared, compared_rows, nonfinite, empty_rows, empty_wrong, first_empty_wrong, mismatches;
  unsigned long long lse_worst;
  unsigned int lse_base_max, lse_floor_max;
  // Filled by the finishing kernel: out, truth, baseline at the worst element, the first wrong empty
  // element and the worst LSE cell.
  float worst_values[3], empty_values[3], lse_values[3];
};

struct Args {
  const float *out, *lse, *t_out, *t_lse, *t_noise, *t_lse_noise, *b_out, *b_lse;
  const std::uint8_t* empty;
  long long cells;
  int dv, mantissa_bits, min_normal_exp;
  EmptyRow conv;
  bool check_lse;
  float k_max;  // the rule's multiplier: the finishing kernel computes the bound on the device
  Acc* acc;
};

// The rule of core/tolerance.h in float, the precision of the device results.
__device__ float dtype_spacing(const Args& a, float t) { return tolerance::spacing(t, a.mantissa_bits, a.min_normal_exp); }

__device__ unsigned long long pack(float e, unsigned int idx) {
  unsigned int bits;
  memcpy(&bits, &e, 4);
  return (static_cast<unsigned long long>(bits) << 32) | idx;
}

__device__ unsigned long long warp_sum_u64(unsigned long long x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ unsigned int bits_of(float f) {
  unsigned int b;
  memcpy(&b, &f, 4);
  return b;
}

// What one thread has seen of the cells its warp visited; reduced over the block before touching Acc.
// No member initializers: a __shared__ array of it must be trivially constructible (nothing() gives the start).
struct Partial {
  unsigned long long worst, compared, nonfinite;
  float base_max, floor_max;
  double err_sum, base_sum, mfloor, ssum;
  // Per cell, kept by lane 0 only.
  unsigned long long compared_rows, empty_rows, empty_wrong, first_empty_wrong, lse_worst;
  unsigned int lse_base_max, lse_floor_max;

  __device__ static Partial nothing() {
    Partial p{};
    p.first_empty_wrong = ~0ull;
    return p;
  }

  __device__ void merge(const Partial& o) {
    worst = max(worst, o.worst);
    compared += o.compared;
    nonfinite += o.nonfinite;
    base_max = fmaxf(base_max, o.base_max);
    floor_max = fmaxf(floor_max, o.floor_max);
    err_sum += o.err_sum;
    base_sum += o.base_sum;
    mfloor += o.mfloor;
    ssum += o.ssum;
    compared_rows += o.compared_rows;
    empty_rows += o.empty_rows;
    empty_wrong += o.empty_wrong;
    first_empty_wrong = min(first_empty_wrong, o.first_empty_wrong);
    lse_worst = max(lse_worst, o.lse_worst);
    lse_base_max = max(lse_base_max, o.lse_base_max);
    lse_floor_max = max(lse_floor_max, o.lse_floor_max);
  }
};

// One (row, head) cell, by one warp: lanes stride over the channels and add into their own Partial.
__device__ void compare_cell(const Args& a, long long cell, int lane, Partial& p) {
  const bool empty = a.empty[cell] != 0;
  if (empty && a.conv != EmptyRow::kUniform) {
    unsigned long long first = ~0ull;
    for (int x = lane; x < a.dv; x += 32) {
      const float o = a.out[cell * a.dv + x];
      const bool ok = a.conv == EmptyRow::kZero ? o == 0.0f : isnan(o);
      if (!ok) first = min(first, static_cast<unsigned long long>(cell * a.dv + x));
    }
    for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    if (lane == 0) {
      ++p.empty_rows;
      if (first != ~0ull) {
        ++p.empty_wrong;
        p.first_empty_wrong = min(p.first_empty_wrong, first);
      }
    }
    return;
  }
  for (int x = lane; x < a.dv; x += 32) {
    const long long at = cell * a.dv + x;
    const float o = a.out[at], t = a.t_out[at], b = a.b_out[at];
    ++p.compared;
    if (!isfinite(t)) {
      const bool same = (isnan(o) && isnan(t)) || (isinf(o) && o == t);
      if (!same) {
        ++p.nonfinite;
        p.worst = max(p.worst, pack(INFINITY, static_cast<unsigned int>(at)));
      }
      continue;
    }
    float e = fabsf(o - t);
    if (!isfinite(o)) {
      ++p.nonfinite;
      e = INFINITY;
    }
    const float nz = a.t_noise[at];
    const float sp = dtype_spacing(a, t);
    float be = fabsf(b - t);
    if (!isfinite(be)) be = tolerance::overflowed_baseline_error(sp);
    const float fl = tolerance::max_floor(sp, nz);
    if (isfinite(e)) p.err_sum += e;
    p.base_sum += be;
    p.mfloor += tolerance::mean_floor(sp, nz);
    p.ssum += sp;
    p.floor_max = fmaxf(p.floor_max, fl);
    p.base_max = fmaxf(p.base_max, be);
    p.worst = max(p.worst, pack(e, static_cast<unsigned int>(at)));
  }
  if (lane != 0) return;
  if (empty) ++p.empty_rows;
  if (a.dv > 0) ++p.compared_rows;  // every channel of the cell was compared
  if (a.check_lse && !empty) {
    const float lt = a.t_lse[cell], lo = a.lse[cell], lb = a.b_lse[cell];
    float e = fabsf(lo - lt);
    if (!isfinite(lo)) e = INFINITY;
    if (isnan(e)) e = INFINITY;
    p.lse_worst = max(p.lse_worst, pack(e, static_cast<unsigned int>(cell)));
    const float lbe = fabsf(lb - lt);
    const float lsp = dtype_spacing(a, lt);
    p.lse_base_max = max(p.lse_base_max, bits_of(isfinite(lbe) ? lbe : tolerance::overflowed_baseline_error(lsp)));
    p.lse_floor_max = max(p.lse_floor_max, bits_of(tolerance::max_floor(lsp, a.t_lse_noise[cell])));
  }
}

__device__ void warp_merge(Partial& p) {
  for (int o = 16; o > 0; o >>= 1) {
    Partial q = Partial::nothing();
    q.worst = __shfl_xor_sync(0xffffffffu, p.worst, o);
    q.compared = __shfl_xor_sync(0xffffffffu, p.compared, o);
    q.nonfinite = __shfl_xor_sync(0xffffffffu, p.nonfinite, o);
    q.base_max = __shfl_xor_sync(0xffffffffu, p.base_max, o);
    q.floor_max = __shfl_xor_sync(0xffffffffu, p.floor_max, o);
    q.err_sum = __shfl_xor_sync(0xffffffffu, p.err_sum, o);
    q.base_sum = __shfl_xor_sync(0xffffffffu, p.base_sum, o);
    q.mfloor = __shfl_xor_sync(0xffffffffu, p.mfloor, o);
    q.ssum = __shfl_xor_sync(0xffffffffu, p.ssum, o);
    q.compared_rows = __shfl_xor_sync(0xffffffffu, p.compared_rows, o);
    q.empty_rows = __shfl_xor_sync(0xffffffffu, p.empty_rows, o);
    q.empty_wrong = __shfl_xor_sync(0xffffffffu, p.empty_wrong, o);
    q.first_empty_wrong = __shfl_xor_sync(0xffffffffu, p.first_empty_wrong, o);
    q.lse_worst = __shfl_xor_sync(0xffffffffu, p.lse_worst, o);
    q.lse_base_max = __shfl_xor_sync(0xffffffffu, p.lse_base_max, o);
    q.lse_floor_max = __shfl_xor_sync(0xffffffffu, p.lse_floor_max, o);
    p.merge(q);
  }
}

// Each warp walks cells with a grid stride and keeps its statistics in registers; the block merges its warps
// in shared memory and adds into Acc once. Atomics per cell on the one Acc (a dozen, some in double) serialised
// on the same addresses: 5.5 ms for the 524,288 cells of every realistic shape (docs/PERFORMANCE.md).
__global__ void compare_kernel(Args a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Partial p = Partial::nothing();
  for (long long cell = static_cast<long long>(blockIdx.x) * kWarps + warp; cell < a.cells;
       cell += static_cast<long long>(gridDim.x) * kWarps)
    compare_cell(a, cell, lane, p);
  warp_merge(p);
  __shared__ Partial block[kWarps];
  if (lane == 0) block[warp] = p;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kWarps; ++w) p.merge(block[w]);
  Acc& acc = *a.acc;
  atomicMax(&acc.worst, p.worst);
  atomicMax(&acc.base_max, bits_of(p.base_max));
  atomicMax(&acc.floor_max, bits_of(p.floor_max));
  atomicAdd(&acc.err_sum, p.err_sum);
  atomicAdd(&acc.base_sum, p.base_sum);
  atomicAdd(&acc.mean_floor_sum, p.mfloor);
  atomicAdd(&acc.spacing_sum, p.ssum);
  atomicAdd(&acc.compared, p.compared);
  atomicAdd(&acc.compared_rows, p.compared_rows);
  atomicAdd(&acc.nonfinite, p.nonfinite);
  atomicAdd(&acc.empty_rows, p.empty_rows);
  atomicAdd(&acc.empty_wrong, p.empty_wrong);
  atomicMin(&acc.first_empty_wrong, p.first_empty_wrong);
  atomicMax(&acc.lse_worst, p.lse_worst);
  atomicMax(&acc.lse_base_max, p.lse_base_max);
  atomicMax(&acc.lse_floor_max, p.lse_floor_max);
}

__global__ void init_kernel(Acc* acc) {
  *acc = Acc{};
  acc->first_empty_wrong = ~0ull;
}

__device__ float float_bits(unsigned int bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

// Counts the elements over the bound (k * base_max + floor, computed here from the first pass) and
// fetches the values at the reported locations, so that one copy brings everything back.
__global__ void finish_kernel(Args a) {
  const long long cell = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  Acc& acc = *a.acc;
  const float bound = a.k_max * float_bits(acc.base_max) + float_bits(acc.floor_max);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long w = acc.worst & 0xffffffffull;
    if (acc.compared) {
      acc.worst_values[0] = a.out[w];
      acc.worst_values[1] = a.t_out[w];
      acc.worst_values[2] = a.b_out[w];
    }
    if (acc.first_empty_wrong != ~0ull) {
      acc.empty_values[0] = a.out[acc.first_empty_wrong];
      acc.empty_values[1] = a.t_out[acc.first_empty_wrong];
      acc.empty_values[2] = a.b_out[acc.first_empty_wrong];
    }
    if (a.check_lse && acc.lse_worst) {
      const unsigned long long l = acc.lse_worst & 0xffffffffull;
      acc.lse_values[0] = a.lse[l];
      acc.lse_values[1] = a.t_lse[l];
      acc.lse_values[2] = a.b_lse[l];
    }
  }
  if (cell >= a.cells) return;
  if (a.empty[cell] != 0 && a.conv != EmptyRow::kUniform) return;
  unsigned long long n = 0;
  for (int x = lane; x < a.dv; x += 32) {
    const long long at = cell * a.dv + x;
    const float o = a.out[at], t = a.t_out[at];
    const bool ok = isfinite(t) ? fabsf(o - t) <= bound : ((isnan(o) && isnan(t)) || (isinf(o) && o == t));
    n += ok ? 0 : 1;
  }
  n = warp_sum_u64(n);
  if (lane == 0 && n) atomicAdd(&acc.mismatches, n);
}

float float_of(unsigned int bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

Comparison device_compare(const DeviceCase& dc, const float* out, const float* lse, const DeviceResult& truth,
                          const DeviceResult& baseline, EmptyRow convention, const ToleranceRule& rule) {
  const KernelCase& c = dc.kcase();
  const CaseGeometry& g = dc.geometry();
  const detail::FloatFormat f = detail::format_of(c.dtype);
  Args a{};
  a.out = out;
  a.lse = lse;
  a.t_out = truth.out;
  a.t_lse = truth.lse;
  a.t_noise = truth.noise;
  a.t_lse_noise = truth.lse_noise;
  a.b_out = baseline.out;
  a.b_lse = baseline.lse;
  a.empty = truth.empty;
  a.cells = g.total_q * c.heads;
  a.dv = static_cast<int>(c.v_head_dim);
  a.mantissa_bits = f.mantissa_bits;
  a.min_normal_exp = f.min_normal_exp;
  a.conv = convention;
  a.check_lse = lse != nullptr;
  a.k_max = static_cast<float>(rule.k_max);
  a.acc = slot_of<Acc>("compare.acc", 1);
  init_kernel<<<1, 1, 0, harness_stream()>>>(a.acc);
  if (a.cells > 0) {
    const unsigned grid = static_cast<unsigned>((a.cells + kWarps - 1) / kWarps);
    compare_kernel<<<std::min(grid, kCompareBlocks), 32 * kWarps, 0, harness_stream()>>>(a);
    finish_kernel<<<grid, 32 * kWarps, 0, harness_stream()>>>(a);
  }
  check_last("device compare");
  Acc acc{};
  copy_to_host(&acc, a.acc, sizeof acc);
  Comparison cmp;
  cmp.compared = static_cast<std::int64_t>(acc.compared);
  cmp.nonfinite = static_cast<std::int64_t>(acc.nonfinite);
  cmp.empty_rows = static_cast<std::int64_t>(acc.empty_rows);
  cmp.empty_wrong = static_cast<std::int64_t>(acc.empty_wrong);
  cmp.mismatches = static_cast<std::int64_t>(acc.mismatches);
  cmp.base_max = float_of(acc.base_max);
  cmp.floor = float_of(acc.floor_max);
  cmp.bound = rule.k_max * cmp.base_max + cmp.floor;
  const double n = static_cast<double>(std::max<std::int64_t>(cmp.compared, 1));
  cmp.err_mean = cmp.nonfinite ? INFINITY : acc.err_sum / n;
  cmp.base_mean = acc.base_sum / n;
  cmp.mean_bound = rule.k_mean * cmp.base_mean +
                   tolerance::mean_check_floor(acc.mean_floor_sum / n, acc.spacing_sum / n,
                                               static_cast<long long>(acc.compared_rows > 0 ? acc.compared_rows : 1));
  // (b, h, i, d) of an element index of the packed output (or of a cell, for the LSE).
  auto locate = [&](unsigned long long index, bool element, const float* values) {
    ElementLoc loc;
    const long long cell = element ? static_cast<long long>(index) / c.v_head_dim : static_cast<long long>(index);
    const long long row = cell / c.heads;
    for (std::size_t b = 0; b < g.seqs.size(); ++b)
      if (row >= g.seqs[b].q_start && row < g.seqs[b].q_start + g.seqs[b].lq) {
        loc.b = static_cast<std::int64_t>(b);
        loc.i = row - g.seqs[b].q_start;
      }
    loc.h = cell % c.heads;
    loc.d = element ? static_cast<std::int64_t>(index % static_cast<unsigned long long>(c.v_head_dim)) : -1;
    loc.out = values[0];
    loc.truth = values[1];
    loc.baseline = values[2];
    return loc;
  };
  if (cmp.compared > 0) {
    cmp.err_max = float_of(static_cast<unsigned int>(acc.worst >> 32));
    cmp.worst = locate(acc.worst & 0xffffffffull, true, acc.worst_values);
  }
  if (cmp.empty_wrong > 0) cmp.first_empty_wrong = locate(acc.first_empty_wrong, true, acc.empty_values);
  if (lse) {
    cmp.lse_checked = true;
    cmp.lse_err = float_of(static_cast<unsigned int>(acc.lse_worst >> 32));
    cmp.lse_base = float_of(acc.lse_base_max);
    cmp.lse_bound = rule.k_lse * cmp.lse_base + float_of(acc.lse_floor_max);
    if (acc.lse_worst) cmp.lse_worst = locate(acc.lse_worst & 0xffffffffull, false, acc.lse_values);
  }
  return cmp;
}

}  // namespace flashcheck::device
