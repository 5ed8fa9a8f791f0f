// The tensor-core reference and baseline (attention_tc.h) of a bf16 (or fp16) case. It is a flash-attention-2 style
// kernel, with the logits and P in registers: mma.sync m16n8k16 (16-bit in, fp32 accumulate), operands
// through ldmatrix, key tiles double-buffered by cp.async. A block holds 64 query rows of one sequence and
// one head, 16 rows per warp, and walks key tiles of 64 in three passes:
//   pass 1: S = Q.K^T (reference), |Q|.|K|^T (the sensitivity S_j), Q.K'^T with K' = rd(K * scale) (the
//           baseline's logits); per row the max of the reference's logits, and the max and sum of exponentials of
//           the baseline's (of the reference's too where pass 2 does not run).
//   pass 2: S again (bit for bit: same data, same instructions), P = exp(s - m) split into three bf16
//           pieces, P.V and P_hi.|V| (the sensitivity a_x), in column chunks of 64; Z = sum P in the first chunk.
//   pass 3: the baseline's logits again and its P = rd(exp(s - m) * rd(1/Z)) times V, in chunks of W <= 128.
// Passes 2 and 3 are apart because their accumulators would not fit one thread's registers together.
// A first launch copies the case's Q, K, K' and V into arrays of the dtype, key rows sequence by sequence
// (cache, pages and appended keys resolved once), so that tiles are plain 16-byte copies.
//
// Why this is as accurate as the fp32 SIMT reference (docs/TOLERANCE.md, "The tensor-core reference"):
// - Q.K^T: q and k are exact in bf16, a product of two bf16 values (8 significant bits each) is exact in
//   fp32, and only the accumulation rounds. A k-step of 16 products is added to the accumulator with one
//   alignment and truncation: d/16 steps err by at most (d/16) 2u S_j, below the lambda √d u S_j that the
//   bound grants.
// - P.V: P is split into hi + mid + lo (hi = rd(P), mid = rd(P - hi), lo = rd(P - hi - mid), each
//   difference exact in fp32), which hold P to 2^-25 relative; each piece times V is exact. Each piece's 4
//   MMAs of a key tile (one per k-step) go to a fresh accumulator of their own, the three are added (lo and
//   mid first) and joined to the running sum with IEEE round-to-nearest: truncation costs at most ~10u a_x
//   in all (8u in hi's chain, 2u in the additions), and the running sum errs like a sum of
//   n/64 terms.
// - Z = sum_j P_j of the very weights that P.V takes: each lane adds its 16 of a tile in a fresh sum, joined to the
//   running sum in round-to-nearest, then the quad's four sums are added: like P.V's, a sum of n/64 tile shares.
// - a_x = sum_j P_j |v_jx| from hi.|V| in one chained accumulator (hi is P to 2^-9 relative, the chain
//   truncates by at most (n/16) 2u), inflated by (1 + 2^-7): covers both for n <= 2^18 keys.
// - The baseline: K' is rounded as the host baseline rounds it (fp32 product, then rd), its products with
//   q are exact, its P is a bf16 value: one MMA each, summed per tile like the reference.
// - fp16 (T = f16): the products of two fp16 values (11 significant bits each) are exact in fp32 too, so S,
//   |Q|.|K|^T and the baseline's P.V (its P an fp16 value) take fp16 MMAs. P's pieces stay bf16, since fp16's
//   range loses tiny weights (tc_unsupported_reason), and V meets them as two exact bf16 pieces (tc_mma.cuh
//   split_f16x2): six MMAs per k-step instead of three.
//   a_x takes V's hi piece (2^-9 relative): with P's hi piece and the truncation, 3 2^-9 < 2^-7.
#include "reference/device/attention_tc.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
#include "core/geometry.h"
#include "core/tolerance.h"
#include "reference/device/kv_address.cuh"
#include "reference/device/tc_mma.cuh"

