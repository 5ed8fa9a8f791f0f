#include "reference/device/gradients.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/device/device_case.h"
#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
#include "core/geometry.h"
#include "core/tolerance.h"
#include "reference/device/gradients_tc.h"
#include "reference/device/warp_math.cuh"
#include "reference/key_share.h"

namespace flashcheck::device {
namespace {

using reference::key_share;
using reference::KeyShare;
using reference::RowShareStats;

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = 16;  // head dims up to 512

// Per (query row, head), written by the first pass and read by every key of the row afterwards. z == 0: no key.
struct TruthRow {
  double m, z;
  RowShareStats<double> share;
};
struct BaselineRow {
  float m, z, big_d;
};

struct Params {
  DeviceInputs in;
  const float* dout;
  const std::int32_t* key_seq;  // (kv_rows): the sequence whose logical keys hold each storage row, -1 for none
  std::int32_t total_q, kv_rows, H, Hk, d, dv, group;
  double scale, cap;
  float scale_f, cap_f;
  std::int32_t win_left, win_right;
  DType dtype;
  TruthRow* truth_rows;
  BaselineRow* base_rows;
  double *ref_dq, *ref_dk, *ref_dv, *dq_noise, *dk_noise, *dv_noise, *dq_terms, *dk_terms, *dv_terms;  // the fp64 reference
  float *bdq, *bdk, *bdv;                                                                   // the baseline
};

// Logical key j of a sequence: packed storage row k_start + p0 + j (backward cases have packed K/V, no cache).
__device__ const float* key_row(const Params& p, const DeviceSeq& s, int j, int kh) {
  return p.in.k + ((static_cast<long long>(s.k_start) + s.p0 + j) * p.Hk + kh) * p.d;
}
__device__ const float* value_row(const Params& p, const DeviceSeq& s, int j, int kh) {
  return p.in.v + ((static_cast<long long>(s.k_start) + s.p0 + j) * p.Hk + kh) * p.dv;
}

// One (query row, head) and the keys it sees, [lo, hi) (core/geometry.h visible_keys).
struct Cell {
  int b, i, h, kh, lo, hi;
  long long cell, row;
  DeviceSeq s;
};

__device__ bool locate(const Params& p, long long id, Cell& c) {
  if (id >= static_cast<long long>(p.total_q) * p.H) return false;
  c.cell = id;
  c.row = id / p.H;
  c.h = static_cast<int>(id % p.H);
  c.b = p.in.row_seq[c.row];
  c.s = p.in.seqs[c.b];
  c.i = static_cast<int>(c.row) - c.s.q_start;
  c.kh = c.h / p.group;
  c.lo = 0;
  c.hi = c.s.lk;
  if (p.win_left >= 0 && c.i + c.s.off - p.win_left > c.lo) c.lo = c.i + c.s.off - p.win_left;
  if (p.win_right >= 0 && c.i + c.s.off + p.win_right + 1 < c.hi) c.hi = c.i + c.s.off + p.win_right + 1;
  return true;
}

// One key and KV head of a sequence, and the query rows [i_lo, i_hi) that see it (the inverse of visible_keys).
struct KeyCell {
  int kh, j, i_lo, i_hi;
  long long krow;
  DeviceSeq s;
};

__device__ bool locate_key(const Params& p, long long id, KeyCell& k) {
  if (id >= static_cast<long long>(p.kv_rows) * p.Hk) return false;
  k.krow = id / p.Hk;
  k.kh = static_cast<int>(id % p.Hk);
  const int b = p.key_seq[k.krow];
  if (b < 0) return false;  // no sequence's key: its gradient stays zero
  k.s = p.in.seqs[b];
  k.j = static_cast<int>(k.krow - k.s.k_start - k.s.p0);
  if (k.j < 0 || k.j >= k.s.lk) return false;
  k.i_lo = 0;
  k.i_hi = k.s.lq;
  if (p.win_left >= 0 && k.j - k.s.off + p.win_left + 1 < k.i_hi) k.i_hi = k.j - k.s.off + p.win_left + 1;
  if (p.win_right >= 0 && k.j - k.s.off - p.win_right > k.i_lo) k.i_lo = k.j - k.s.off - p.win_right;
  return true;
}

// ---- The fp64 reference ------------------------------------------------------------------------------------

// The logit of q against k after the softcap, tanh(s / cap) in *t (0 without) and the softcap's derivative in *c (1
// without) when asked, S_j in *magnitude when asked.
__device__ double truth_logit(const Params& p, const float* q, const float* k, double* t, double* magnitude,
                              double* c = nullptr) {
  const int lane = threadIdx.x % 32;
  double dot = 0.0, dot_abs = 0.0;
  for (int x = lane; x < p.d; x += 32) {
    const double prod = static_cast<double>(q[x]) * static_cast<double>(k[x]);
    dot += prod;
    dot_abs += fabs(prod);
  }
  dot = warp_sum(dot);
  if (magnitude) *magnitude = tolerance::logit_magnitude(p.scale, warp_sum(dot_abs));
  double s = p.scale * dot;
  *t = 0.0;
  if (p.cap > 0) {
    *t = tanh(s / p.cap);
    if (c) *c = reference::softcap_derivative(s / p.cap);
    s = p.cap * *t;
  }
  return s;
}

// dO . v over dv channels, and sum |dO_x v_x|.
__device__ double truth_dp(const Params& p, const float* g, const float* v, double* abs_sum) {
  const int lane = threadIdx.x % 32;
  double dp = 0.0, dp_abs = 0.0;
  for (int x = lane; x < p.dv; x += 32) {
    const double prod = static_cast<double>(g[x]) * static_cast<double>(v[x]);
    dp += prod;
    dp_abs += fabs(prod);
  }
  *abs_sum = warp_sum(dp_abs);
  return warp_sum(dp);
}

// Pass 1, one warp per (query row, head): m, Z and the row's share statistics (D = dO . O with the output's own
// sensitivity, as ExactRow::compute and ExactRow::backward compute them).
template <int kT>
__global__ void truth_rows_kernel(Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Cell c;
  if (!locate(p, static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp, c)) return;
  if (c.hi <= c.lo) {
    if (lane == 0) p.truth_rows[c.cell] = TruthRow{0.0, 0.0, {}};
    return;
  }
  const float* q = p.in.q + c.cell * p.d;
  const float* g = p.dout + c.cell * p.dv;
  double m = -INFINITY, max_magnitude = 0.0, t = 0.0, magnitude = 0.0;
  for (int j = c.lo; j < c.hi; ++j) {
    const double s = truth_logit(p, q, key_row(p, c.s, j, c.kh), &t, &magnitude);
    if (s > m || isnan(s)) m = s;  // NaN propagates instead of being skipped
    if (max_magnitude < magnitude) max_magnitude = magnitude;
  }
  double z = 0.0, acc[kT], weighted[kT];
#pragma unroll
  for (int u = 0; u < kT; ++u) acc[u] = weighted[u] = 0.0;
  for (int j = c.lo; j < c.hi; ++j) {
    const double e = exp(truth_logit(p, q, key_row(p, c.s, j, c.kh), &t, nullptr) - m);
    z += e;
    const float* v = value_row(p, c.s, j, c.kh);
#pragma unroll
    for (int u = 0; u < kT; ++u)
      if (lane + 32 * u < p.dv) {
        const double vx = static_cast<double>(v[lane + 32 * u]);
        acc[u] += e * vx;
        weighted[u] += e * fabs(vx);
      }
  }
  const double logit_sens = tolerance::logit_sensitivity(static_cast<double>(p.d), max_magnitude);
  const double terms = tolerance::sum_sensitivity<double>(c.hi - c.lo);
  double big_d = 0.0, d_abs = 0.0, d_squares = 0.0, d_carried = 0.0;
#pragma unroll
  for (int u = 0; u < kT; ++u)
    if (lane + 32 * u < p.dv) {
      const double o = acc[u] / z;
      const double noise = tolerance::output_sensitivity(logit_sens, terms, weighted[u] / z, o);
      const double gx = static_cast<double>(g[lane + 32 * u]);
      big_d += gx * o;
      d_abs += fabs(gx * o);
      d_squares += (gx * o) * (gx * o);
      d_carried += fabs(gx) * noise;
    }
  big_d = warp_sum(big_d);
  d_abs = warp_sum(d_abs);
  d_squares = warp_sum(d_squares);
  d_carried = warp_sum(d_carried);
  if (lane == 0)
    p.truth_rows[c.cell] = TruthRow{m, z,
                                    {big_d, tolerance::gradient_sensitivity(static_cast<long long>(p.dv), d_abs, d_carried),
                                     tolerance::terms_magnitude(d_squares), logit_sens}};
}

// Key j's share of row `r` (a row that sees it).
__device__ KeyShare<double> truth_share(const Params& p, const TruthRow& r, const float* q, const float* g, const float* k,
                                        const float* v) {
  double t = 0.0, c = 1.0, dp_abs = 0.0;
  const double s = truth_logit(p, q, k, &t, nullptr, &c);
  const double pj = exp(s - r.m) / r.z;
  const double dp = truth_dp(p, g, v, &dp_abs);
  return key_share(r.share, pj, t, c, p.cap, dp, dp_abs, static_cast<long long>(p.dv));
}

// dQ of one (query row, head): scale sum_j ds_j k_j, with its sensitivity and terms.
template <int kT>
__global__ void truth_dq_kernel(Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Cell c;
  if (!locate(p, static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp, c) || c.hi <= c.lo) return;
  const TruthRow r = p.truth_rows[c.cell];
  const float* q = p.in.q + c.cell * p.d;
  const float* g = p.dout + c.cell * p.dv;
  double sum[kT], abs_sum[kT], carried[kT], squares[kT];
#pragma unroll
  for (int u = 0; u < kT; ++u) sum[u] = abs_sum[u] = carried[u] = squares[u] = 0.0;
  for (int j = c.lo; j < c.hi; ++j) {
    const float* k = key_row(p, c.s, j, c.kh);
    const KeyShare<double> ks = truth_share(p, r, q, g, k, value_row(p, c.s, j, c.kh));
#pragma unroll
    for (int u = 0; u < kT; ++u)
      if (lane + 32 * u < p.d) {
        const double kx = static_cast<double>(k[lane + 32 * u]);
        sum[u] += ks.ds * kx;
        abs_sum[u] += fabs(ks.ds * kx);
        carried[u] += ks.ds_noise * fabs(kx);
        squares[u] += (ks.ds_magnitude * kx) * (ks.ds_magnitude * kx);
      }
  }
#pragma unroll
  for (int u = 0; u < kT; ++u)
    if (lane + 32 * u < p.d) {
      const long long at = c.cell * p.d + lane + 32 * u;
      p.ref_dq[at] = p.scale * sum[u];
      p.dq_terms[at] = fabs(p.scale) * tolerance::terms_magnitude(squares[u]);
      p.dq_noise[at] = fabs(p.scale) * tolerance::gradient_sensitivity(static_cast<long long>(c.hi - c.lo), abs_sum[u], carried[u]);
    }
}

// dK and dV of one key and KV head: the sum over the query heads of its group and the rows that see it.
template <int kT>
__global__ void truth_dkdv_kernel(Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  KeyCell kc;
  if (!locate_key(p, static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp, kc)) return;
  const float* k = key_row(p, kc.s, kc.j, kc.kh);
  const float* v = value_row(p, kc.s, kc.j, kc.kh);
  double k_sum[kT], k_abs[kT], k_carried[kT], k_squares[kT], v_sum[kT], v_abs[kT], v_carried[kT], v_squares[kT];
#pragma unroll
  for (int u = 0; u < kT; ++u) k_sum[u] = k_abs[u] = k_carried[u] = k_squares[u] = v_sum[u] = v_abs[u] = v_carried[u] = v_squares[u] = 0.0;
  long long terms = 0;
  for (int h = kc.kh * p.group; h < (kc.kh + 1) * p.group; ++h)
    for (int i = kc.i_lo; i < kc.i_hi; ++i) {
      const long long cell = (static_cast<long long>(kc.s.q_start) + i) * p.H + h;
      const TruthRow r = p.truth_rows[cell];
      const float* q = p.in.q + cell * p.d;
      const float* g = p.dout + cell * p.dv;
      const KeyShare<double> ks = truth_share(p, r, q, g, k, v);
      ++terms;
#pragma unroll
      for (int u = 0; u < kT; ++u) {
        const int x = lane + 32 * u;
        if (x < p.d) {
          const double qx = static_cast<double>(q[x]);
          k_sum[u] += p.scale * ks.ds * qx;
          k_abs[u] += fabs(p.scale * ks.ds * qx);
          k_carried[u] += fabs(p.scale) * ks.ds_noise * fabs(qx);
          k_squares[u] += (p.scale * ks.ds_magnitude * qx) * (p.scale * ks.ds_magnitude * qx);
        }
        if (x < p.dv) {
          const double gx = static_cast<double>(g[x]);
          v_sum[u] += ks.p * gx;
          v_abs[u] += fabs(ks.p * gx);
          v_carried[u] += ks.p_noise * fabs(gx);
          v_squares[u] += (ks.p * gx) * (ks.p * gx);
        }
      }
    }
  const long long cell = kc.krow * p.Hk + kc.kh;
#pragma unroll
  for (int u = 0; u < kT; ++u) {
    const int x = lane + 32 * u;
    if (x < p.d) {
      p.ref_dk[cell * p.d + x] = k_sum[u];
      p.dk_terms[cell * p.d + x] = tolerance::terms_magnitude(k_squares[u]);
      p.dk_noise[cell * p.d + x] = tolerance::gradient_sensitivity(terms, k_abs[u], k_carried[u]);
    }
    if (x < p.dv) {
      p.ref_dv[cell * p.dv + x] = v_sum[u];
      p.dv_terms[cell * p.dv + x] = tolerance::terms_magnitude(v_squares[u]);
      p.dv_noise[cell * p.dv + x] = tolerance::gradient_sensitivity(terms, v_abs[u], v_carried[u]);
    }
  }
}

// ---- The low-precision baseline (reference/host/gradients.h gives its rounding steps) -------------------------

// rd(q . rd(k scale)) and the softcap's rd steps; rd(tanh(rd(s / cap))) in *t.
__device__ float base_logit(const Params& p, const float* q, const float* k, float* t) {
  const int lane = threadIdx.x % 32;
  float dot = 0.0f;
  for (int x = lane; x < p.d; x += 32) dot += q[x] * round_dt(p.dtype, k[x] * p.scale_f);
  float l = round_dt(p.dtype, warp_sum(dot));
  *t = 0.0f;
  if (p.cap_f > 0.0f) {
    *t = round_dt(p.dtype, tanhf(round_dt(p.dtype, l / p.cap_f)));
    l = round_dt(p.dtype, *t * p.cap_f);
  }
  return l;
}

__device__ float base_dp(const Params& p, const float* g, const float* v) {
  const int lane = threadIdx.x % 32;
  float dp = 0.0f;
  for (int x = lane; x < p.dv; x += 32) dp += g[x] * v[x];
  return round_dt(p.dtype, warp_sum(dp));
}

// Pass 1: m, Z and D = sum_j P_j dP_j of one (query row, head).
__global__ void base_rows_kernel(Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Cell c;
  if (!locate(p, static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp, c)) return;
  if (c.hi <= c.lo) {
    if (lane == 0) p.base_rows[c.cell] = BaselineRow{0.0f, 0.0f, 0.0f};
    return;
  }
  const float* q = p.in.q + c.cell * p.d;
  const float* g = p.dout + c.cell * p.dv;
  float m = -INFINITY, z = 0.0f, t = 0.0f, big_d = 0.0f;
  for (int j = c.lo; j < c.hi; ++j) {
    const float l = base_logit(p, q, key_row(p, c.s, j, c.kh), &t);
    if (l > m || isnan(l)) m = l;
  }
  for (int j = c.lo; j < c.hi; ++j) z += expf(base_logit(p, q, key_row(p, c.s, j, c.kh), &t) - m);
  for (int j = c.lo; j < c.hi; ++j) {
    const float pj = round_dt(p.dtype, expf(base_logit(p, q, key_row(p, c.s, j, c.kh), &t) - m) / z);
    big_d += pj * base_dp(p, g, value_row(p, c.s, j, c.kh));
  }
  if (lane == 0) p.base_rows[c.cell] = BaselineRow{m, z, big_d};
}

// P_j and ds_j of one key for a row, rounded as the baseline rounds them.
__device__ float base_ds(const Params& p, const BaselineRow& r, const float* q, const float* g, const float* k, const float* v,
                         float* pj) {
  float t = 0.0f;
  const float l = base_logit(p, q, k, &t);
  *pj = round_dt(p.dtype, expf(l - r.m) / r.z);
  float ds = round_dt(p.dtype, *pj * (base_dp(p, g, v) - r.big_d));
  if (p.cap_f > 0.0f) {
    const float dtanh = round_dt(p.dtype, ds * p.cap_f);
    const float du = round_dt(p.dtype, dtanh * (1.0f - t * t));
    ds = round_dt(p.dtype, du / p.cap_f);
  }
  return ds;
}

template <int kT>
__global__ void base_dq_kernel(Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Cell c;
  if (!locate(p, static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp, c) || c.hi <= c.lo) return;
  const BaselineRow r = p.base_rows[c.cell];
  const float* q = p.in.q + c.cell * p.d;
  const float* g = p.dout + c.cell * p.dv;
  float acc[kT];
#pragma unroll
  for (int u = 0; u < kT; ++u) acc[u] = 0.0f;
  for (int j = c.lo; j < c.hi; ++j) {
    const float* k = key_row(p, c.s, j, c.kh);
    float pj = 0.0f;
    const float ds = base_ds(p, r, q, g, k, value_row(p, c.s, j, c.kh), &pj);
#pragma unroll
    for (int u = 0; u < kT; ++u)
      if (lane + 32 * u < p.d) acc[u] += ds * round_dt(p.dtype, k[lane + 32 * u] * p.scale_f);
  }
#pragma unroll
  for (int u = 0; u < kT; ++u)
    if (lane + 32 * u < p.d) p.bdq[c.cell * p.d + lane + 32 * u] = round_dt(p.dtype, acc[u]);
}

// dK/dV per query head in fp32, rounded, scaled (dK), rounded again and summed over the group, then rounded.
template <int kT>
__global__ void base_dkdv_kernel(Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  KeyCell kc;
  if (!locate_key(p, static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp, kc)) return;
  const float* k = key_row(p, kc.s, kc.j, kc.kh);
  const float* v = value_row(p, kc.s, kc.j, kc.kh);
  float group_k[kT], group_v[kT];
#pragma unroll
  for (int u = 0; u < kT; ++u) group_k[u] = group_v[u] = 0.0f;
  for (int h = kc.kh * p.group; h < (kc.kh + 1) * p.group; ++h) {
    float head_k[kT], head_v[kT];
#pragma unroll
    for (int u = 0; u < kT; ++u) head_k[u] = head_v[u] = 0.0f;
    for (int i = kc.i_lo; i < kc.i_hi; ++i) {
      const long long cell = (static_cast<long long>(kc.s.q_start) + i) * p.H + h;
      const float* q = p.in.q + cell * p.d;
      const float* g = p.dout + cell * p.dv;
      float pj = 0.0f;
      const float ds = base_ds(p, p.base_rows[cell], q, g, k, v, &pj);
#pragma unroll
      for (int u = 0; u < kT; ++u) {
        const int x = lane + 32 * u;
        if (x < p.d) head_k[u] += ds * q[x];
        if (x < p.dv) head_v[u] += pj * g[x];
      }
    }
#pragma unroll
    for (int u = 0; u < kT; ++u) {
      group_k[u] += round_dt(p.dtype, round_dt(p.dtype, head_k[u]) * p.scale_f);
      group_v[u] += round_dt(p.dtype, head_v[u]);
    }
  }
  const long long cell = kc.krow * p.Hk + kc.kh;
#pragma unroll
  for (int u = 0; u < kT; ++u) {
    const int x = lane + 32 * u;
    if (x < p.d) p.bdk[cell * p.d + x] = round_dt(p.dtype, group_k[u]);
    if (x < p.dv) p.bdv[cell * p.dv + x] = round_dt(p.dtype, group_v[u]);
  }
}

// ---- Launches ------------------------------------------------------------------------------------------------

unsigned blocks(long long warps) { return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

// kT covers both head dims: a lane owns values along d (dQ, dK) and along dv (O, dV).
template <template <int> class Launch>
void dispatch(const Params& p) {
  launch_for_head_dim<Launch>(std::max(p.d, p.dv), p);
}

template <int kT>
struct LaunchTruth {
  static void run(const Params& p) {
    const long long cells = static_cast<long long>(p.total_q) * p.H, keys = static_cast<long long>(p.kv_rows) * p.Hk;
    if (cells > 0) {
      truth_rows_kernel<kT><<<blocks(cells), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p);
      truth_dq_kernel<kT><<<blocks(cells), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p);
      if (keys > 0) truth_dkdv_kernel<kT><<<blocks(keys), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p);
    }
  }
};
template <int kT>
struct LaunchBaseline {
  static void run(const Params& p) {
    const long long cells = static_cast<long long>(p.total_q) * p.H, keys = static_cast<long long>(p.kv_rows) * p.Hk;
    if (cells > 0) {
      base_rows_kernel<<<blocks(cells), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p);
      base_dq_kernel<kT><<<blocks(cells), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p);
      if (keys > 0) base_dkdv_kernel<kT><<<blocks(keys), 32 * kWarpsPerBlock, 0, harness_stream()>>>(p);
    }
  }
};

