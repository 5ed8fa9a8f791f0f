// The tensor-core reference and baseline (attention_tc.h). One block computes 64 query rows of one
// sequence and one head, flash-style over key tiles of 64 held in shared memory, with WMMA m16n16k16
// (fp32 accumulate) in the input dtype T (bf16 or fp16), in two passes over the keys:
//   pass 1: logits S = Q.K^T (reference), |Q|.|K|^T (the sensitivity S_j) and Q.K'^T with
//           K' = rd(K * scale) (the baseline's logits); per row the max and the sum of exponentials of
//           both the reference and the baseline.
//   pass 2: the same logits again (bit for bit: same data, same instructions), P from the final max and
//           sum, then P.V for the reference, the baseline and the sensitivity a_x.
// Why this is as accurate as the fp32 SIMT reference (docs/TOLERANCE.md, "The tensor-core reference"):
// - Q.K^T: q and k are exact in T, and a product of two T values (8 or 11 significant bits each) has at
//   most 22 significant bits, so every product is exact in fp32; only the accumulation rounds, as in the
//   fp32 dot of the SIMT kernel. Tensor cores add a k-step of 16 products and the accumulator with one
//   alignment and truncation (not round-to-nearest), so a k-step errs by at most ~2u of the magnitudes
//   involved: d/16 steps give at most (d/16) 2u S_j, below the λ √d u S_j that the bound grants.
// - P.V: V is exact in T, P is not. P' = P * kPScale is split into three T pieces hi + mid + lo
//   (hi = rd(P'), mid = rd(P' - hi), lo = rd(P' - hi - mid); each difference is exact in fp32), which hold
//   P' to 2^-25 relative in bf16 and exactly in fp16 (3 x 11 bits). Each piece times V is exact, so three
//   MMAs give sum_j P_j v_j with fp32 accumulation. For fp16, kPScale = 2^14 keeps the pieces of small
//   P normal (fp16's normal range starts at 2^-14); bf16 has fp32's exponent range and needs no scale.
//   A key tile's three MMAs per k-step go to a fresh accumulator that is added to the running sum with
//   IEEE round-to-nearest, so the truncation of the tensor cores costs at most ~24u a_x in all, and the
//   running sum over tiles errs like a sum of n/64 terms.
// - Sensitivity a_x = sum_j P_j |v_jx|: hi * |V| in one MMA (hi is P to 2^-9 relative, the accumulation
//   truncates by at most (n/16) 2u), inflated by (1 + 2^-7), which covers both for n <= 2^18 keys.
// - The baseline: K' is rounded exactly as the host baseline does (fp32 product, then rd), its products
//   with q are exact, its P = rd(softmax_fp32) is a T value: one MMA each, as the SIMT baseline computes.
#include "reference/device/attention_tc.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
#include "core/geometry.h"
#include "core/tolerance.h"
#include "reference/device/kv_address.cuh"