namespace flashcheck::device {
namespace {

using namespace tc;  // NOLINT: the building blocks are this file's vocabulary

constexpr int kMaxDim = 256;
static_assert(kMaxDim <= kMaxCols, "the tile loader copies rows of every head dim taken");

struct TcParams {
  KvLayout kv;  // the fp32 inputs: the empty-row conventions read V there
  // Copies in the case's dtype (bf16 or fp16: the kernel's T).
  const void* q;   // (total_q, H, d), as the fp32 Q
  const void* k;   // (total_k, Hk, d): the keys of sequence 0, then of sequence 1, ...
  const void* ks;  // rd(k * scale), the same layout
  const void* v;   // (total_k, Hk, dv)
  int B, H, group;
  float scale, softcap;
  int win_left, win_right;
  EmptyRow empty_row;
  DeviceResult truth, base;
  TcRowStats* stats;  // optional: pass 1's figures per (row, head), for the gradient reference
};

// Shared memory: the block's Q rows, then two stages of two key-tile slots (K and K', K and V, K' and V).
__host__ __device__ inline int slot_ld(int d, int dv, int w) {
  const int cols = dv < w ? dv : w;
  return (d > cols ? d : cols) + kPad;
}
__host__ __device__ inline int smem_bytes(int d, int dv, int w) {
  return 2 * (kM * (d + kPad) + 4 * kN * slot_ld(d, dv, w));
}

// ---- The arithmetic of the SIMT kernels ------------------------------------------------------------
// kSoftcap is a template parameter: tanhf inlined at every logit of the unrolled tiles would double the
// kernel's code, and on the H200 the first version of this kernel stalled most of its cycles on instruction
// fetch (ncu: stall_no_inst 58 %, 18,152 instructions). __fmul_rn: never contracted into the subtraction that
// follows, so passes 1 and 2 compute the same logit.
template <bool kSoftcap>
__device__ inline float ref_logit(const TcParams& p, float scale, float dot) {
  float s = __fmul_rn(dot, scale);
  if (kSoftcap) s = p.softcap * tanhf(s / p.softcap);
  return s;
}
template <class T, bool kSoftcap>
__device__ inline float base_logit(const TcParams& p, float dot) {
  float s = rd_t<T>(dot);
  if (kSoftcap) s = rd_t<T>(rd_t<T>(tanhf(rd_t<T>(s / p.softcap))) * p.softcap);
  return s;
}
// Pass 1's three products in one sweep: the same chains as qk for S and for the baseline's logits.
template <class T>
__device__ void qk3(float (&s)[8][4], float (&sa)[8][4], float (&sb)[8][4], const T* qw, int ld_q,
                    const T* kt, const T* kst, int ld, int d, int lane) {
  zero(s);
  zero(sa);
  zero(sb);
  for (int k0 = 0; k0 < d; k0 += 16) {
    unsigned a[4], aa[4];
    ldsm_x4(a, qw + (lane % 16) * ld_q + k0 + (lane / 16) * 8);
#pragma unroll
    for (int i = 0; i < 4; ++i) aa[i] = a[i] & kAbsMask;
#pragma unroll
    for (int pr = 0; pr < 4; ++pr) {
      unsigned b[4], bs[4];
      const int at = (pr * 16 + lane % 8 + (lane / 16) * 8) * ld + k0 + ((lane / 8) % 2) * 8;
      ldsm_x4(b, kt + at);
      ldsm_x4(bs, kst + at);
      mma_t<T>(s[2 * pr], a, b[0], b[1]);
      mma_t<T>(s[2 * pr + 1], a, b[2], b[3]);
      mma_t<T>(sa[2 * pr], aa, b[0] & kAbsMask, b[1] & kAbsMask);
      mma_t<T>(sa[2 * pr + 1], aa, b[2] & kAbsMask, b[3] & kAbsMask);
      mma_t<T>(sb[2 * pr], a, bs[0], bs[1]);
      mma_t<T>(sb[2 * pr + 1], a, bs[2], bs[3]);
    }
  }
}

// What one block works on.
struct Block {
  DeviceSeq s;
  int b, i0, koff, rows, h, kh;
};

__device__ inline void row_range(const TcParams& p, const Block& bk, int r, int& lo, int& hi) {
  lo = 0;
  hi = 0;
  if (r >= bk.rows) return;
  const int i = bk.i0 + r;
  hi = bk.s.lk;
  if (p.win_left >= 0 && i + bk.s.off - p.win_left > lo) lo = i + bk.s.off - p.win_left;
  if (p.win_right >= 0 && i + bk.s.off + p.win_right + 1 < hi) hi = i + bk.s.off + p.win_right + 1;
}


template <int W, bool kSoftcap, class T>
__global__ void __launch_bounds__(kThreads, 2) tc_kernel(TcParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int d = p.kv.d, dv = p.kv.dv, Hk = p.kv.Hk;
  const int ld_q = d + kPad, ld = slot_ld(d, dv, W);
  T* qs = reinterpret_cast<T*>(smem);
  T* slots = qs + kM * ld_q;
  auto slot = [&](int stage, int which) { return slots + (stage * 2 + which) * kN * ld; };

  // This block's sequence and first query row: the blocks of sequence b follow those of sequence b - 1, in reverse
  // order of blockIdx.x, so that under a causal mask the longest blocks start first and the shortest fill the tail
  // (the device starts blocks in the order of x, then y).
  Block bk{};
  bk.b = -1;
  for (int t = gridDim.x - 1 - blockIdx.x, sq = 0, koff = 0; sq < p.B; ++sq) {
    const DeviceSeq s = p.kv.in.seqs[sq];
    const int tiles = (s.lq + kM - 1) / kM;
    if (t < tiles) {
      bk.s = s;
      bk.b = sq;
      bk.i0 = t * kM;
      bk.koff = koff;
      break;
    }
    t -= tiles;
    koff += s.lk;
  }
  if (bk.b < 0) return;
  bk.rows = min(kM, bk.s.lq - bk.i0);
  bk.h = blockIdx.y;
  bk.kh = bk.h / p.group;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
  const bool want_ref = p.truth.out != nullptr, want_base = p.base.out != nullptr;
  const float scale = in_register(p.scale);

  // The union of the visible keys of the block's rows, and of this warp's rows; and the keys that every row of the
  // warp sees, [flo, fhi): a tile inside them needs no mask.
  int jlo = INT_MAX, jhi = 0, wlo = INT_MAX, whi = 0, flo = 0, fhi = warp * 16 + 16 <= bk.rows ? INT_MAX : 0;
  for (int r = 0; r < bk.rows; ++r) {
    int lo, hi;
    row_range(p, bk, r, lo, hi);
    if (r / 16 == warp) {
      flo = max(flo, lo);
      fhi = min(fhi, hi);
    }
    if (hi <= lo) continue;
    jlo = min(jlo, lo);
    jhi = max(jhi, hi);
    if (r / 16 == warp) {
      wlo = min(wlo, lo);
      whi = max(whi, hi);
    }
  }
  // This lane's two rows (g and g + 8 of the warp's 16) and their visible keys.
  int lo[2], hi[2];
  for (int rr = 0; rr < 2; ++rr) row_range(p, bk, warp * 16 + g + rr * 8, lo[rr], hi[rr]);

  const long long q_row0 = static_cast<long long>(bk.s.q_start) + bk.i0;
  load_rows(qs, ld_q, static_cast<const T*>(p.q) + (q_row0 * p.H + bk.h) * d, static_cast<long long>(p.H) * d, 0, bk.rows, d);
  cp_async_commit();
  if (jlo >= jhi) cp_async_wait_all();  // no pass waits for Q then
  const T* qw = qs + warp * 16 * ld_q;
  const long long k_stride = static_cast<long long>(Hk) * d, v_stride = static_cast<long long>(Hk) * dv;
  const T* k_base = static_cast<const T*>(p.k) + (static_cast<long long>(bk.koff) * Hk + bk.kh) * d;
  const T* ks_base = static_cast<const T*>(p.ks) + (static_cast<long long>(bk.koff) * Hk + bk.kh) * d;
  const T* v_base = static_cast<const T*>(p.v) + (static_cast<long long>(bk.koff) * Hk + bk.kh) * dv;
  auto warp_sees = [&](int j0) { return j0 < whi && j0 + kN > wlo; };
  auto visible = [&](int j0, int nt, int e) {
    const int j = j0 + nt * 8 + 2 * t4 + (e & 1), rr = e >> 1;
    return j >= lo[rr] && j < hi[rr];
  };
  // The element-wise stages of a tile, work(full), are compiled twice: with full a std::true_type for the tiles that
  // every row of the warp sees whole (all but the diagonal tiles of a causal mask, the edges of a window), where
  // `full || visible(..)` is the constant true and the mask's comparisons and selects vanish, and with
  // std::false_type for the rest. Both compute each visible element with the same instructions.
  auto by_tile = [&](int j0, auto work) {
    if (j0 >= flo && j0 + kN <= fhi) work(std::true_type{});
    else work(std::false_type{});
  };

  // ---- Pass 1: per-row max and sum of exponentials, the reference's and the baseline's --------------
  float m[2] = {-INFINITY, -INFINITY}, z[2] = {0.0f, 0.0f}, mb[2] = {-INFINITY, -INFINITY}, zb[2] = {0.0f, 0.0f};
  // The rows' largest |q|.|k| of a visible key; times |scale| once at the end, which is the largest S_j, bit for bit,
  // since rounding a product with a constant is monotone.
  float smax[2] = {0.0f, 0.0f};
  sweep(
      jlo, jhi,
      [&](int st, int j0) {
        load_rows(slot(st, 0), ld, k_base, k_stride, j0, jhi, d);
        load_rows(slot(st, 1), ld, ks_base, k_stride, j0, jhi, d);
      },
      [&](int st, int j0) {
        if (!warp_sees(j0)) return;
        float s[8][4], sa[8][4], sb[8][4];
        qk3(s, sa, sb, qw, ld_q, slot(st, 0), slot(st, 1), ld, d, lane);
        by_tile(j0, [&](auto full) {
          // Element-wise stages select instead of branching, so that the 32 elements of a lane interleave.
          float tm[2] = {-INFINITY, -INFINITY}, tmb[2] = {-INFINITY, -INFINITY};
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const bool in = full || visible(j0, nt, e);
              const int rr = e >> 1;
              s[nt][e] = in ? ref_logit<kSoftcap>(p, scale, s[nt][e]) : -INFINITY;
              sb[nt][e] = in ? base_logit<T, kSoftcap>(p, sb[nt][e]) : -INFINITY;
              tm[rr] = nan_max(tm[rr], s[nt][e]);
              tmb[rr] = nan_max(tmb[rr], sb[nt][e]);
              smax[rr] = fmaxf(smax[rr], in ? sa[nt][e] : 0.0f);
            }
          float mt[2], mtb[2], te[2] = {0.0f, 0.0f}, teb[2] = {0.0f, 0.0f};
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            mt[rr] = nan_max(m[rr], tm[rr]);
            mtb[rr] = nan_max(mb[rr], tmb[rr]);
          }
          // Masked: exp(-inf) = 0, also where the row has no key (mt = -inf). The reference's sum is pass 2's where
          // that pass runs: there each weight is taken against the row's final max, once.
          if (!want_ref) {
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                te[e >> 1] += expf(full || visible(j0, nt, e) ? s[nt][e] - mt[e >> 1] : -INFINITY);
          }
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              teb[e >> 1] += expf(full || visible(j0, nt, e) ? sb[nt][e] - mtb[e >> 1] : -INFINITY);
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            if (want_ref) m[rr] = mt[rr];
            else if (tm[rr] != -INFINITY || isnan(tm[rr])) lse_merge(m[rr], z[rr], mt[rr], te[rr]);
            if (tmb[rr] != -INFINITY || isnan(tmb[rr])) lse_merge(mb[rr], zb[rr], mtb[rr], teb[rr]);
          }
        });
      });
  // The four lanes of a quad hold one row's keys 4c + t: merge them; each lane keeps the row's figures.
  for (int rr = 0; rr < 2; ++rr) {
    quad_merge(m[rr], z[rr]);
    quad_merge(mb[rr], zb[rr]);
    smax[rr] = fmaxf(smax[rr], __shfl_xor_sync(0xffffffffu, smax[rr], 1));
    smax[rr] = fmaxf(smax[rr], __shfl_xor_sync(0xffffffffu, smax[rr], 2));
  }
  const float d_f = static_cast<float>(d);
  const float empty_lse = p.empty_row == EmptyRow::kNaN ? NAN : -INFINITY;
  float ds[2], terms[2];
  for (int rr = 0; rr < 2; ++rr) {
    ds[rr] = tolerance::logit_sensitivity(d_f, tolerance::logit_magnitude(scale, smax[rr]));
    terms[rr] = tolerance::sum_sensitivity<float>(hi[rr] - lo[rr]);
    const int r = warp * 16 + g + rr * 8;
    if (t4 != 0 || r >= bk.rows) continue;
    const long long cell = (q_row0 + r) * p.H + bk.h;
    if (want_base) p.base.lse[cell] = hi[rr] <= lo[rr] ? empty_lse : mb[rr] + logf(zb[rr]);
  }
  // The figures that need the reference's sum z: after pass 1, or after pass 2's first sweep where it runs.
  auto write_rows = [&] {
    for (int rr = 0; rr < 2; ++rr) {
      const int r = warp * 16 + g + rr * 8;
      if (t4 != 0 || r >= bk.rows) continue;
      const long long cell = (q_row0 + r) * p.H + bk.h;
      const bool empty = hi[rr] <= lo[rr];
      if (want_ref) {
        p.truth.empty[cell] = empty ? 1 : 0;
        if (empty) {
          p.truth.lse[cell] = empty_lse;
          p.truth.lse_noise[cell] = 0.0f;
        } else {
          const float lz = logf(z[rr]);
          p.truth.lse[cell] = m[rr] + lz;
          p.truth.lse_noise[cell] = tolerance::lse_sensitivity(ds[rr], m[rr], lz, terms[rr]);
        }
      }
      if (p.stats) p.stats[cell] = TcRowStats{m[rr], z[rr], ds[rr], mb[rr], zb[rr]};
    }
  };
  if (!want_ref) write_rows();

  // ---- Pass 2: the reference's P.V and the sensitivity, 64 output columns at a time --------------------
  // (128 with the three pieces of P held for the tile would need more than a thread's 255 registers.)
  constexpr int W2 = 64;
  for (int c0 = 0; want_ref && c0 < dv; c0 += W2) {
    const int cols = min(W2, dv - c0);
    float o[W2 / 8][4], a_acc[W2 / 8][4], zs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < W2 / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = a_acc[n][e] = 0.0f;
    sweep(
        jlo, jhi,
        [&](int st, int j0) {
          load_rows(slot(st, 0), ld, k_base, k_stride, j0, jhi, d);
          load_rows(slot(st, 1), ld, v_base + c0, v_stride, j0, jhi, cols);
        },
        [&](int st, int j0) {
          if (!warp_sees(j0)) return;
          float s[8][4];
          qk(s, qw, ld_q, slot(st, 0), ld, d, lane);
          // P in three pieces, as the A operands of the four k-steps of the tile.
          unsigned ph[4][4], pm[4][4], pl[4][4];
          float tz[2] = {0.0f, 0.0f};  // the tile's share of Z, joined to the running sum as P.V's is
          by_tile(j0, [&](auto full) {
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
              for (int rr = 0; rr < 2; ++rr) {
                float x[2];
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                  const int e = 2 * rr + c;
                  // 1/Z is applied to the sums at the end, as the SIMT kernel does; masked: exp(-inf) = 0.
                  x[c] = expf(full || visible(j0, nt, e) ? ref_logit<kSoftcap>(p, scale, s[nt][e]) - m[rr] : -INFINITY);
                }
                tz[rr] += x[0];
                tz[rr] += x[1];
                const Split3 pieces = split3(x[0], x[1]);
                const int kk = nt / 2, at = (nt % 2) * 2 + rr;
                ph[kk][at] = pieces.hi;
                pm[kk][at] = pieces.mid;
                pl[kk][at] = pieces.lo;
              }
          });
          zs[0] += tz[0];
          zs[1] += tz[1];
          const T* vt = slot(st, 1);
#pragma unroll
          for (int cp = 0; cp < W2 / 16; ++cp) {
            if (cp * 16 >= cols) continue;
            float t0[3][4] = {}, t1[3][4] = {};
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
              unsigned v[4];
              load_v(v, vt, ld, kk, cp, lane);
              // P's pieces are bf16 (fp16's range loses tiny weights, tc_unsupported_reason); v is its hi piece after.
              mma_pieces<T>(t0, t1, ph[kk], pm[kk], pl[kk], v);
              mma(a_acc[2 * cp], ph[kk], v[0] & kAbsMask, v[1] & kAbsMask);
              mma(a_acc[2 * cp + 1], ph[kk], v[2] & kAbsMask, v[3] & kAbsMask);
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // round-to-nearest across tiles (the head of this file)
              o[2 * cp][e] += (t0[2][e] + t0[1][e]) + t0[0][e];
              o[2 * cp + 1][e] += (t1[2][e] + t1[1][e]) + t1[0][e];
            }
          }
        });
    if (c0 == 0) {  // every sweep computes the same weights: the first one's sum serves
      for (int rr = 0; rr < 2; ++rr) {  // the quad's lanes hold one row's keys; each ends with the same bits
        zs[rr] += __shfl_xor_sync(0xffffffffu, zs[rr], 1);
        zs[rr] += __shfl_xor_sync(0xffffffffu, zs[rr], 2);
        z[rr] = zs[rr];
      }
      write_rows();
    }
