#include "reference/device/gradient_compare.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
#include "core/portable.h"
#include "core/tolerance.h"

namespace flashcheck::device {
namespace {

constexpr int kThreads = 256;
// Blocks of the element passes: enough to fill an H200 many times over; their partials are reduced by one block in
// a fixed order, so the sums are the same every run.
constexpr long long kMaxBlocks = 1024;
// Elements per thread below which another block is not worth its merge: a block's tree of 256 Partials costs more
// than a few more loads per thread, and a standard case's tensors of a few 10^5 elements took 1024 blocks otherwise.
constexpr long long kGrain = 8;
// Tensors compared by one launch of each pass: dQ, dK and dV of a case.
constexpr int kMaxTensors = 3;

// A row of the tensor: its span (-1: not defined) and its index within the span.
struct RowInfo {
  int span;
  int local;
};

// What a thread, a block and finally the whole tensor has seen in the first pass. No member initializers: a
// __shared__ array of it must be trivially constructible (nothing() gives the start).
struct Partial {
  double err_sum, base_sum, mean_floor_sum, spacing_sum, floor_max, base_max, worst_err;
  long long worst_at;  // flat index of the worst element; LLONG_MAX while worst_err is -1
  unsigned long long compared, sampled, nonfinite;

  __host__ __device__ static Partial nothing() {
    Partial p{};
    p.worst_err = -1;
    p.worst_at = LLONG_MAX;
    return p;
  }

  // Sums add; maxima as the host's std::max (no NaN reaches them); the worst is the largest error, on ties the
  // smallest index: the host's first in (span, row, head, channel) order, since the spans increase.
  __device__ void merge(const Partial& o) {
    err_sum += o.err_sum;
    base_sum += o.base_sum;
    mean_floor_sum += o.mean_floor_sum;
    spacing_sum += o.spacing_sum;
    floor_max = tolerance::math::max(floor_max, o.floor_max);
    base_max = tolerance::math::max(base_max, o.base_max);
    if (o.worst_err > worst_err || (o.worst_err == worst_err && o.worst_at < worst_at)) {
      worst_err = o.worst_err;
      worst_at = o.worst_at;
    }
    compared += o.compared;
    sampled += o.sampled;
    nonfinite += o.nonfinite;
  }
};

// Everything that comes back, in one copy.
struct Acc {
  Partial total;
  double floor, bound;     // floor_max + extra, k_max * base_max + floor: computed on the device for the second pass
  double worst_values[3];  // got, truth, baseline at the worst element
  unsigned long long mismatches, content_cells;
  unsigned blocks_done;  // blocks of the first pass that have written their Partial: the last one totals them
};

struct Args {
  const float* got;
  const double* truth;
  const float* base;
  const double* noise;  // may be null
  const double* terms;  // may be null
  const RowInfo* rows;
  long long first, last;  // the flat elements [first, last) cover every defined row
  long long cell_dim;     // heads * dim: elements per row
  long long dim;
  long long heads;
  int blocks;     // of the first pass; its grid stride, so the sums do not depend on the other tensors of the launch
  bool compare;   // false: the content cells alone (device_mean_cells)
  DType dt;
  int mantissa_bits, min_normal_exp;
  double unit_roundoff, extra, k_max;
  Partial* partials;  // this tensor's, one per block of the first pass
  Acc* acc;
};

// The tensors of one launch, blockIdx.y each.
struct Batch {
  Args t[kMaxTensors];
};

// core/compare_gradients.cc's beyond_range: a truth past the dtype's range met by the dtype's largest value (or
// infinity) of its sign is not judged.
__device__ bool beyond_range(DType dt, double truth, double out) {
  const double rounded = round_to(dt, truth);
  if (!isinf(rounded) || !isfinite(truth)) return false;
  return (out > 0) == (truth > 0) && fabs(out) >= detail::format_of(dt).max_finite;
}

// core/compare.cc's rounding_floor.
__device__ double rounding_floor(const Args& a, double truth) {
  return tolerance::spacing(truth, a.mantissa_bits, a.min_normal_exp);
}

__device__ bool defined(const Args& a, long long at) { return a.rows[at / a.cell_dim].span >= 0; }

// Reduces the block's Partials in shared memory (a fixed tree) into sh[0].
__device__ void block_merge(Partial* sh) {
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x].merge(sh[threadIdx.x + s]);
    __syncthreads();
  }
}