namespace flashcheck::device {
namespace {

using namespace nvcuda;

constexpr int kM = 64;          // query rows per block
constexpr int kN = 64;          // keys per tile
constexpr int kSLd = kN + 4;    // leading dimension of the fp32 logit tiles
constexpr int kPLd = kN + 8;    // leading dimension of the 16-bit P tiles
constexpr int kColsPerWarp = 64;  // output columns a warp owns in P.V (4 WMMA tiles)
constexpr int kMaxDim = 256;

template <class T>
struct Dt;
template <>
struct Dt<__nv_bfloat16> {
  static __device__ __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
  static __device__ float to(__nv_bfloat16 x) { return __bfloat162float(x); }
  static constexpr float kPScale = 1.0f;
};
template <>
struct Dt<__half> {
  static __device__ __half from(float x) { return __float2half_rn(x); }
  static __device__ float to(__half x) { return __half2float(x); }
  static constexpr float kPScale = 16384.0f;  // 2^14
};

struct TcParams {
  KvLayout kv;
  int B, H, group, warps, ldq, ldv;
  float scale, softcap;
  int win_left, win_right;
  EmptyRow empty_row;
  DeviceResult truth, base;
};

// Shared memory carve-up, the same on host (launch size) and device.
struct Smem {
  int q, k, v, s, p, rows, ptr, total;
};
__host__ __device__ inline int round_up(int x) { return (x + 127) / 128 * 128; }
__host__ __device__ inline Smem smem_layout(int d, int dv, int warps) {
  Smem L{};
  int at = 0;
  L.q = at; at = round_up(at + kM * (d + 8) * 2);
  L.k = at; at = round_up(at + kN * (d + 8) * 2);
  L.v = at; at = round_up(at + kN * (dv + 8) * 2);
  L.s = at; at = round_up(at + 3 * kM * kSLd * 4);  // also the per-warp staging of the results at the end
  L.p = at;
  const int p_bytes = 4 * kM * kPLd * 2, part_bytes = warps * 32 * 5 * 4;  // P tiles, or pass 1's partial stats
  at = round_up(at + (p_bytes > part_bytes ? p_bytes : part_bytes));
  L.rows = at; at = round_up(at + 8 * kM * 4);
  L.ptr = at; at = round_up(at + 2 * kN * 8);
  L.total = at;
  return L;
}

__device__ float nan_max(float a, float b) { return (a > b || isnan(a)) ? a : b; }

__device__ float round_dt_tc(DType t, float x) {
  if (t == DType::kBF16) return __bfloat162float(__float2bfloat16_rn(x));
  return __half2float(__float2half_rn(x));
}

// The reference logit from the accumulated dot, as the SIMT reference computes it.
__device__ float ref_logit(const TcParams& p, float dot) {
  float s = dot * p.scale;
  if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
  return s;
}
// The baseline logit from q.k' (k' = rd(k * scale)), with the baseline's roundings.
__device__ float base_logit(const TcParams& p, DType dt, float dot) {
  float s = round_dt_tc(dt, dot);
  if (p.softcap > 0.0f) s = round_dt_tc(dt, round_dt_tc(dt, tanhf(round_dt_tc(dt, s / p.softcap))) * p.softcap);
  return s;
}

// Combines (m, z) of a log-sum-exp: NaN propagates, -inf (no key yet) contributes nothing.
__device__ void lse_merge(float& m, float& z, float m2, float z2) {
  const float mn = nan_max(m, m2);
  if (mn == -INFINITY) return;
  const float a = m == -INFINITY ? 0.0f : z * expf(m - mn);
  const float b = m2 == -INFINITY ? 0.0f : z2 * expf(m2 - mn);
  m = mn;
  z = a + b;
}

// Converts `n` rows of `dim` floats (exact in T) at ptrs[r] into a T tile with leading dimension ld; rows
// r >= n become zeros, so that masked keys and missing query rows never bring garbage into an MMA.
template <class T>
__device__ void load_tile(T* dst, int ld, int dim, const float* const* ptrs, int n) {
  const int per_row = dim / 4;
  for (int idx = threadIdx.x; idx < kN * per_row; idx += blockDim.x) {
    const int r = idx / per_row, c4 = idx - r * per_row;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < n) v = reinterpret_cast<const float4*>(ptrs[r])[c4];
    T* o = dst + r * ld + 4 * c4;
    o[0] = Dt<T>::from(v.x);
    o[1] = Dt<T>::from(v.y);
    o[2] = Dt<T>::from(v.z);
    o[3] = Dt<T>::from(v.w);
  }
}

template <class T, int kThreads>
__global__ void __launch_bounds__(kThreads) tc_kernel(TcParams p, DType dt) {
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
  using FragBc = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
  using FragBr = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
  using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  extern __shared__ __align__(128) unsigned char smem[];
  const int d = p.kv.d, dv = p.kv.dv;
  const Smem L = smem_layout(d, dv, p.warps);
  T* qs = reinterpret_cast<T*>(smem + L.q);
  T* ks = reinterpret_cast<T*>(smem + L.k);
  T* vs = reinterpret_cast<T*>(smem + L.v);
  float* s_ref = reinterpret_cast<float*>(smem + L.s);
  float* s_abs = s_ref + kM * kSLd;
  float* s_base = s_abs + kM * kSLd;
  T* p_hi = reinterpret_cast<T*>(smem + L.p);
  T* p_mid = p_hi + kM * kPLd;
  T* p_lo = p_mid + kM * kPLd;
  T* p_b = p_lo + kM * kPLd;
  float* part = reinterpret_cast<float*>(smem + L.p);  // pass 1 only, before any P is written
  int* row_lo = reinterpret_cast<int*>(smem + L.rows);
  int* row_hi = row_lo + kM;
  float* row_m = reinterpret_cast<float*>(row_hi + kM);
  float* row_z = row_m + kM;
  float* row_mb = row_z + kM;
  float* row_zb = row_mb + kM;
  float* row_smax = row_zb + kM;
  const float** k_ptr = reinterpret_cast<const float**>(smem + L.ptr);
  const float** v_ptr = k_ptr + kN;

  // This block's sequence and first query row: the blocks of sequence b follow those of sequence b - 1.
  int b = -1, i0 = 0;
  for (int t = blockIdx.x, sq = 0; sq < p.B; ++sq) {
    const int tiles = (p.kv.in.seqs[sq].lq + kM - 1) / kM;
    if (t < tiles) {
      b = sq;
      i0 = t * kM;
      break;
    }
    t -= tiles;
  }
  if (b < 0) return;
  const DeviceSeq s = p.kv.in.seqs[b];
  const int h = blockIdx.y, kh = h / p.group;
  const int rows = min(kM, s.lq - i0);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const bool want_ref = p.truth.out != nullptr, want_base = p.base.out != nullptr;

  // Visible keys of each row: the rule of core/geometry.h (visible_keys), the SIMT kernels' locate().
  for (int r = tid; r < kM; r += blockDim.x) {
    int lo = 0, hi = 0;
    if (r < rows) {
      const int i = i0 + r;
      hi = s.lk;
      if (p.win_left >= 0 && i + s.off - p.win_left > lo) lo = i + s.off - p.win_left;
      if (p.win_right >= 0 && i + s.off + p.win_right + 1 < hi) hi = i + s.off + p.win_right + 1;
    }
    row_lo[r] = lo;
    row_hi[r] = hi;
  }
  if (tid < kM) k_ptr[tid] = tid < rows ? p.kv.in.q + (static_cast<long long>(s.q_start + i0 + tid) * p.H + h) * d : nullptr;
  __syncthreads();
  load_tile(qs, p.ldq, d, k_ptr, rows);
  int jlo = INT_MAX, jhi = 0;  // the union of the rows' visible keys
  for (int r = 0; r < rows; ++r)
    if (row_hi[r] > row_lo[r]) {
      jlo = min(jlo, row_lo[r]);
      jhi = max(jhi, row_hi[r]);
    }
  __syncthreads();

  const int ksteps = d / 16;
  const int tpr = blockDim.x / kM;  // threads per row in the element-wise stages
  const int my_row = tid / tpr, my_sub = tid % tpr;

  // Logits of the key tile at j0 into s_ref (and s_abs, s_base): 16 sub-tiles of 16 x 16 over the warps.
  auto logits = [&](bool with_abs) {
    for (int st = warp; st < 16; st += p.warps) {
      const int mr = st / 4, nc = st % 4;
      FragC acc, acc_abs, acc_b;
      wmma::fill_fragment(acc, 0.0f);
      wmma::fill_fragment(acc_abs, 0.0f);
      wmma::fill_fragment(acc_b, 0.0f);
      for (int kk = 0; kk < ksteps; ++kk) {
        FragA a;
        FragBc kb, kb2;
        wmma::load_matrix_sync(a, qs + mr * 16 * p.ldq + kk * 16, p.ldq);
        wmma::load_matrix_sync(kb, ks + nc * 16 * p.ldq + kk * 16, p.ldq);
        wmma::mma_sync(acc, a, kb, acc);
        // Element-wise maps of a fragment need no knowledge of its layout.
        for (int e = 0; e < kb2.num_elements; ++e) kb2.x[e] = Dt<T>::from(Dt<T>::to(kb.x[e]) * p.scale);
        wmma::mma_sync(acc_b, a, kb2, acc_b);
        if (with_abs) {
          for (int e = 0; e < a.num_elements; ++e) a.x[e] = Dt<T>::from(fabsf(Dt<T>::to(a.x[e])));
          for (int e = 0; e < kb.num_elements; ++e) kb.x[e] = Dt<T>::from(fabsf(Dt<T>::to(kb.x[e])));
          wmma::mma_sync(acc_abs, a, kb, acc_abs);
        }
      }
      wmma::store_matrix_sync(s_ref + mr * 16 * kSLd + nc * 16, acc, kSLd, wmma::mem_row_major);
      wmma::store_matrix_sync(s_base + mr * 16 * kSLd + nc * 16, acc_b, kSLd, wmma::mem_row_major);
      if (with_abs) wmma::store_matrix_sync(s_abs + mr * 16 * kSLd + nc * 16, acc_abs, kSLd, wmma::mem_row_major);
    }
  };
  // Row pointers of the keys of the tile at j0 (K, and V when asked), then the tiles themselves.
  auto load_keys = [&](int j0, bool with_v) {
    const int n = min(kN, jhi - j0);
    if (tid < n) {
      k_ptr[tid] = kv_row(p.kv, s, b, j0 + tid, kh, false);
      v_ptr[tid] = kv_row(p.kv, s, b, j0 + tid, kh, true);
    }
    __syncthreads();
    load_tile(ks, p.ldq, d, k_ptr, n);
    if (with_v) load_tile(vs, p.ldv, dv, v_ptr, n);
    __syncthreads();
  };

  // ---- Pass 1: per-row max and sum of exponentials, the reference's and the baseline's --------------
  float m = -INFINITY, z = 0.0f, mb = -INFINITY, zb = 0.0f, smax = 0.0f;
  const int lo_me = row_lo[my_row], hi_me = row_hi[my_row];
  for (int j0 = jlo; j0 < jhi; j0 += kN) {
    load_keys(j0, false);
    logits(true);
    __syncthreads();
    float tm = -INFINITY, tmb = -INFINITY;
    for (int c = my_sub; c < kN; c += tpr) {
      const int j = j0 + c;
      if (j < lo_me || j >= hi_me) continue;
      float* sr = s_ref + my_row * kSLd + c;
      float* sb = s_base + my_row * kSLd + c;
      *sr = ref_logit(p, *sr);  // in place: each element belongs to this thread alone
      *sb = base_logit(p, dt, *sb);
      tm = nan_max(tm, *sr);
      tmb = nan_max(tmb, *sb);
      smax = fmaxf(smax, tolerance::logit_magnitude(p.scale, s_abs[my_row * kSLd + c]));
    }
    float te = 0.0f, teb = 0.0f;
    const float mt = nan_max(m, tm), mtb = nan_max(mb, tmb);
    for (int c = my_sub; c < kN; c += tpr) {
      const int j = j0 + c;
      if (j < lo_me || j >= hi_me) continue;
      te += expf(s_ref[my_row * kSLd + c] - mt);
      teb += expf(s_base[my_row * kSLd + c] - mtb);
    }
    if (tm != -INFINITY || isnan(tm)) lse_merge(m, z, mt, te);
    if (tmb != -INFINITY || isnan(tmb)) lse_merge(mb, zb, mtb, teb);
    __syncthreads();
  }
  float* mine = part + tid * 5;
  mine[0] = m;
  mine[1] = z;
  mine[2] = mb;
  mine[3] = zb;
  mine[4] = smax;
  __syncthreads();
  if (tid < kM) {
    float rm = -INFINITY, rz = 0.0f, rmb = -INFINITY, rzb = 0.0f, rs = 0.0f;
    for (int t = tid * tpr; t < (tid + 1) * tpr; ++t) {
      const float* q = part + t * 5;
      lse_merge(rm, rz, q[0], q[1]);
      lse_merge(rmb, rzb, q[2], q[3]);
      rs = fmaxf(rs, q[4]);
    }
    row_m[tid] = rm;
    row_z[tid] = rz;
    row_mb[tid] = rmb;
    row_zb[tid] = rzb;
    row_smax[tid] = rs;
  }
  __syncthreads();

  // ---- Pass 2: P.V with P from the final statistics --------------------------------------------------
  const int mr = warp % 4, cg = warp / 4;  // this warp's 16 rows and 64 output columns
  FragC o_acc[4], ob_acc[4], a_acc[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    wmma::fill_fragment(o_acc[t], 0.0f);
    wmma::fill_fragment(ob_acc[t], 0.0f);
    wmma::fill_fragment(a_acc[t], 0.0f);
  }
  const float m_me = row_m[my_row], mb_me = row_mb[my_row], zb_me = row_zb[my_row];
  for (int j0 = jlo; j0 < jhi; j0 += kN) {
    load_keys(j0, true);
    logits(false);
    __syncthreads();
    for (int c = my_sub; c < kN; c += tpr) {
      const int j = j0 + c;
      const int at = my_row * kPLd + c;
      if (j < lo_me || j >= hi_me) {
        p_hi[at] = p_mid[at] = p_lo[at] = p_b[at] = Dt<T>::from(0.0f);
        continue;
      }
      // exp(s - m) * kPScale in three pieces; 1/Z is applied to the sums at the end, as the SIMT kernel does.
      const float e = expf(ref_logit(p, s_ref[my_row * kSLd + c]) - m_me) * Dt<T>::kPScale;
      const T hi = Dt<T>::from(e);
      const float r1 = e - Dt<T>::to(hi);
      const T mid = Dt<T>::from(r1);
      const T lo = Dt<T>::from(r1 - Dt<T>::to(mid));
      p_hi[at] = hi;
      p_mid[at] = mid;
      p_lo[at] = lo;
      p_b[at] = Dt<T>::from(expf(base_logit(p, dt, s_base[my_row * kSLd + c]) - mb_me) / zb_me);
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int col = cg * kColsPerWarp + t * 16;
      if (col >= dv) continue;
      FragC tile, tile_b;
      wmma::fill_fragment(tile, 0.0f);
      wmma::fill_fragment(tile_b, 0.0f);
      for (int kk = 0; kk < kN / 16; ++kk) {
        FragBr vb;
        FragA a;
        wmma::load_matrix_sync(vb, vs + kk * 16 * p.ldv + col, p.ldv);
        wmma::load_matrix_sync(a, p_hi + mr * 16 * kPLd + kk * 16, kPLd);
        wmma::mma_sync(tile, a, vb, tile);
        FragBr vabs;
        for (int e = 0; e < vb.num_elements; ++e) vabs.x[e] = Dt<T>::from(fabsf(Dt<T>::to(vb.x[e])));
        wmma::mma_sync(a_acc[t], a, vabs, a_acc[t]);
        wmma::load_matrix_sync(a, p_mid + mr * 16 * kPLd + kk * 16, kPLd);
        wmma::mma_sync(tile, a, vb, tile);
        wmma::load_matrix_sync(a, p_lo + mr * 16 * kPLd + kk * 16, kPLd);
        wmma::mma_sync(tile, a, vb, tile);
        wmma::load_matrix_sync(a, p_b + mr * 16 * kPLd + kk * 16, kPLd);
        wmma::mma_sync(tile_b, a, vb, tile_b);
      }
      // Round-to-nearest fp32 addition across tiles (see the head of this file); the baseline too, so that
      // its sum is an fp32 sum as the host baseline's, not one biased by n/16 truncations.
      for (int e = 0; e < tile.num_elements; ++e) {
        o_acc[t].x[e] += tile.x[e];
        ob_acc[t].x[e] += tile_b.x[e];
      }
    }
    __syncthreads();
  }

  // ---- Results ---------------------------------------------------------------------------------------
  // Each warp stages its 16 x 16 tiles in shared memory (the logit tiles are free now) to reach the
  // row and column of every value.
  float* stage = s_ref + warp * 3 * 256;
  const float inv_p = 1.0f / Dt<T>::kPScale;  // a power of two: exact
  const float d_f = static_cast<float>(d);
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int col = cg * kColsPerWarp + t * 16;
    if (col >= dv) continue;
    wmma::store_matrix_sync(stage, o_acc[t], 16, wmma::mem_row_major);
    wmma::store_matrix_sync(stage + 256, ob_acc[t], 16, wmma::mem_row_major);
    wmma::store_matrix_sync(stage + 512, a_acc[t], 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int r = mr * 16 + e / 16, x = col + e % 16;
      if (r >= rows || row_hi[r] <= row_lo[r]) continue;
      const long long at = (static_cast<long long>(s.q_start + i0 + r) * p.H + h) * dv + x;
      if (want_ref) {
        const float zr = row_z[r];
        const float o = stage[e] * inv_p / zr;
        const float a = stage[512 + e] * inv_p / zr * (1.0f + 0x1.0p-7f);
        const float ds = tolerance::logit_sensitivity(d_f, row_smax[r]);
        const float terms = tolerance::sum_sensitivity<float>(row_hi[r] - row_lo[r]);
        p.truth.out[at] = o;
        p.truth.noise[at] = tolerance::output_sensitivity(ds, terms, a, o);
      }
      if (want_base) p.base.out[at] = round_dt_tc(dt, stage[256 + e]);
    }
    __syncwarp();
  }
  for (int r = tid; r < rows; r += blockDim.x) {
    const long long cell = static_cast<long long>(s.q_start + i0 + r) * p.H + h;
    const bool empty = row_hi[r] <= row_lo[r];
    const float empty_lse = p.empty_row == EmptyRow::kNaN ? NAN : -INFINITY;
    if (want_ref) {
      p.truth.empty[cell] = empty ? 1 : 0;
      if (empty) {
        p.truth.lse[cell] = empty_lse;
        p.truth.lse_noise[cell] = 0.0f;
      } else {
        const float lz = logf(row_z[r]);
        p.truth.lse[cell] = row_m[r] + lz;
        const float ds = tolerance::logit_sensitivity(d_f, row_smax[r]);
        p.truth.lse_noise[cell] =
            tolerance::lse_sensitivity(ds, row_m[r], lz, tolerance::sum_sensitivity<float>(row_hi[r] - row_lo[r]));
      }
    }
    if (want_base) p.base.lse[cell] = empty ? empty_lse : row_mb[r] + logf(row_zb[r]);
  }
  // Empty rows by the convention (the SIMT kernels' write_empty): 0, NaN, or the mean of V over all keys.
  for (int idx = tid; idx < rows * dv; idx += blockDim.x) {
    const int r = idx / dv, x = idx - r * dv;
    if (row_hi[r] > row_lo[r]) continue;
    float val = 0.0f, spread = 0.0f;
    if (p.empty_row == EmptyRow::kNaN) {
      val = NAN;
    } else if (p.empty_row == EmptyRow::kUniform && s.lk > 0) {
      float sum = 0.0f, abs_sum = 0.0f;
      for (int j = 0; j < s.lk; ++j) {
        const float v = kv_row(p.kv, s, b, j, kh, true)[x];
        sum += v;
        abs_sum += fabsf(v);
      }
      val = sum / static_cast<float>(s.lk);
      spread = tolerance::uniform_mean_sensitivity(s.lk, abs_sum, val);
    }
    const long long at = (static_cast<long long>(s.q_start + i0 + r) * p.H + h) * dv + x;
    if (want_ref) {
      p.truth.out[at] = val;
      p.truth.noise[at] = spread;
    }
    if (want_base) p.base.out[at] = round_dt_tc(dt, val);
  }
}