#pragma unroll
    for (int nt = 0; nt < W2 / 8; ++nt) {
      const int x = c0 + nt * 8 + 2 * t4;
      if (nt * 8 >= cols) continue;
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = warp * 16 + g + rr * 8;
        if (r >= bk.rows || hi[rr] <= lo[rr]) continue;
        const long long at = ((q_row0 + r) * p.H + bk.h) * dv + x;
        float2 out, noise;
        out.x = o[nt][2 * rr] / z[rr];
        out.y = o[nt][2 * rr + 1] / z[rr];
        const float ax = a_acc[nt][2 * rr] / z[rr] * (1.0f + 0x1.0p-7f);
        const float ay = a_acc[nt][2 * rr + 1] / z[rr] * (1.0f + 0x1.0p-7f);
        noise.x = tolerance::output_sensitivity(ds[rr], terms[rr], ax, out.x);
        noise.y = tolerance::output_sensitivity(ds[rr], terms[rr], ay, out.y);
        *reinterpret_cast<float2*>(p.truth.out + at) = out;
        *reinterpret_cast<float2*>(p.truth.noise + at) = noise;
      }
    }
  }

  // ---- Pass 3: the baseline's P.V --------------------------------------------------------------------
  for (int c0 = 0; want_base && c0 < dv; c0 += W) {
    const int cols = min(W, dv - c0);
    float ob[W / 8][4];
#pragma unroll
    for (int n = 0; n < W / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) ob[n][e] = 0.0f;
    sweep(
        jlo, jhi,
        [&](int st, int j0) {
          load_rows(slot(st, 0), ld, ks_base, k_stride, j0, jhi, d);
          load_rows(slot(st, 1), ld, v_base + c0, v_stride, j0, jhi, cols);
        },
        [&](int st, int j0) {
          if (!warp_sees(j0)) return;
          float s[8][4];
          qk(s, qw, ld_q, slot(st, 0), ld, d, lane);
          unsigned pb[4][4];
          const float inv_zb[2] = {1.0f / zb[0], 1.0f / zb[1]};
          by_tile(j0, [&](auto full) {
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
              for (int rr = 0; rr < 2; ++rr) {
                float w2[2];
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                  const int e = 2 * rr + c;
                  // e * rd(1/Z), not e / Z: within two ulps of fp32 before the rounding to the dtype, and without the
                  // division's branch to its slow path at each of the 32 elements.
                  const float w = expf(base_logit<T, kSoftcap>(p, s[nt][e]) - mb[rr]) * inv_zb[rr];
                  w2[c] = full || visible(j0, nt, e) ? w : 0.0f;
                }
                pb[nt / 2][(nt % 2) * 2 + rr] = pack_t<T>(w2[0], w2[1]);  // the baseline's P, rounded to the dtype
              }
          });
          const T* vt = slot(st, 1);
#pragma unroll
          for (int cp = 0; cp < W / 16; ++cp) {
            if (cp * 16 >= cols) continue;
            float t0[2][4] = {}, t1[2][4] = {};  // even and odd k-steps: two chains whose latencies overlap
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
              unsigned v[4];
              load_v(v, vt, ld, kk, cp, lane);
              mma_t<T>(t0[kk % 2], pb[kk], v[0], v[1]);
              mma_t<T>(t1[kk % 2], pb[kk], v[2], v[3]);
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // an fp32 sum across tiles, as the host baseline's
              ob[2 * cp][e] += t0[0][e] + t0[1][e];
              ob[2 * cp + 1][e] += t1[0][e] + t1[1][e];
            }
          }
        });