// A Partial another block wrote, read past the L1 cache (which does not see other blocks' writes).
__device__ Partial load_partial(const Partial* at) {
  Partial p;
  p.err_sum = __ldcg(&at->err_sum);
  p.base_sum = __ldcg(&at->base_sum);
  p.mean_floor_sum = __ldcg(&at->mean_floor_sum);
  p.spacing_sum = __ldcg(&at->spacing_sum);
  p.floor_max = __ldcg(&at->floor_max);
  p.base_max = __ldcg(&at->base_max);
  p.worst_err = __ldcg(&at->worst_err);
  p.worst_at = __ldcg(&at->worst_at);
  p.compared = __ldcg(&at->compared);
  p.sampled = __ldcg(&at->sampled);
  p.nonfinite = __ldcg(&at->nonfinite);
  return p;
}

// The last block of a tensor's first pass: the partials in a fixed order (whichever block comes last), then the floor
// and bound of the second pass and the values at the worst element.
__device__ void total(const Args& a, Partial* sh) {
  Partial p = Partial::nothing();
  for (int i = static_cast<int>(threadIdx.x); i < a.blocks; i += kThreads) p.merge(load_partial(a.partials + i));
  sh[threadIdx.x] = p;
  __syncthreads();
  block_merge(sh);
  if (threadIdx.x != 0) return;
  Acc& acc = *a.acc;
  acc.total = sh[0];
  // The host's cmp.floor = floor_max + extra; cmp.bound = k_max * base_max + floor, each operation rounded (no FMA).
  acc.floor = portable::add(sh[0].floor_max, a.extra);
  acc.bound = portable::add(portable::mul(a.k_max, sh[0].base_max), acc.floor);
  if (sh[0].worst_err >= 0) {
    const long long w = sh[0].worst_at;
    acc.worst_values[0] = a.got[w];
    acc.worst_values[1] = a.truth[w];
    acc.worst_values[2] = a.base[w];
  }
}