template <class T, int kThreads>
void launch(const TcParams& p, DType dt, unsigned grid_x, unsigned grid_y) {
  const int bytes = smem_layout(p.kv.d, p.kv.dv, p.warps).total;
  // The cap is the function's, for the whole process: set once, to the largest case's layout or the device's
  // limit if that is lower (an A100 has 163 KB). Set per launch to the case's own size, threads with cases in
  // flight lowered it under one another's launches (cudaErrorLaunchOutOfResources under bench --in-flight, H200,
  // 2026-12-01).
  static const int cap = [] {
    int device = 0, limit = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
    const int most = std::min(limit, smem_layout(kMaxDim, kMaxDim, 4 * (kMaxDim / kColsPerWarp)).total);
    check(cudaFuncSetAttribute(tc_kernel<T, kThreads>, cudaFuncAttributeMaxDynamicSharedMemorySize, most),
          "tensor-core reference: shared memory size");
    return most;
  }();
  if (bytes > cap)
    throw std::runtime_error("tensor-core reference: the case needs " + std::to_string(bytes) +
                             " bytes of shared memory, the device allows " + std::to_string(cap));
  tc_kernel<T, kThreads><<<dim3(grid_x, grid_y), 32 * p.warps, bytes, harness_stream()>>>(p, dt);
}

}  // namespace