#pragma unroll
    for (int nt = 0; nt < W / 8; ++nt) {
      const int x = c0 + nt * 8 + 2 * t4;
      if (nt * 8 >= cols) continue;
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = warp * 16 + g + rr * 8;
        if (r >= bk.rows || hi[rr] <= lo[rr]) continue;
        const long long at = ((q_row0 + r) * p.H + bk.h) * dv + x;
        *reinterpret_cast<float2*>(p.base.out + at) = make_float2(rd_t<T>(ob[nt][2 * rr]), rd_t<T>(ob[nt][2 * rr + 1]));
      }
    }
  }

  // ---- Empty rows by the convention (the SIMT kernels' write_empty): 0, NaN, or the mean of V -----------
  // A warp per row: the rows are tested once each, not once per output element (with a division each, 3.5 % of the
  // kernel's time at L 2048 in Nsight Compute, H100, 2026-12-07).
  for (int r = warp; r < bk.rows; r += kWarps) {
    int rlo, rhi;
    row_range(p, bk, r, rlo, rhi);
    if (rhi > rlo) continue;
    for (int x = lane; x < dv; x += 32) {
      float val = 0.0f, spread = 0.0f;
      if (p.empty_row == EmptyRow::kNaN) {
        val = NAN;
      } else if (p.empty_row == EmptyRow::kUniform && bk.s.lk > 0) {
        float sum = 0.0f, abs_sum = 0.0f;
        for (int j = 0; j < bk.s.lk; ++j) {
          const float v = kv_row(p.kv, bk.s, bk.b, j, bk.kh, true)[x];
          sum += v;
          abs_sum += fabsf(v);
        }
        val = sum / static_cast<float>(bk.s.lk);
        spread = tolerance::uniform_mean_sensitivity(bk.s.lk, abs_sum, val);
      }
      const long long at = ((q_row0 + r) * p.H + bk.h) * dv + x;
      if (want_ref) {
        p.truth.out[at] = val;
        p.truth.noise[at] = spread;
      }
      if (want_base) p.base.out[at] = rd_t<T>(val);
    }
  }
}