// The case's inputs on the device and the parameters every kernel reads; `dc` and the uploads live in slots.
struct Prepared {
  Params p{};
  std::size_t cells = 0, dq_n = 0, dk_n = 0, dv_n = 0;  // (row, head) cells; gradient elements
};

Prepared prepare(const DeviceCase& dc, const std::string& slot) {
  const KernelCase& c = dc.kcase();
  if (!c.backward() || c.kv_storage != KvStorage::kPacked || c.kv_cache)
    throw std::invalid_argument("device gradients need a backward case with packed K/V and no cache");
  if (!dc.inputs().dout) throw std::invalid_argument("device gradients need the case's dout tensor");
  if (c.head_dim > 32 * kMaxPerLane || c.v_head_dim > 32 * kMaxPerLane)
    throw std::invalid_argument("device gradients: head dims above 512 are not supported");
  const CaseGeometry& g = dc.geometry();
  const MaskRule rule = mask_rule(c);
  Prepared r;
  Params& p = r.p;
  p.in = dc.inputs();
  p.dout = dc.inputs().dout;
  std::vector<std::int32_t> key_seq(static_cast<std::size_t>(g.kv_rows), -1);
  for (std::size_t b = 0; b < g.seqs.size(); ++b)
    for (std::int64_t j = 0; j < g.seqs[b].lk; ++j)
      key_seq[static_cast<std::size_t>(g.seqs[b].k_start + g.seqs[b].p0 + j)] = static_cast<std::int32_t>(b);
  auto* seq_of_key = slot_of<std::int32_t>(slot + ".key_seq", key_seq.size());
  if (!key_seq.empty()) copy_to_device(seq_of_key, key_seq.data(), key_seq.size() * sizeof(std::int32_t));
  p.key_seq = seq_of_key;
  p.total_q = static_cast<std::int32_t>(g.total_q);
  p.kv_rows = static_cast<std::int32_t>(g.kv_rows);
  p.H = static_cast<std::int32_t>(c.heads);
  p.Hk = static_cast<std::int32_t>(c.kv_heads);
  p.d = static_cast<std::int32_t>(c.head_dim);
  p.dv = static_cast<std::int32_t>(c.v_head_dim);
  p.group = static_cast<std::int32_t>(c.group());
  p.scale = c.softmax_scale();
  p.cap = c.softcap;
  p.scale_f = static_cast<float>(c.softmax_scale());
  p.cap_f = static_cast<float>(c.softcap);
  p.win_left = static_cast<std::int32_t>(rule.left);
  p.win_right = static_cast<std::int32_t>(rule.right);
  p.dtype = c.dtype;
  r.cells = static_cast<std::size_t>(g.total_q * c.heads);
  r.dq_n = static_cast<std::size_t>(g.q_rows * c.heads * c.head_dim);
  r.dk_n = static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.head_dim);
  r.dv_n = static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.v_head_dim);
  return r;
}