std::string tc_unsupported_reason(const DeviceCase& dc) {
  const char* env = std::getenv("FLASHCHECK_REFERENCE");
  if (env && std::strcmp(env, "simt") == 0) return "FLASHCHECK_REFERENCE=simt";
  const KernelCase& c = dc.kcase();
  if (c.dtype == DType::kF32) return "fp32 inputs: their products are not exact in a 16-bit tensor-core multiply";
  // The device-reference property on the H200 (10,000 cases, 2026-12-01) failed 41 fp16 cases and no bf16 one:
  // P's pieces in fp16 leave its range below 2^-24 (after the 2^14 scale), so weights under about 1e-12 are lost
  // or rounded coarsely, and outputs made only of such weights come out 0 or a few 1e-4 off in relative terms.
  // fp16 V is exactly a sum of two bf16 values; until P.V is done that way, fp16 stays on the SIMT kernels.
  if (c.dtype == DType::kF16) return "fp16 inputs: P's pieces in fp16 lose weights below its range (SIMT until V is split into bf16)";
  if (c.head_dim % 16 != 0 || c.v_head_dim % 16 != 0) return "head dims must be multiples of 16 (the WMMA tile)";
  if (c.head_dim > kMaxDim || c.v_head_dim > kMaxDim) return "head dims above 256 do not fit the shared-memory tiles";
  if (!dc.finite_inputs()) return "inputs with infinite or huge values (P's pieces times inf give NaN, fp32 gives inf)";
  return "";
}