// First pass, tensor blockIdx.y: compare_gradient's loop, element by element, into one Partial per block; the block
// that finishes last totals them.
__global__ void stats_kernel(Batch batch) {
  const Args& a = batch.t[blockIdx.y];
  if (!a.compare || static_cast<int>(blockIdx.x) >= a.blocks) return;
  Partial p = Partial::nothing();
  const long long stride = static_cast<long long>(a.blocks) * kThreads;
  for (long long at = a.first + static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; at < a.last; at += stride) {
    if (!defined(a, at)) continue;
    const double o = a.got[at], r = a.truth[at], b = a.base[at];
    ++p.compared;
    if (beyond_range(a.dt, r, o)) continue;
    double e = fabs(o - r);
    if (!isfinite(o) || !isfinite(r)) {
      ++p.nonfinite;
      e = INFINITY;
    }
    const double term = a.terms ? a.terms[at] : 0.0;
    const double sp = rounding_floor(a, a.terms ? tolerance::math::max(fabs(r), term) : r);
    double be = fabs(b - r);
    if (!isfinite(be)) be = tolerance::overflowed_baseline_error(sp);
    const double nz = a.noise ? a.noise[at] : 0.0;
    p.floor_max = tolerance::math::max(p.floor_max, tolerance::max_floor(sp, nz));
    p.base_max = tolerance::math::max(p.base_max, be);
    if (r != 0.0 || (a.terms && term != 0.0)) {
      ++p.sampled;
      p.mean_floor_sum += tolerance::grad_mean_floor(rounding_floor(a, r), a.unit_roundoff, term, fabs(r), nz);
      p.spacing_sum += sp;
      p.err_sum += isfinite(e) ? e : 0.0;
      p.base_sum += be;
    }
    if (e > p.worst_err) {  // the thread visits its elements in increasing order: ties keep the first
      p.worst_err = e;
      p.worst_at = at;
    }
  }
  __shared__ Partial sh[kThreads];
  __shared__ bool last;
  sh[threadIdx.x] = p;
  __syncthreads();
  block_merge(sh);
  if (threadIdx.x == 0) {
    a.partials[blockIdx.x] = sh[0];
    __threadfence();  // the Partial is visible to every block before the count says it is there
    last = atomicAdd(&a.acc->blocks_done, 1u) == static_cast<unsigned>(a.blocks) - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  total(a, sh);
}

__device__ unsigned long long warp_sum(unsigned long long x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Second pass, tensor blockIdx.y, in the grid's stride (integer atomics: the counts do not depend on the order):
// - the elements over the bound (NaN counts), the beyond-range ones skipped;
// - mean_cells_of: one warp per (row, head) cell, lanes over the channels; a cell counts when any element has a
//   nonzero truth or terms.
__global__ void counts_kernel(Batch batch) {
  const Args& a = batch.t[blockIdx.y];
  if (a.compare) {
    const double bound = a.acc->bound;
    unsigned long long n = 0;
    const long long stride = static_cast<long long>(gridDim.x) * kThreads;
    for (long long at = a.first + static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; at < a.last; at += stride) {
      if (!defined(a, at)) continue;
      const double o = a.got[at], r = a.truth[at];
      if (beyond_range(a.dt, r, o)) continue;
      n += fabs(o - r) <= bound ? 0 : 1;
    }
    n = warp_sum(n);
    if (threadIdx.x % 32 == 0 && n) atomicAdd(&a.acc->mismatches, n);
  }
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32;
  const long long stride = static_cast<long long>(gridDim.x) * kWarps, last_cell = a.last / a.dim;
  unsigned long long n = 0;
  for (long long cell = a.first / a.dim + static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
       cell < last_cell; cell += stride) {
    if (a.rows[cell / a.heads].span < 0) continue;  // the same for every lane of the warp
    bool content = false;
    for (long long x = lane; x < a.dim && !content; x += 32) {
      const long long at = cell * a.dim + x;
      content = a.truth[at] != 0.0 || (a.terms && a.terms[at] != 0.0);
    }
    n += __any_sync(0xffffffffu, content) ? 1 : 0;
  }
  if (lane == 0 && n) atomicAdd(&a.acc->content_cells, n);
}

// The row map of the spans, checked: the non-empty ones increasing, disjoint, within [0, rows) (an empty span defines
// nothing, wherever it lies).
std::vector<RowInfo> row_map(const DeviceGradientTensor& t) {
  if (t.rows < 0 || t.heads < 0 || t.dim < 0) throw std::invalid_argument("device_compare_gradient: negative shape");
  if (t.rows > INT_MAX || t.spans.size() > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument("device_compare_gradient: more rows than the row map holds");
  std::vector<RowInfo> map(static_cast<std::size_t>(t.rows), RowInfo{-1, 0});
  std::int64_t previous_end = 0;
  for (std::size_t s = 0; s < t.spans.size(); ++s) {
    const RowSpan& span = t.spans[s];
    if (span.end == span.begin) continue;
    if (span.begin < previous_end || span.end < span.begin || span.end > t.rows)
      throw std::invalid_argument("device_compare_gradient: " + t.name + "'s spans are not increasing, disjoint rows");
    for (std::int64_t row = span.begin; row < span.end; ++row)
      map[static_cast<std::size_t>(row)] = RowInfo{static_cast<int>(s), static_cast<int>(row - span.begin)};
    previous_end = span.end;
  }
  return map;
}

// The flat elements [first, last) from the first defined row to the end of the last (empty when none is defined).
struct Extent {
  long long first = 0, last = 0;
};
Extent extent_of(const DeviceGradientTensor& t) {
  Extent e;
  bool any = false;
  for (const RowSpan& span : t.spans) {
    if (span.end == span.begin) continue;
    if (!any) e.first = span.begin;
    e.last = span.end;
    any = true;
  }
  const long long cell_dim = t.heads * t.dim;
  if (!any || cell_dim == 0) return {};
  return {e.first * cell_dim, e.last * cell_dim};
}

int blocks_for(long long work, long long per_block) {
  return static_cast<int>(std::min((work + per_block - 1) / per_block, kMaxBlocks));
}

// Uploads row maps into one slot, in one copy (no allocation once the slot is large enough); returns each map's start.
std::vector<const RowInfo*> upload(const std::vector<const std::vector<RowInfo>*>& maps) {
  std::vector<RowInfo> all;
  std::vector<std::size_t> at;
  for (const auto* m : maps) {
    at.push_back(all.size());
    all.insert(all.end(), m->begin(), m->end());
  }
  RowInfo* rows = slot_of<RowInfo>("gradient_compare.rows", all.size());
  copy_to_device(rows, all.data(), all.size() * sizeof(RowInfo));
  std::vector<const RowInfo*> starts;
  for (std::size_t x : at) starts.push_back(rows + x);
  return starts;
}

// One tensor's comparison, in two halves around the copy of its Acc: what the host knows before, and the epilogue.
struct Pending {
  const DeviceGradientTensor* t = nullptr;
  std::vector<RowInfo> map;
  Extent e;
  double extra = 0;
  bool launched = false;  // whether the tensor has defined elements (else nothing goes to the device)
};

// The row map and extent of a tensor: what every pass needs.
Pending locate(const DeviceGradientTensor& t) {
  Pending q;
  q.t = &t;
  q.map = row_map(t);
  q.e = extent_of(t);
  return q;
}

Pending prepare(bool softcap, const DeviceGradientTensor& t) {
  Pending q = locate(t);
  q.extra = tolerance::grad_extra_floor(softcap);
  q.launched = q.e.last > q.e.first;
  if (q.launched && (!t.got || !t.truth || !t.baseline))
    throw std::invalid_argument("device_compare_gradient: " + t.name + " lacks got, truth or baseline");
  return q;
}

// One tensor's arguments, its Partials the `index`th of the partials' slot and its results in *acc.
Args args_of(DType dt, const Pending& q, const RowInfo* rows, double k_max, bool compare, int index, Acc* acc) {
  const DeviceGradientTensor& t = *q.t;
  const detail::FloatFormat f = detail::format_of(dt);
  Args a{};
  a.got = t.got;
  a.truth = t.truth;
  a.base = t.baseline;
  a.noise = t.noise;
  a.terms = t.terms;
  a.rows = rows;
  a.first = q.e.first;
  a.last = q.e.last;
  a.cell_dim = t.heads * t.dim;
  a.dim = t.dim;
  a.heads = t.heads;
  a.blocks = blocks_for(q.e.last - q.e.first, kThreads * kGrain);
  a.compare = compare;
  a.dt = dt;
  a.mantissa_bits = f.mantissa_bits;
  a.min_normal_exp = f.min_normal_exp;
  a.unit_roundoff = std::ldexp(1.0, -(f.mantissa_bits + 1));
  a.extra = q.extra;
  a.k_max = k_max;
  a.partials = slot_of<Partial>("gradient_compare.partials", static_cast<std::size_t>(kMaxTensors * kMaxBlocks)) +
               static_cast<std::ptrdiff_t>(index) * kMaxBlocks;
  a.acc = acc;
  return a;
}

// Queues the two passes of the batch's tensors on the harness stream into their Accs (`acc`, one per tensor, zeroed
// first) and copies them to `host`: one wait.
void run(const std::vector<Args>& tensors, Acc* acc, Acc* host) {
  if (tensors.empty() || tensors.size() > static_cast<std::size_t>(kMaxTensors))
    throw std::logic_error("device_compare_gradient: 1 to 3 tensors a launch");
  Batch batch{};
  int blocks = 1;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    batch.t[i] = tensors[i];
    blocks = std::max(blocks, tensors[i].blocks);
  }
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(tensors.size()));
  check(cudaMemsetAsync(acc, 0, tensors.size() * sizeof(Acc), harness_stream()), "cudaMemsetAsync");
  stats_kernel<<<grid, kThreads, 0, harness_stream()>>>(batch);
  counts_kernel<<<grid, kThreads, 0, harness_stream()>>>(batch);
  check_last("device compare gradient");
  copy_to_host(host, acc, tensors.size() * sizeof(Acc));
}

// compare_gradient's epilogue, on the statistics of the device (`acc` as a tensor without defined elements leaves it).
Comparison finish(const Pending& q, const Acc& acc_in, double k_max, std::int64_t mean_cells) {
  const DeviceGradientTensor& t = *q.t;
  Acc acc = acc_in;
  if (!q.launched) {
    acc = Acc{};
    acc.total = Partial::nothing();
    acc.floor = 0.0 + q.extra;
    acc.bound = k_max * 0.0 + acc.floor;  // exact either way: the product is 0 (or NaN)
  }
  const double extra = q.extra;
  const Partial& p = acc.total;
  Comparison cmp;
  cmp.tensor = t.name;
  cmp.compared = static_cast<std::int64_t>(p.compared);
  cmp.nonfinite = static_cast<std::int64_t>(p.nonfinite);
  cmp.mismatches = static_cast<std::int64_t>(acc.mismatches);
  cmp.base_max = p.base_max;
  cmp.floor = acc.floor;
  cmp.bound = acc.bound;
  cmp.err_max = p.worst_err < 0 ? 0.0 : p.worst_err;
  if (p.worst_err >= 0) {
    const std::int64_t at = p.worst_at, cell_dim = t.heads * t.dim;
    const RowInfo& row = q.map[static_cast<std::size_t>(at / cell_dim)];
    cmp.worst = ElementLoc{row.span, (at % cell_dim) / t.dim, row.local, at % t.dim, acc.worst_values[0],
                           acc.worst_values[1], acc.worst_values[2]};
  }
  const double n = static_cast<double>(std::max<std::int64_t>(static_cast<std::int64_t>(p.sampled), 1));
  const std::int64_t cells = std::min(mean_cells, static_cast<std::int64_t>(acc.content_cells));
  cmp.err_mean = cmp.nonfinite ? INFINITY : p.err_sum / n;
  cmp.base_mean = p.base_sum / n;
  cmp.mean_bound = mean_cells > 0 ? tolerance::kMean * cmp.base_mean +
                                        tolerance::mean_check_floor(p.mean_floor_sum / n, p.spacing_sum / n,
                                                                    static_cast<long long>(std::max<std::int64_t>(cells, 1))) +
                                        extra
                                  : INFINITY;
  return cmp;
}

}  // namespace