// A zeroed device array in a slot: elements no kernel writes (slack rows, keys outside every sequence, rows
// without keys) are zero, as the host reference leaves them.
template <typename T>
T* zeroed(const std::string& name, std::size_t n) {
  T* dst = slot_of<T>(name, n);
  check(cudaMemsetAsync(dst, 0, n * sizeof(T) + 1, harness_stream()), "cudaMemsetAsync");
  return dst;
}

template <typename T>
std::vector<double> fetch(const T* src, std::size_t n) {
  std::vector<T> host(n);
  if (n > 0) copy_to_host(host.data(), src, n * sizeof(T));
  return std::vector<double>(host.begin(), host.end());
}

// The truth's arrays in slots of `slot`, computed.
void run_truth(Params& p, const Prepared& pr, const std::string& slot) {
  p.truth_rows = slot_of<TruthRow>(slot + ".rows", pr.cells);
  p.ref_dq = zeroed<double>(slot + ".dq", pr.dq_n);
  p.dq_noise = zeroed<double>(slot + ".dq_noise", pr.dq_n);
  p.dq_terms = zeroed<double>(slot + ".dq_terms", pr.dq_n);
  p.ref_dk = zeroed<double>(slot + ".dk", pr.dk_n);
  p.dk_noise = zeroed<double>(slot + ".dk_noise", pr.dk_n);
  p.dk_terms = zeroed<double>(slot + ".dk_terms", pr.dk_n);
  p.ref_dv = zeroed<double>(slot + ".dv", pr.dv_n);
  p.dv_noise = zeroed<double>(slot + ".dv_noise", pr.dv_n);
  p.dv_terms = zeroed<double>(slot + ".dv_terms", pr.dv_n);
  dispatch<LaunchTruth>(p);
}