// ---- The bf16 copies -------------------------------------------------------------------------------
struct PrepParams {
  KvLayout kv;
  int B;
  long long q_elems;
  float scale;
  void *q, *k, *ks, *v;  // in the dtype
};

// 8 floats (exact in T, 32-byte aligned) to 8 T values, times `mul` before the rounding.
template <class T>
__device__ inline void to_x8(void* dst, const float* src, float mul) {
  const float4 a = reinterpret_cast<const float4*>(src)[0], b = reinterpret_cast<const float4*>(src)[1];
  uint4 o;
  o.x = pack_t<T>(a.x * mul, a.y * mul);
  o.y = pack_t<T>(a.z * mul, a.w * mul);
  o.z = pack_t<T>(b.x * mul, b.y * mul);
  o.w = pack_t<T>(b.z * mul, b.w * mul);
  *reinterpret_cast<uint4*>(dst) = o;
}

// blockIdx.y < B: the keys of sequence blockIdx.y; blockIdx.y == B: Q.
template <class T>
__global__ void prep_kernel(PrepParams p) {
  T* const q = static_cast<T*>(p.q);
  T* const k = static_cast<T*>(p.k);
  T* const ks = static_cast<T*>(p.ks);
  T* const v = static_cast<T*>(p.v);
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int b = blockIdx.y;
  if (b == p.B) {
    for (long long i = first; i < p.q_elems / 8; i += step) to_x8<T>(q + i * 8, p.kv.in.q + i * 8, 1.0f);
    return;
  }
  int koff = 0;
  for (int sq = 0; sq < b; ++sq) koff += p.kv.in.seqs[sq].lk;
  const DeviceSeq s = p.kv.in.seqs[b];
  const int Hk = p.kv.Hk;
  const long long rows = static_cast<long long>(s.lk) * Hk;
  for (int value = 0; value < 2; ++value) {
    const int dim = value ? p.kv.dv : p.kv.d, chunks = dim / 8;
    for (long long i = first; i < rows * chunks; i += step) {
      const long long row = i / chunks;
      const int c = static_cast<int>(i - row * chunks);
      const int j = static_cast<int>(row / Hk), kh = static_cast<int>(row - static_cast<long long>(j) * Hk);
      const float* src = kv_row(p.kv, s, b, j, kh, value != 0) + c * 8;
      const long long at = (static_cast<long long>(koff) * Hk + row) * dim + c * 8;
      if (value) {
        to_x8<T>(v + at, src, 1.0f);
      } else {
        to_x8<T>(k + at, src, 1.0f);
        to_x8<T>(ks + at, src, p.scale);
      }
    }
  }
}