void tc_reference_and_baseline(const DeviceCase& dc, EmptyRow empty_row, const DeviceResult& truth,
                               const DeviceResult& base) {
  const KernelCase& c = dc.kcase();
  const CaseGeometry& g = dc.geometry();
  const MaskRule rule = mask_rule(c);
  TcParams p{};
  p.kv = KvLayout{dc.inputs(), static_cast<int>(c.paging.page_size), static_cast<int>(c.kv_heads),
                  static_cast<int>(c.head_dim), static_cast<int>(c.v_head_dim), c.kv_cache,
                  c.kv_storage == KvStorage::kPaged};
  p.B = static_cast<int>(c.seqs.size());
  p.H = static_cast<int>(c.heads);
  p.group = static_cast<int>(c.group());
  p.warps = 4 * ((p.kv.dv + kColsPerWarp - 1) / kColsPerWarp);
  p.ldq = p.kv.d + 8;
  p.ldv = p.kv.dv + 8;
  p.scale = static_cast<float>(c.softmax_scale());
  p.softcap = static_cast<float>(c.softcap);
  p.win_left = static_cast<int>(rule.left);
  p.win_right = static_cast<int>(rule.right);
  p.empty_row = empty_row;
  p.truth = truth;
  p.base = base;
  long long blocks = 0;
  for (const SeqGeometry& s : g.seqs) blocks += (s.lq + kM - 1) / kM;
  if (blocks == 0 || c.heads == 0) return;
  if (blocks > INT_MAX || c.heads > 65535) throw std::invalid_argument("tensor-core reference: grid too large");
  const auto gx = static_cast<unsigned>(blocks), gy = static_cast<unsigned>(c.heads);
  const bool wide = p.warps > 8;  // dv > 128: up to 16 warps, at most 128 registers each
  if (c.dtype == DType::kBF16) {
    if (wide) launch<__nv_bfloat16, 512>(p, c.dtype, gx, gy);
    else launch<__nv_bfloat16, 256>(p, c.dtype, gx, gy);
  } else {
    if (wide) launch<__half, 512>(p, c.dtype, gx, gy);
    else launch<__half, 256>(p, c.dtype, gx, gy);
  }
  check_last("tensor-core reference");
}

}  // namespace flashcheck::device