void run_baseline(Params& p, const Prepared& pr, const std::string& slot) {
  p.base_rows = slot_of<BaselineRow>(slot + ".rows", pr.cells);
  p.bdq = zeroed<float>(slot + ".dq", pr.dq_n);
  p.bdk = zeroed<float>(slot + ".dk", pr.dk_n);
  p.bdv = zeroed<float>(slot + ".dv", pr.dv_n);
  dispatch<LaunchBaseline>(p);
}

// The tensor-core path's arrays, zeroed, in the slots the SIMT path would use, and computed.
struct TcArrays {
  TcGradientOutputs out;
  std::array<std::size_t, 3> n{};
};
TcArrays run_tensor_cores(const DeviceCase& dc, const std::string& slot) {
  const KernelCase& c = dc.kcase();
  const CaseGeometry& g = dc.geometry();
  TcArrays a;
  a.n[0] = static_cast<std::size_t>(g.q_rows * c.heads * c.head_dim);
  a.n[1] = static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.head_dim);
  a.n[2] = static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.v_head_dim);
  // The twelve arrays in one slot, zeroed by one memset (a standard-mix case is a few hundred tokens: launches count).
  std::size_t bytes = 0;
  std::array<std::size_t, 3> at{};
  for (int w = 0; w < 3; ++w) {
    at[w] = bytes;
    bytes += (a.n[w] * (3 * sizeof(double) + sizeof(float)) + 15) / 16 * 16;
  }
  auto* base = zeroed<unsigned char>(slot + ".tc_arrays", bytes);
  for (int w = 0; w < 3; ++w) {
    auto* d = reinterpret_cast<double*>(base + at[w]);
    a.out.truth[w] = d;
    a.out.noise[w] = d + a.n[w];
    a.out.terms[w] = d + 2 * a.n[w];
    a.out.baseline[w] = reinterpret_cast<float*>(d + 3 * a.n[w]);
  }
  tc_reference_gradients(dc, a.out, slot + ".tc");
  return a;
}