template <int W, bool kSoftcap, class T>
void launch(const TcParams& p, unsigned grid_x, unsigned grid_y) {
  const int bytes = smem_bytes(p.kv.d, p.kv.dv, W);
  // The cap is the function's, for the whole process: set once, to the largest case's layout or the device's
  // limit if that is lower (an A100 has 163 KB). Set per launch to the case's own size, threads with cases in
  // flight lowered it under one another's launches (cudaErrorLaunchOutOfResources under bench --in-flight, H200,
  // 2026-12-01).
  static const int cap = [] {
    int device = 0, limit = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
    const int most = std::min(limit, smem_bytes(kMaxDim, kMaxDim, W));
    check(cudaFuncSetAttribute(tc_kernel<W, kSoftcap, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, most),
          "tensor-core reference: shared memory size");
    return most;
  }();
  if (bytes > cap)
    throw std::runtime_error("tensor-core reference: the case needs " + std::to_string(bytes) +
                             " bytes of shared memory, the device allows " + std::to_string(cap));
  tc_kernel<W, kSoftcap, T><<<dim3(grid_x, grid_y), kThreads, bytes, harness_stream()>>>(p);
}

template <class T>
void copy_and_launch(TcParams& p, PrepParams& pp, unsigned prep_x, unsigned gx, unsigned gy, std::int64_t k_elems,
                     std::int64_t v_elems) {
  // The copies, in per-thread slots: a case's copies are consumed by its own launch on the same stream.
  pp.q = slot_of<T>("tc.q", static_cast<std::size_t>(pp.q_elems));
  pp.k = slot_of<T>("tc.k", static_cast<std::size_t>(k_elems));
  pp.ks = slot_of<T>("tc.ks", static_cast<std::size_t>(k_elems));
  pp.v = slot_of<T>("tc.v", static_cast<std::size_t>(v_elems));
  prep_kernel<T><<<dim3(prep_x, static_cast<unsigned>(p.B + 1)), 256, 0, harness_stream()>>>(pp);
  check_last("tensor-core reference: 16-bit copies");
  p.q = pp.q;
  p.k = pp.k;
  p.ks = pp.ks;
  p.v = pp.v;
  const bool capped = p.softcap > 0.0f;
  if (p.kv.dv <= 64) capped ? launch<64, true, T>(p, gx, gy) : launch<64, false, T>(p, gx, gy);
  else capped ? launch<128, true, T>(p, gx, gy) : launch<128, false, T>(p, gx, gy);
}

}  // namespace