std::int64_t device_mean_cells(const DeviceGradientTensor& t) {
  const Pending q = locate(t);
  if (q.e.last == q.e.first) return 0;
  if (!t.truth) throw std::invalid_argument("device_mean_cells: " + t.name + " has no truth");
  Acc* dev = slot_of<Acc>("gradient_compare.acc", 1);
  Acc acc{};
  run({args_of(DType::kF32, q, upload({&q.map})[0], 0.0, false, 0, dev)}, dev, &acc);
  return static_cast<std::int64_t>(acc.content_cells);
}

Comparison device_compare_gradient(DType dt, bool softcap, const DeviceGradientTensor& t, double k_max,
                                   std::int64_t mean_cells) {
  const Pending q = prepare(softcap, t);
  Acc acc{};
  if (q.launched) {
    Acc* dev = slot_of<Acc>("gradient_compare.acc", 1);
    run({args_of(dt, q, upload({&q.map})[0], k_max, true, 0, dev)}, dev, &acc);
  }
  return finish(q, acc, k_max, mean_cells);
}

GradientComparisons device_compare_gradients(DType dt, bool softcap, const DeviceGradientTensor& dq,
                                             const DeviceGradientTensor& dk, const DeviceGradientTensor& dv, double k_max) {
  const Pending q[3] = {prepare(softcap, dq), prepare(softcap, dk), prepare(softcap, dv)};
  Acc acc[3]{};
  std::vector<int> launched;
  for (int i = 0; i < 3; ++i)
    if (q[i].launched) launched.push_back(i);
  if (!launched.empty()) {
    std::vector<const std::vector<RowInfo>*> maps;
    for (int i : launched) maps.push_back(&q[i].map);
    const std::vector<const RowInfo*> rows = upload(maps);
    Acc* dev = slot_of<Acc>("gradient_compare.acc", 3);
    std::vector<Args> tensors;
    for (std::size_t n = 0; n < launched.size(); ++n)
      tensors.push_back(args_of(dt, q[launched[n]], rows[n], k_max, true, static_cast<int>(n), dev + n));
    Acc back[3]{};
    run(tensors, dev, back);
    for (std::size_t n = 0; n < launched.size(); ++n) acc[launched[n]] = back[n];
  }
  // device_mean_cells of dQ is its content cells, counted by its own comparison.
  const auto query_cells = std::max<std::int64_t>(q[0].launched ? static_cast<std::int64_t>(acc[0].content_cells) : 0, 1);
  return {finish(q[0], acc[0], k_max, query_cells), finish(q[1], acc[1], k_max, query_cells),
          finish(q[2], acc[2], k_max, query_cells)};
}

}  // namespace flashcheck::device