// The reference's three gradients with their sensitivities and terms, and the baseline's, copied to the host.
GradientResult fetch_truth(const std::array<double*, 3>& truth, const std::array<double*, 3>& noise,
                           const std::array<double*, 3>& terms, const std::array<std::size_t, 3>& n) {
  GradientResult r;
  r.dq = fetch(truth[0], n[0]);
  r.dq_noise = fetch(noise[0], n[0]);
  r.dq_terms = fetch(terms[0], n[0]);
  r.dk = fetch(truth[1], n[1]);
  r.dk_noise = fetch(noise[1], n[1]);
  r.dk_terms = fetch(terms[1], n[1]);
  r.dv = fetch(truth[2], n[2]);
  r.dv_noise = fetch(noise[2], n[2]);
  r.dv_terms = fetch(terms[2], n[2]);
  return r;
}
GradientResult fetch_baseline(const std::array<float*, 3>& base, const std::array<std::size_t, 3>& n) {
  GradientResult r;
  r.dq = fetch(base[0], n[0]);
  r.dk = fetch(base[1], n[1]);
  r.dv = fetch(base[2], n[2]);
  return r;
}

GradientResult simt_truth(const DeviceCase& dc, const std::string& slot) {
  Prepared pr = prepare(dc, slot);
  Params& p = pr.p;
  run_truth(p, pr, slot);
  check_last("device gradients", true);
  return fetch_truth({p.ref_dq, p.ref_dk, p.ref_dv}, {p.dq_noise, p.dk_noise, p.dv_noise},
                     {p.dq_terms, p.dk_terms, p.dv_terms}, {pr.dq_n, pr.dk_n, pr.dv_n});
}