std::string tc_unsupported_reason(const DeviceCase& dc) {
  const char* env = std::getenv("FLASHCHECK_REFERENCE");
  if (env && std::strcmp(env, "simt") == 0) return "FLASHCHECK_REFERENCE=simt";
  const KernelCase& c = dc.kcase();
  if (c.dtype == DType::kF32) return "fp32 inputs: their products are not exact in a 16-bit tensor-core multiply";
  // The first tensor-core kernel also took fp16, with P's pieces scaled by 2^14: the device-reference property on
  // the H200 (10,000 cases, 2026-12-01) failed 41 fp16 cases and no bf16 one, because the pieces leave fp16's range
  // below 2^-24 and outputs made only of weights under about 1e-12 came out 0 or a few 1e-4 off. P's pieces are now
  // bf16 whatever the dtype, and an fp16 V goes into P.V as two exact bf16 pieces (H100, 2026-12-06: 10,000 cases of
  // the property, fp16 among them, 0 failures; docs/TOLERANCE.md).
  if (c.head_dim % 16 != 0 || c.v_head_dim % 16 != 0) return "head dims must be multiples of 16 (the MMA's k-step)";
  if (c.head_dim > kMaxDim || c.v_head_dim > kMaxDim) return "head dims above 256 do not fit the shared-memory tiles";
  if (!dc.finite_inputs()) return "inputs with infinite or huge values (P's pieces times inf give NaN, fp32 gives inf)";
  return "";
}

