#include "reference/device/attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
#include "core/geometry.h"
#include "core/tolerance.h"
#include "reference/device/attention_tc.h"
#include "reference/device/kv_address.cuh"
#include "reference/device/warp_math.cuh"

namespace flashcheck::device {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 16;  // head dims up to 512

struct Params {
  DeviceInputs in;
  std::int32_t page_size, total_q, H, Hk, d, dv, group;
  float scale, softcap;
  std::int32_t win_left, win_right;
  DType dtype;
  EmptyRow empty_row;
  bool cache, paged;
  DeviceResult res;
};

Params make_params(const DeviceCase& dc, EmptyRow conv, const DeviceResult& res) {
  const KernelCase& c = dc.kcase();
  const MaskRule rule = mask_rule(c);
  Params p;
  p.in = dc.inputs();
  p.page_size = static_cast<std::int32_t>(c.paging.page_size);
  p.total_q = static_cast<std::int32_t>(dc.geometry().total_q);
  p.H = static_cast<std::int32_t>(c.heads);
  p.Hk = static_cast<std::int32_t>(c.kv_heads);
  p.d = static_cast<std::int32_t>(c.head_dim);
  p.dv = static_cast<std::int32_t>(c.v_head_dim);
  p.group = static_cast<std::int32_t>(c.group());
  p.scale = static_cast<float>(c.softmax_scale());
  p.softcap = static_cast<float>(c.softcap);
  p.win_left = static_cast<std::int32_t>(rule.left);
  p.win_right = static_cast<std::int32_t>(rule.right);
  p.dtype = c.dtype;
  p.empty_row = conv;
  p.cache = c.kv_cache;
  p.paged = c.kv_storage == KvStorage::kPaged;
  p.res = res;
  return p;
}

// Row of K (or V) holding key j of sequence b, KV head kh (kv_address.cuh resolves it).
__device__ const float* kv_row(const Params& p, const DeviceSeq& s, int b, int j, int kh, bool value) {
  return device::kv_row(KvLayout{p.in, p.page_size, p.Hk, p.d, p.dv, p.cache, p.paged}, s, b, j, kh, value);
}

struct Cell {
  int b, i, h, kh, lo, hi, lk;
  long long cell;
  DeviceSeq s;
};

__device__ bool locate(const Params& p, int lane_cell, Cell& c) {
  if (lane_cell >= p.total_q * p.H) return false;
  c.cell = lane_cell;
  const int row = lane_cell / p.H;
  c.h = lane_cell % p.H;
  c.b = p.in.row_seq[row];
  c.s = p.in.seqs[c.b];
  c.i = row - c.s.q_start;
  c.kh = c.h / p.group;
  c.lk = c.s.lk;
  c.lo = 0;
  c.hi = c.lk;
  if (p.win_left >= 0 && c.i + c.s.off - p.win_left > c.lo) c.lo = c.i + c.s.off - p.win_left;
  if (p.win_right >= 0 && c.i + c.s.off + p.win_right + 1 < c.hi) c.hi = c.i + c.s.off + p.win_right + 1;
  return true;
}

// NaN-propagating max: a NaN logit must surface, not be skipped.
__device__ float nan_max(float a, float b) { return (a > b || isnan(a)) ? a : b; }
__device__ float warp_nan_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = nan_max(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Writes an empty row by the convention; the uniform one averages V over all keys of the sequence.
// `noise` (reference only) gets the sensitivity of that mean.
__device__ void write_empty(const Params& p, const Cell& c, int lane, float* out, float* noise, bool rounded) {
  for (int x = lane; x < p.dv; x += 32) {
    float val = 0.0f, spread = 0.0f;
    if (p.empty_row == EmptyRow::kNaN) {
      val = NAN;
    } else if (p.empty_row == EmptyRow::kUniform && c.lk > 0) {
      float sum = 0.0f, abs_sum = 0.0f;
      for (int j = 0; j < c.lk; ++j) {
        const float v = kv_row(p, c.s, c.b, j, c.kh, true)[x];
        sum += v;
        abs_sum += fabsf(v);
      }
      val = sum / static_cast<float>(c.lk);
      spread = tolerance::uniform_mean_sensitivity(c.lk, abs_sum, val);
    }
    out[c.cell * p.dv + x] = rounded ? round_dt(p.dtype, val) : val;
    if (noise) noise[c.cell * p.dv + x] = spread;
  }
}

constexpr int kKeysInShared = 1024;
constexpr int kKeysPerStep = 4;  // keys whose V rows are loaded together in P.V  // baseline logits kept per warp; longer rows recompute them

// Logits of a chunk of up to 32 keys, key j0 + lane on each lane. K is staged through a shared 32 x 33
// tile, 32 dims at a time, so that every global load is one coalesced row segment and the lane-per-key
// reads hit distinct banks. The baseline rounds k * scale to the dtype while staging.
template <bool kBaseline>
__device__ float chunk_logit(const Params& p, const Cell& c, int j0, int n, const float* sq, float (*tile)[33],
                             const float** rows, float* abs_dot) {
  const int lane = threadIdx.x % 32;
  // Each lane resolves the address of one key's K row (cache, pages) once; the staging loop reads them
  // from shared memory instead of redoing that arithmetic for every 32 dims.
  __syncwarp();
  if (lane < n) rows[lane] = kv_row(p, c.s, c.b, j0 + lane, c.kh, false);
  __syncwarp();
  float dot = 0.0f, dabs = 0.0f;
  for (int x0 = 0; x0 < p.d; x0 += 32) {
    // All 32 loads first, then the stores: the loads are independent and stay in flight together.
    float vals[32];
#pragma unroll
    for (int kk = 0; kk < 32; ++kk) vals[kk] = (kk < n && x0 + lane < p.d) ? rows[kk][x0 + lane] : 0.0f;
#pragma unroll
    for (int kk = 0; kk < 32; ++kk)
      if (kk < n) tile[kk][lane] = kBaseline ? round_dt(p.dtype, vals[kk] * p.scale) : vals[kk];
    __syncwarp();
    if (lane < n) {
      const int w = min(32, p.d - x0);
#pragma unroll 8
      for (int xx = 0; xx < w; ++xx) {
        const float t = sq[x0 + xx] * tile[lane][xx];
        dot += t;
        if (!kBaseline) dabs += fabsf(t);
      }
    }
    __syncwarp();
  }
  if (lane >= n) return -INFINITY;
  if (kBaseline) {
    float s = round_dt(p.dtype, dot);
    if (p.softcap > 0.0f) s = round_dt(p.dtype, round_dt(p.dtype, tanhf(round_dt(p.dtype, s / p.softcap))) * p.softcap);
    return s;
  }
  *abs_dot = tolerance::logit_magnitude(p.scale, dabs);
  float s = dot * p.scale;
  if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
  return s;
}

// The V rows of keys j0 .. j0 + n - 1, one address per lane, for the P.V loop.
__device__ void stage_v_rows(const Params& p, const Cell& c, int j0, int n, const float** rows) {
  const int lane = threadIdx.x % 32;
  __syncwarp();
  if (lane < n) rows[lane] = kv_row(p, c.s, c.b, j0 + lane, c.kh, true);
  __syncwarp();
}

// One warp per (query row, head). Lanes own keys for Q.K (32 keys at a time) and channels for P.V; the
// softmax is online over chunks of 32 keys, in fp32.
// kT = ceil(dv / 32) rounded up to a power of two: the channels each lane owns in P.V.
template <int kT>
__global__ void reference_kernel(Params p) {
  __shared__ float q_shared[kWarpsPerBlock][32 * kMaxPerLane];
  __shared__ float k_tile[kWarpsPerBlock][32][33];
  __shared__ const float* k_rows[kWarpsPerBlock][32];
  __shared__ const float* v_rows[kWarpsPerBlock][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Cell c;
  if (!locate(p, blockIdx.x * kWarpsPerBlock + warp, c)) return;
  if (c.hi <= c.lo) {
    write_empty(p, c, lane, p.res.out, p.res.noise, false);
    if (lane == 0) {
      p.res.empty[c.cell] = 1;
      p.res.lse[c.cell] = p.empty_row == EmptyRow::kNaN ? NAN : -INFINITY;
      p.res.lse_noise[c.cell] = 0.0f;
    }
    return;
  }
  float* sq = q_shared[warp];
  const float* qrow = p.in.q + (static_cast<long long>(c.s.q_start + c.i) * p.H + c.h) * p.d;
  for (int x = lane; x < p.d; x += 32) sq[x] = qrow[x];
  __syncwarp();
  float m = -INFINITY, z = 0.0f, smax = 0.0f;
  float acc[kT], spread[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) acc[t] = spread[t] = 0.0f;
  for (int j0 = c.lo; j0 < c.hi; j0 += 32) {
    const int j = j0 + lane;
    float dabs = 0.0f;
    const float s = chunk_logit<false>(p, c, j0, min(32, c.hi - j0), sq, k_tile[warp], k_rows[warp], &dabs);
    smax = fmaxf(smax, warp_max(dabs));
    const float m_new = nan_max(m, warp_nan_max(s));
    const float keep = m == -INFINITY ? 0.0f : expf(m - m_new);
    const float e = j < c.hi ? expf(s - m_new) : 0.0f;
    z = z * keep + warp_sum(e);
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      acc[t] *= keep;
      spread[t] *= keep;
    }
    const int n = min(32, c.hi - j0);
    stage_v_rows(p, c, j0, n, v_rows[warp]);
    for (int kk = 0; kk < n; kk += kKeysPerStep) {
      float ek[kKeysPerStep];
      const float* v[kKeysPerStep];
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) {
        ek[u] = __shfl_sync(0xffffffffu, e, (kk + u) & 31);
        v[u] = v_rows[warp][min(kk + u, n - 1)];
      }
#pragma unroll
      for (int t = 0; t < kT; ++t)
        if (lane + 32 * t < p.dv) {
          float vx[kKeysPerStep];
#pragma unroll
          for (int u = 0; u < kKeysPerStep; ++u) vx[u] = v[u][lane + 32 * t];
#pragma unroll
          for (int u = 0; u < kKeysPerStep; ++u)
            if (kk + u < n) {
              acc[t] += ek[u] * vx[u];
              spread[t] += ek[u] * fabsf(vx[u]);
            }
        }
    }
    m = m_new;
  }
  // The sensitivity of core/tolerance.h, the same formula as the fp64 host reference's.
  const float ds = tolerance::logit_sensitivity(static_cast<float>(p.d), smax);
  const float terms = tolerance::sum_sensitivity<float>(c.hi - c.lo);
#pragma unroll
  for (int t = 0; t < kT; ++t)
    if (lane + 32 * t < p.dv) {
      const float o = acc[t] / z, a = spread[t] / z;
      p.res.out[c.cell * p.dv + lane + 32 * t] = o;
      p.res.noise[c.cell * p.dv + lane + 32 * t] = tolerance::output_sensitivity(ds, terms, a, o);
    }
  if (lane == 0) {
    p.res.empty[c.cell] = 0;
    p.res.lse[c.cell] = m + logf(z);
    p.res.lse_noise[c.cell] = tolerance::lse_sensitivity(ds, m, logf(z), terms);
  }
}

// The low-precision baseline: pass 1 computes the rounded logits (kept in shared memory when the row is
// short enough), their max and the fp32 sum; pass 2 rounds P = exp(s - m) / Z and accumulates P.V.
template <int kT>
__global__ void baseline_kernel(Params p) {
  __shared__ float q_shared[kWarpsPerBlock][32 * kMaxPerLane];
  __shared__ float logits[kWarpsPerBlock][kKeysInShared];
  __shared__ float k_tile[kWarpsPerBlock][32][33];
  __shared__ const float* k_rows[kWarpsPerBlock][32];
  __shared__ const float* v_rows[kWarpsPerBlock][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Cell c;
  if (!locate(p, blockIdx.x * kWarpsPerBlock + warp, c)) return;
  if (c.hi <= c.lo) {
    write_empty(p, c, lane, p.res.out, nullptr, true);
    if (lane == 0) p.res.lse[c.cell] = p.empty_row == EmptyRow::kNaN ? NAN : -INFINITY;
    return;
  }
  float* sq = q_shared[warp];
  const float* qrow = p.in.q + (static_cast<long long>(c.s.q_start + c.i) * p.H + c.h) * p.d;
  for (int x = lane; x < p.d; x += 32) sq[x] = qrow[x];
  __syncwarp();
  const bool stored = c.hi - c.lo <= kKeysInShared;
  float m = -INFINITY, z = 0.0f;
  for (int j0 = c.lo; j0 < c.hi; j0 += 32) {
    const int j = j0 + lane;
    const float s = chunk_logit<true>(p, c, j0, min(32, c.hi - j0), sq, k_tile[warp], k_rows[warp], nullptr);
    if (stored && j < c.hi) logits[warp][j - c.lo] = s;
    const float m_new = nan_max(m, warp_nan_max(s));
    const float keep = m == -INFINITY ? 0.0f : expf(m - m_new);
    z = z * keep + warp_sum(j < c.hi ? expf(s - m_new) : 0.0f);
    m = m_new;
  }
  __syncwarp();
  float acc[kT];
#pragma unroll
  for (int t = 0; t < kT; ++t) acc[t] = 0.0f;
  for (int j0 = c.lo; j0 < c.hi; j0 += 32) {
    const int j = j0 + lane;
    const float s = stored ? (j < c.hi ? logits[warp][j - c.lo] : -INFINITY)
                           : chunk_logit<true>(p, c, j0, min(32, c.hi - j0), sq, k_tile[warp], k_rows[warp], nullptr);
    const float pj = j < c.hi ? round_dt(p.dtype, expf(s - m) / z) : 0.0f;
    const int n = min(32, c.hi - j0);
    stage_v_rows(p, c, j0, n, v_rows[warp]);
    for (int kk = 0; kk < n; kk += kKeysPerStep) {
      float pk[kKeysPerStep];
      const float* v[kKeysPerStep];
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) {
        pk[u] = __shfl_sync(0xffffffffu, pj, (kk + u) & 31);
        v[u] = v_rows[warp][min(kk + u, n - 1)];
      }
#pragma unroll
      for (int t = 0; t < kT; ++t)
        if (lane + 32 * t < p.dv) {
          float vx[kKeysPerStep];
#pragma unroll
          for (int u = 0; u < kKeysPerStep; ++u) vx[u] = v[u][lane + 32 * t];
#pragma unroll
          for (int u = 0; u < kKeysPerStep; ++u)
            if (kk + u < n) acc[t] += pk[u] * vx[u];
        }
    }
  }
#pragma unroll
  for (int t = 0; t < kT; ++t)
    if (lane + 32 * t < p.dv) p.res.out[c.cell * p.dv + lane + 32 * t] = round_dt(p.dtype, acc[t]);
  if (lane == 0) p.res.lse[c.cell] = m + logf(z);
}

unsigned grid_for(const Params& p) {
  const long long cells = static_cast<long long>(p.total_q) * p.H;
  return static_cast<unsigned>((cells + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// kT covers dv: the channels each lane owns in P.V.
template <template <int> class Launch>
void dispatch_dv(const Params& p) {
  launch_for_head_dim<Launch>(p.dv, p);
}
template <int kT>
struct LaunchReference {
  static void run(const Params& p) { reference_kernel<kT><<<grid_for(p), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p); }
};
template <int kT>
struct LaunchBaseline {
  static void run(const Params& p) { baseline_kernel<kT><<<grid_for(p), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p); }
};

}  // namespace

namespace {

DeviceResult reference_buffers(const DeviceCase& dc, const std::string& slot) {
  const KernelCase& c = dc.kcase();
  const std::size_t cells = static_cast<std::size_t>(dc.geometry().total_q * c.heads), elems = cells * static_cast<std::size_t>(c.v_head_dim);
  DeviceResult r;
  r.out = slot_of<float>(slot + ".out", elems);
  r.lse = slot_of<float>(slot + ".lse", cells);
  r.empty = slot_of<std::uint8_t>(slot + ".empty", cells);
  r.noise = slot_of<float>(slot + ".noise", elems);
  r.lse_noise = slot_of<float>(slot + ".lse_noise", cells);
  return r;
}

DeviceResult baseline_buffers(const DeviceCase& dc, const std::string& slot) {
  const KernelCase& c = dc.kcase();
  const std::size_t cells = static_cast<std::size_t>(dc.geometry().total_q * c.heads), elems = cells * static_cast<std::size_t>(c.v_head_dim);
  DeviceResult r;
  r.out = slot_of<float>(slot + ".out", elems);
  r.lse = slot_of<float>(slot + ".lse", cells);
  return r;
}

void simt_reference(const DeviceCase& dc, EmptyRow empty_row, const DeviceResult& r) {
  const KernelCase& c = dc.kcase();
  if (c.head_dim > 32 * kMaxPerLane || c.v_head_dim > 32 * kMaxPerLane)
    throw std::invalid_argument("device reference: head dims above 512 are not supported");
  if (dc.geometry().total_q * c.heads == 0) return;
  dispatch_dv<LaunchReference>(make_params(dc, empty_row, r));
  check_last("device reference");
}

void simt_baseline(const DeviceCase& dc, EmptyRow empty_row, const DeviceResult& r) {
  if (dc.geometry().total_q * dc.kcase().heads == 0) return;
  dispatch_dv<LaunchBaseline>(make_params(dc, empty_row, r));
  check_last("device baseline");
}

}  // namespace

DeviceResult device_reference(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot) {
  const DeviceResult r = reference_buffers(dc, slot);
  if (tc_unsupported_reason(dc).empty()) tc_reference_and_baseline(dc, empty_row, r, DeviceResult{});
  else simt_reference(dc, empty_row, r);
  return r;
}

DeviceResult device_baseline(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot) {
  const DeviceResult r = baseline_buffers(dc, slot);
  if (tc_unsupported_reason(dc).empty()) tc_reference_and_baseline(dc, empty_row, DeviceResult{}, r);
  else simt_baseline(dc, empty_row, r);
  return r;
}

std::pair<DeviceResult, DeviceResult> device_reference_and_baseline(const DeviceCase& dc, EmptyRow empty_row,
                                                                    const std::string& truth_slot,
                                                                    const std::string& baseline_slot) {
  const DeviceResult truth = reference_buffers(dc, truth_slot), base = baseline_buffers(dc, baseline_slot);
  if (tc_unsupported_reason(dc).empty()) {
    tc_reference_and_baseline(dc, empty_row, truth, base);
  } else {
    simt_reference(dc, empty_row, truth);
    simt_baseline(dc, empty_row, base);
  }
  return {truth, base};
}

DeviceResult device_reference_simt(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot) {
  const DeviceResult r = reference_buffers(dc, slot);
  simt_reference(dc, empty_row, r);
  return r;
}

DeviceResult device_baseline_simt(const DeviceCase& dc, EmptyRow empty_row, const std::string& slot) {
  const DeviceResult r = baseline_buffers(dc, slot);
  simt_baseline(dc, empty_row, r);
  return r;
}

AttentionResult download(const DeviceCase& dc, const DeviceResult& r) {
  const CaseGeometry& g = dc.geometry();
  const KernelCase& c = dc.kcase();
  const std::size_t cells = static_cast<std::size_t>(g.total_q * c.heads), elems = cells * static_cast<std::size_t>(c.v_head_dim);
  AttentionResult a;
  auto get = [](const float* src, std::size_t n) {
    std::vector<float> f(n);
    copy_to_host(f.data(), src, n * sizeof(float));
    return std::vector<double>(f.begin(), f.end());
  };
  if (r.out) a.out = get(r.out, elems);
  if (r.lse) a.lse = get(r.lse, cells);
  if (r.noise) a.noise = get(r.noise, elems);
  if (r.lse_noise) a.lse_noise = get(r.lse_noise, cells);
  if (r.empty) {
    a.empty.resize(cells);
    copy_to_host(a.empty.data(), r.empty, cells);
  }
  return a;
}

}  // namespace flashcheck::device