GradientResult simt_baseline(const DeviceCase& dc, const std::string& slot) {
  Prepared pr = prepare(dc, slot);
  Params& p = pr.p;
  run_baseline(p, pr, slot);
  check_last("device gradient baseline", true);
  return fetch_baseline({p.bdq, p.bdk, p.bdv}, {pr.dq_n, pr.dk_n, pr.dv_n});
}

}  // namespace

GradientResult device_gradients(const KernelCase& c, const CaseTensors& t, const std::string& slot) {
  return simt_truth(DeviceCase(c, t, slot + ".in"), slot);
}

GradientResult device_low_precision_gradients(const KernelCase& c, const CaseTensors& t, const std::string& slot) {
  return simt_baseline(DeviceCase(c, t, slot + ".in"), slot);
}

DeviceGradients device_gradients_and_baseline(const KernelCase& c, const CaseTensors& t, const std::string& slot) {
  const DeviceCase dc(c, t, slot + ".in");
  if (!tc_gradient_unsupported_reason(dc).empty())
    return {simt_truth(dc, slot + ".truth"), simt_baseline(dc, slot + ".baseline"), false};
  const TcArrays a = run_tensor_cores(dc, slot);
  check_last("device gradients (tensor cores)", true);
  return {fetch_truth(a.out.truth, a.out.noise, a.out.terms, a.n), fetch_baseline(a.out.baseline, a.n), true};
}