void tc_reference_and_baseline(const DeviceCase& dc, EmptyRow empty_row, const DeviceResult& truth,
                               const DeviceResult& base, TcRowStats* stats) {
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
  p.scale = static_cast<float>(c.softmax_scale());
  p.softcap = static_cast<float>(c.softcap);
  p.win_left = static_cast<int>(rule.left);
  p.win_right = static_cast<int>(rule.right);
  p.empty_row = empty_row;
  p.truth = truth;
  p.base = base;
  p.stats = stats;
  std::int64_t blocks = 0, total_k = 0, most_k = 0;
  for (const SeqGeometry& s : g.seqs) {
    blocks += (s.lq + kM - 1) / kM;
    total_k += s.lk;
    most_k = std::max(most_k, s.lk);
  }
  if (blocks == 0 || c.heads == 0) return;
  if (blocks > INT_MAX || c.heads > 65535 || p.B >= 65535) throw std::invalid_argument("tensor-core reference: grid too large");

  const std::int64_t q_elems = g.total_q * p.H * p.kv.d, k_elems = total_k * p.kv.Hk * p.kv.d;
  PrepParams pp{p.kv, p.B, q_elems, p.scale, nullptr, nullptr, nullptr, nullptr};
  const std::int64_t work = std::max<std::int64_t>(q_elems, most_k * p.kv.Hk * std::max(p.kv.d, p.kv.dv)) / 8;
  const auto prep_x = static_cast<unsigned>(std::clamp<std::int64_t>((work + 255) / 256, 1, std::max(1, 8192 / (p.B + 1))));
  const auto gx = static_cast<unsigned>(blocks), gy = static_cast<unsigned>(c.heads);
  const std::int64_t v_elems = total_k * p.kv.Hk * p.kv.dv;
  if (c.dtype == DType::kF16) copy_and_launch<f16>(p, pp, prep_x, gx, gy, k_elems, v_elems);
  else copy_and_launch<bf16>(p, pp, prep_x, gx, gy, k_elems, v_elems);
  check_last("tensor-core reference");
}

}  // namespace flashcheck::device