DeviceGradientReference device_reference_gradients(const DeviceCase& dc, const std::string& slot) {
  if (tc_gradient_unsupported_reason(dc).empty()) {
    const TcArrays a = run_tensor_cores(dc, slot);
    check_last("device gradient reference (tensor cores)");
    DeviceGradientReference r;
    for (int w = 0; w < 3; ++w) {
      r.truth[w] = a.out.truth[w];
      r.noise[w] = a.out.noise[w];
      r.terms[w] = a.out.terms[w];
      r.baseline[w] = a.out.baseline[w];
    }
    return r;
  }
  Prepared truth = prepare(dc, slot + ".truth");
  run_truth(truth.p, truth, slot + ".truth");
  Prepared base = prepare(dc, slot + ".base");
  run_baseline(base.p, base, slot + ".base");
  check_last("device gradient reference");
  DeviceGradientReference r;
  r.truth = {truth.p.ref_dq, truth.p.ref_dk, truth.p.ref_dv};
  r.noise = {truth.p.dq_noise, truth.p.dk_noise, truth.p.dv_noise};
  r.terms = {truth.p.dq_terms, truth.p.dk_terms, truth.p.dv_terms};
  r.baseline = {base.p.bdq, base.p.bdk, base.p.bdv};
  return r;
}

}  // namespace flashcheck::device
