// The tensor-core gradient reference (gradients_tc.h) of a bf16 or fp16 backward case, written as flash-attention 2
// writes its backward: the logits and dP recomputed per tile on mma.sync m16n8k16 (16-bit in, fp32 accumulate),
// nothing of size L x L stored. Five launches, six with GQA:
//   1. the forward's tensor-core kernel (attention_tc.cu) gives each (row, head) the reference's m, Z and logit
//      sensitivity, the baseline's m and Z, and the fp32-accurate output O with its sensitivity;
//   2. copies of Q, K, K' = rd(K * scale), V and dO in the dtype, in their fp32 layouts (exact);
//   3. per (row, head), one warp: D = dO . O, its sensitivity and terms (RowShareStats, as ExactRow::backward);
//   4. per 64 query rows and head: dQ = scale sum_j ds_j k_j with its sensitivity and terms, then the baseline's
//      D = sum_j P_j dP_j and its dQ;
//   5. per 64 keys and query head: dV = sum_i P_ij dO_i and dK = scale sum_i ds_ij q_i over the rows that see them,
//      then the baseline's dK and dV with its rounding per head;
//   6. with more than one query head per KV head: each (key row, KV head, column) of dK and dV summed over the group's
//      heads (the reference's in fp64, the baseline's in fp32 in head order, then rounded).
// Launches 4 and 5 run eight warps a block in pairs (below, "Warp pairs"). Every sum runs in a fixed order, without
// atomics: each run gives the same bits.
//
// Why this is as accurate as an fp32 computation of the same formula (docs/TOLERANCE.md, "The tensor-core gradient
// reference"), with u = 2^-24:
// - The logits and dP = dO . v_j: q, k, dO and v are exact in the dtype, their products exact in fp32
//   (attention_tc.cu); MMAs of the dtype compute them.
// - Each key's share (P_j, ds_j and their sensitivities) is reference/key_share.h's formula in fp32: what an fp32
//   computation of the rows errs by is what the sensitivities carry (core/tolerance.h).
// - The sums: ds_j (or P_j) split into three bf16 pieces (to 2^-25 relative), each piece times an exact bf16 operand
//   exact (an fp16 operand goes in as two exact bf16 pieces, tc_mma.cuh split_f16x2: six MMAs instead of three), the
//   MMAs of a 64-term tile in a fresh accumulator added to the running sum with round-to-nearest: as for the
//   forward's P.V, about 24u of each tile's magnitude plus a sum of n/64 terms, under the 8 sqrt(n + 1) u of
//   the sensitivity that the bound grants.
// - The sensitivity, sqrt(n + 1) sum |ds_j k_jx| + sum ds_noise_j |k_jx| (core/tolerance.h gradient_sensitivity), is
//   one sum of (sqrt(n + 1) |ds_j| + ds_noise_j) |k_jx|: n, the element's number of terms, is known before the sum.
//   It and the terms' sum of squares use one bf16 piece per factor (2^-9 relative each) in one chained accumulator
//   (truncating by at most (n/16) 2u, below 2^-9 for n <= 2^18 terms), inflated by 1 + 2^-7 and 1 + 2^-6: they bound
//   what they estimate, as the forward's a_x does.
// - With GQA each query head's sums are apart (launch 5) and launch 6 adds a group's: the values in fp64 (under 2^-50
//   relative more), the sensitivity and squares in fp32 (one rounding of u per head, far inside their inflation).
// - The baseline follows the host baseline's rounding steps (reference/host/gradients.h); its sums are fp32 sums of
//   products of values of the dtype, exact products, in another order than the host's.
#include "reference/device/gradients_tc.h"

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
#include <tuple>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"
#include "core/geometry.h"
#include "core/tolerance.h"
#include "reference/device/attention.h"
#include "reference/device/attention_tc.h"
#include "reference/device/tc_mma.cuh"
#include "reference/device/warp_math.cuh"
#include "reference/key_share.h"

namespace flashcheck::device {
namespace {

using namespace tc;  // NOLINT: the building blocks are this file's vocabulary
using reference::KeyShare;
using reference::RowShareStats;

// Head dims up to 128: the block's rows and two stages of two tiles fit shared memory, the accumulators registers.
constexpr int kMaxGradDim = 128;
constexpr int kW = 64;  // output columns a pass accumulates at once
constexpr float kSensInflation = 1.0f + 0x1.0p-7f;
constexpr float kSquaresInflation = 1.0f + 0x1.0p-6f;

// Per (query row, head): what every key's share of the row needs, the reference's and the baseline's.
struct RowStat {
  float m, z, logit_sens, big_d, d_sens, d_terms;  // the reference: softmax max and sum, RowShareStats
  float mb, zb, db;                                // the baseline: max, sum, D = sum_j P_j dP_j as it rounds them
};

// dK's and dV's sums of one query head (kv_rows, H, d | dv), [1] dK and [2] dV as in TcGradientOutputs: the reference's
// fp32 value, sensitivity and sum of squares, unscaled, and the baseline's head sum as rounded for the group's sum.
struct KeyPartials {
  float *value[3], *noise[3], *squares[3], *base[3];
};

struct GradParams {
  const DeviceSeq* seqs;
  int B, H, Hk, group, d, dv;
  float scale, cap;  // the logits' scale in fp32, as the forward's kernel applies it
  double scale_d;    // the gradients' scale, as the host reference applies it
  int win_left, win_right;
  const void *q, *k, *ks, *v, *dout;  // copies of the fp32 inputs in the dtype (T), same layouts; ks = rd(k * scale)
  RowStat* rows;                       // (q_rows, H)
  TcGradientOutputs out;
  KeyPartials part;                    // group > 1: dK's and dV's sums per query head, before the group's sum
};

// The parameters that a tile's elements use, in registers (tc_mma.cuh in_register).
__device__ inline GradParams held(GradParams p) {
  p.scale = in_register(p.scale);
  p.cap = in_register(p.cap);
  p.win_left = in_register(p.win_left);
  p.win_right = in_register(p.win_right);
  return p;
}

// ---- Geometry (core/geometry.h visible_keys and its inverse) ----------------------------------------------------
__device__ inline bool sees(const GradParams& p, const DeviceSeq& s, int i, int j) {
  return i >= 0 && i < s.lq && j >= 0 && j < s.lk && (p.win_left < 0 || j >= i + s.off - p.win_left) &&
         (p.win_right < 0 || j <= i + s.off + p.win_right);
}
__device__ inline void keys_of_row(const GradParams& p, const DeviceSeq& s, int i, int& lo, int& hi) {
  lo = 0;
  hi = (i >= 0 && i < s.lq) ? s.lk : 0;
  if (p.win_left >= 0 && i + s.off - p.win_left > lo) lo = i + s.off - p.win_left;
  if (p.win_right >= 0 && i + s.off + p.win_right + 1 < hi) hi = i + s.off + p.win_right + 1;
}
__device__ inline void rows_of_key(const GradParams& p, const DeviceSeq& s, int j, int& lo, int& hi) {
  lo = 0;
  hi = (j >= 0 && j < s.lk) ? s.lq : 0;
  if (p.win_left >= 0 && j - s.off + p.win_left + 1 < hi) hi = j - s.off + p.win_left + 1;
  if (p.win_right >= 0 && j - s.off - p.win_right > lo) lo = j - s.off - p.win_right;
}

// Block x enumerates 64-row tiles of sequence 0, then of sequence 1, ...: of its query rows (lq) or of its keys (lk).
// Query tiles go in reverse order of x, as the forward's blocks do (attention_tc.cu): under a causal mask the last
// rows see the most keys, and the device starts blocks in the order of x, so the longest start first. Key tiles keep
// their order, which already starts with the keys that the most rows see.
struct Tile {
  DeviceSeq s;
  int first, count;
};
template <bool kKeys>
__device__ inline bool locate_tile(const GradParams& p, Tile& t) {
  int x = kKeys ? blockIdx.x : gridDim.x - 1 - blockIdx.x;
  for (int b = 0; b < p.B; ++b) {
    const DeviceSeq s = p.seqs[b];
    const int n = kKeys ? s.lk : s.lq, tiles = (n + kM - 1) / kM;
    if (x < tiles) {
      t.s = s;
      t.first = x * kM;
      t.count = min(kM, n - t.first);
      return true;
    }
    x -= tiles;
  }
  return false;
}

// The union of range(i, lo, hi) over a tile's 64 rows i (the block's), and over this warp pair's 16 of them; and
// their intersection over the pair's 16, [all_lo, all_hi): a tile inside it is seen whole by every row of the pair.
struct Spans {
  int lo = INT_MAX, hi = 0, warp_lo = INT_MAX, warp_hi = 0, all_lo = 0, all_hi = INT_MAX;
  __device__ bool whole(int t0) const { return t0 >= all_lo && t0 + kN <= all_hi; }
};
template <class Range>
__device__ inline Spans spans_of(const Tile& t, int group, Range range) {
  Spans sp;
  if (group * 16 + 16 > t.count) sp.all_hi = 0;  // rows past the tile's end see nothing
  for (int r = 0; r < t.count; ++r) {
    int lo, hi;
    range(t.first + r, lo, hi);
    if (r / 16 == group) {
      sp.all_lo = max(sp.all_lo, lo);
      sp.all_hi = min(sp.all_hi, hi);
    }
    if (hi <= lo) continue;
    sp.lo = min(sp.lo, lo);
    sp.hi = max(sp.hi, hi);
    if (r / 16 == group) {
      sp.warp_lo = min(sp.warp_lo, lo);
      sp.warp_hi = max(sp.warp_hi, hi);
    }
  }
  return sp;
}

// ---- The arithmetic of one (row, key) pair ----------------------------------------------------------------------
// The reference's logit from q . k, as the forward's kernel computes it (its m and Z come from there), with
// tanh(s / cap) in t and the softcap's derivative in c (0 and 1 without).
template <bool kSoftcap>
__device__ inline float truth_logit(const GradParams& p, float dot, float& t, float& c) {
  float s = __fmul_rn(dot, p.scale);
  t = 0.0f;
  c = 1.0f;
  if (kSoftcap) {
    const float x = s / p.cap;
    t = tanhf(x);
    c = reference::softcap_derivative(x);
    s = p.cap * t;
  }
  return s;
}
// The baseline's logit from q . rd(k scale), rd(tanh(rd(s / cap))) in t; rd rounds to the dtype T.
template <class T, bool kSoftcap>
__device__ inline float base_logit(const GradParams& p, float dot, float& t) {
  float s = rd_t<T>(dot);
  t = 0.0f;
  if (kSoftcap) {
    t = rd_t<T>(tanhf(rd_t<T>(s / p.cap)));
    s = rd_t<T>(t * p.cap);
  }
  return s;
}
// The baseline's ds from its rounded P and dP, and its softcap chain in the dtype.
template <class T, bool kSoftcap>
__device__ inline float base_ds(const GradParams& p, float pb, float dpb, float db, float t) {
  float ds = rd_t<T>(pb * (dpb - db));
  if (kSoftcap) {
    const float dtanh = rd_t<T>(ds * p.cap);
    const float du = rd_t<T>(dtanh * (1.0f - t * t));
    ds = rd_t<T>(du / p.cap);
  }
  return ds;
}
// The baseline's P of a pair from its logit's dot, rd(tanh) in t.
template <class T, bool kSoftcap>
__device__ inline float base_weight(const GradParams& p, const RowStat& r, float dot, float& t) {
  return rd_t<T>(expf(base_logit<T, kSoftcap>(p, dot, t) - r.mb) / r.zb);
}
__device__ inline RowShareStats<float> share_of(const RowStat& r) {
  return RowShareStats<float>{r.big_d, r.d_sens, r.d_terms, r.logit_sens};
}
// A key's share of a row, from the logit's dot and dP's dot and absolute dot.
template <bool kSoftcap>
__device__ inline KeyShare<float> share(const GradParams& p, const RowStat& r, float dot, float dp, float dp_abs) {
  float t, c;
  const float l = truth_logit<kSoftcap>(p, dot, t, c);
  const float pj = expf(l - r.m) / r.z;
  return reference::key_share<float>(share_of(r), pj, t, c, p.cap, dp, dp_abs, p.dv);
}

// ---- Operands ---------------------------------------------------------------------------------------------------
// The A operands of a warp's half tile, 16 x 32, held in the accumulator layout (s[nt][e]: rows g + 8 (e / 2),
// columns nt * 8 + 2t + e % 2) as two k-steps of a product with a 64-row B: element pair (nt, rr) goes to a[nt / 2]
// register (nt % 2) * 2 + rr.
__device__ inline void put(HalfFrag& a, int nt, int rr, unsigned pair) { a[nt / 2][(nt % 2) * 2 + rr] = pair; }

// ---- Warp pairs ------------------------------------------------------------------------------------------------
// dQ and dK/dV run in warp pairs (tc_mma.cuh): warp w takes the 16 rows of group w % 4 (dQ: query rows; dK/dV: keys)
// and half w / 4 of each tile's 64 terms (keys; query rows), computes the logits, dP and the coefficients of its 32
// and accumulates its half of the output columns (cols_of, at most kW) of the products with the whole tile. So the
// element-wise work, the costliest of a tile, is done once per tile instead of once per kW output columns, and each
// warp's accumulators are those of kW columns, as with four warps.
enum Slot { kHi, kMid, kLo, kNoise, kMag2, kSlots };  // the operands a warp publishes per tile, at most
using GradPair = PairWarp<kSlots>;  // tc_mma.cuh
constexpr int kSwapBytes = GradPair::kSwapBytes;
static_assert(kMaxGradDim <= 2 * kW, "the two halves of a pair cover every output column");

// The output columns [c0, c1) of warp `half` of a pair, of an output `cols` wide (a multiple of 16, at most 2 kW):
// each warp half of the 16-column blocks, so that below head dims of 128 both warps share the products (at 64 the
// second warp had none). A column's sum is the same, bit for bit, whichever warp computes it.
struct Cols {
  int c0, c1;
};
__device__ inline Cols cols_of(int half, int cols) {
  const int w = (cols + 31) / 32 * 16;
  return {min(cols, half * w), min(cols, (half + 1) * w)};
}

// A pair of T values squared, each rounded to bf16: the B operand of a sum of squares.
template <class T>
__device__ inline unsigned sq2(unsigned x) {
  const float2 f = unpack_t<T>(x);
  return pack_t<bf16>(f.x * f.x, f.y * f.y);
}
// s = A.B^T and sa = |A|.|B|^T of a warp's 16 rows (aw) against the first 8 NT rows of a tile bt, as qk (tc_mma.cuh).
template <int NT, class T>
__device__ inline void qk_abs(float (&s)[NT][4], float (&sa)[NT][4], const T* aw, int ld_a, const T* bt, int ld,
                              int d, int lane) {
  zero(s);
  zero(sa);
  for (int k0 = 0; k0 < d; k0 += 16) {
    unsigned a[4], aa[4];
    ldsm_x4(a, aw + (lane % 16) * ld_a + k0 + (lane / 16) * 8);
#pragma unroll
    for (int i = 0; i < 4; ++i) aa[i] = a[i] & kAbsMask;
#pragma unroll
    for (int pr = 0; pr < NT / 2; ++pr) {
      unsigned b[4];
      ldsm_x4(b, bt + (pr * 16 + lane % 8 + (lane / 16) * 8) * ld + k0 + ((lane / 8) % 2) * 8);
      mma_t<T>(s[2 * pr], a, b[0], b[1]);
      mma_t<T>(s[2 * pr + 1], a, b[2], b[3]);
      mma_t<T>(sa[2 * pr], aa, b[0] & kAbsMask, b[1] & kAbsMask);
      mma_t<T>(sa[2 * pr + 1], aa, b[2] & kAbsMask, b[3] & kAbsMask);
    }
  }
}

// The three sums of a reference gradient over W columns: the value, the sensitivity and the squares of the terms'
// magnitudes.
struct Sums {
  float value[kW / 8][4], noise[kW / 8][4], squares[kW / 8][4];
  __device__ void clear() {
#pragma unroll
    for (int n = 0; n < kW / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) value[n][e] = noise[n][e] = squares[n][e] = 0.0f;
  }
};
// The pieces of a half tile's coefficients: the value in three, its sensitivity's coefficient sum_factor |value| +
// carried (sum_factor: the sum sensitivity of the element's terms) and the squared magnitude in one each.
struct Pieces {
  HalfFrag hi, mid, lo, noise, mag2;
  __device__ void set(int nt, int rr, float sum_factor, const float (&value)[2], const float (&carried)[2],
                      const float (&magnitude)[2]) {
    const Split3 v = split3(value[0], value[1]);  // tc_mma.cuh
    put(hi, nt, rr, v.hi);
    put(mid, nt, rr, v.mid);
    put(lo, nt, rr, v.lo);
    put(noise, nt, rr,
        pack_t<bf16>(sum_factor * fabsf(value[0]) + carried[0], sum_factor * fabsf(value[1]) + carried[1]));
    put(mag2, nt, rr, pack_t<bf16>(magnitude[0] * magnitude[0], magnitude[1] * magnitude[1]));
  }
  // To the pair, whose barrier follows.
  __device__ void publish(const GradPair& pw) const {
    pw.publish(kHi, hi);
    pw.publish(kMid, mid);
    pw.publish(kLo, lo);
    pw.publish(kNoise, noise);
    pw.publish(kMag2, mag2);
    pw.sync();
  }
};
// A half tile's coefficients for dQ and dK from its logits' dots s, dP's dots and absolute dots: pair(nt, rr, c) gives
// the statistics of the row of accumulator element (nt, 2 rr + c), or null where that row does not see that key.
template <bool kSoftcap, class Pair>
__device__ inline void ds_pieces(Pieces& a, const GradParams& p, const float (&s)[4][4], const float (&dp)[4][4],
                                 const float (&dpa)[4][4], const float (&sum_factor)[2], Pair pair) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float ds[2] = {0.0f, 0.0f}, dn[2] = {0.0f, 0.0f}, dm[2] = {0.0f, 0.0f};
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const RowStat* r = pair(nt, rr, c);
        if (!r) continue;
        const int e = 2 * rr + c;
        const KeyShare<float> ks = share<kSoftcap>(p, *r, s[nt][e], dp[nt][e], dpa[nt][e]);
        ds[c] = ks.ds;
        dn[c] = ks.ds_noise;
        dm[c] = ks.ds_magnitude;
      }
      a.set(nt, rr, sum_factor[rr], ds, dn, dm);
    }
}
// The baseline's ds (and, where `weights` is given, its P) of a half tile as A operands in the dtype, exact: both are
// values of the dtype. s holds the dots with K' = rd(K scale), dp those of dP; pair as for ds_pieces.
template <class T, bool kSoftcap, class Pair>
__device__ inline void base_fragments(HalfFrag& ds_frag, HalfFrag* weights, const GradParams& p,
                                      const float (&s)[4][4], const float (&dp)[4][4], Pair pair) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float pb[2] = {0.0f, 0.0f}, ds[2] = {0.0f, 0.0f};
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const RowStat* r = pair(nt, rr, c);
        if (!r) continue;
        const int e = 2 * rr + c;
        float t;
        pb[c] = base_weight<T, kSoftcap>(p, *r, s[nt][e], t);
        ds[c] = base_ds<T, kSoftcap>(p, pb[c], rd_t<T>(dp[nt][e]), r->db, t);
      }
      put(ds_frag, nt, rr, pack_t<T>(ds[0], ds[1]));
      if (weights) put(*weights, nt, rr, pack_t<T>(pb[0], pb[1]));
    }
}

__device__ inline void clear(float (&acc)[kW / 8][4]) {
#pragma unroll
  for (int n = 0; n < kW / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
}
// Adds the tile's products with the B operand columns c0 .. c1 - 1 (at most kW) of bt (a 64-row tile) to `sums`,
// the A operands (Pieces) read from the pair's swap k-step by k-step: each lane holds 20 of them at a time, not 80.
// The pieces are bf16; an fp16 B goes in as two exact bf16 pieces (tc_mma.cuh split_f16x2), each meeting every piece,
// and its hi piece alone serves the sensitivity (2^-9 relative, within the inflation). Each column block's value
// takes the tile's 3 (or 6) products per k-step in a fresh accumulator, k-steps in order, then joins the running sum.
template <class T>
__device__ inline void accumulate(Sums& sums, const GradPair& pw, const T* bt, int ld, Cols c, int lane) {
  const int c0 = c.c0;
  float tile[kW / 8][4];
  clear(tile);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    unsigned hi[4], mid[4], lo[4], noise[4], mag2[4];
    pw.fetch(kHi, kk, hi);
    pw.fetch(kMid, kk, mid);
    pw.fetch(kLo, kk, lo);
    pw.fetch(kNoise, kk, noise);
    pw.fetch(kMag2, kk, mag2);
#pragma unroll
    for (int cp = 0; cp < kW / 16; ++cp) {
      if (c0 + cp * 16 >= c.c1) continue;
      float (&t0)[4] = tile[2 * cp];
      float (&t1)[4] = tile[2 * cp + 1];
      unsigned b[4];
      load_v(b, bt + c0, ld, kk, cp, lane);
      const unsigned q0 = sq2<T>(b[0]), q1 = sq2<T>(b[1]), q2 = sq2<T>(b[2]), q3 = sq2<T>(b[3]);
      mma_pieces<T>(t0, t1, hi, mid, lo, b);  // b is its hi piece after
      mma(sums.noise[2 * cp], noise, b[0] & kAbsMask, b[1] & kAbsMask);
      mma(sums.noise[2 * cp + 1], noise, b[2] & kAbsMask, b[3] & kAbsMask);
      mma(sums.squares[2 * cp], mag2, q0, q1);
      mma(sums.squares[2 * cp + 1], mag2, q2, q3);
    }
  }
#pragma unroll
  for (int n = 0; n < kW / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) sums.value[n][e] += tile[n][e];  // round-to-nearest across tiles (the head of this file)
}
// One product of coefficients exact in T (the baseline's, the pair's operand `slot`) with columns c0 .. c1 - 1 of bt, a
// fresh accumulator per tile.
template <class T>
__device__ inline void accumulate_exact(float (&acc)[kW / 8][4], const GradPair& pw, int slot, const T* bt, int ld,
                                        Cols c, int lane) {
  const int c0 = c.c0;
  float tile[kW / 8][4];
  clear(tile);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    unsigned a[4];
    pw.fetch(slot, kk, a);
#pragma unroll
    for (int cp = 0; cp < kW / 16; ++cp) {
      if (c0 + cp * 16 >= c.c1) continue;
      unsigned b[4];
      load_v(b, bt + c0, ld, kk, cp, lane);
      mma_t<T>(tile[2 * cp], a, b[0], b[1]);
      mma_t<T>(tile[2 * cp + 1], a, b[2], b[3]);
    }
  }
#pragma unroll
  for (int n = 0; n < kW / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] += tile[n][e];
}
// Writes one element of a reference gradient: value * scale, its sensitivity and its terms.
__device__ inline void write_truth(const TcGradientOutputs& out, int which, long long at, const Sums& s, int nt, int e,
                                   double scale) {
  const float mag = static_cast<float>(fabs(scale));
  out.truth[which][at] = scale * static_cast<double>(s.value[nt][e]);
  out.noise[which][at] = mag * s.noise[nt][e] * kSensInflation;
  out.terms[which][at] = mag * tolerance::terms_magnitude(s.squares[nt][e] * kSquaresInflation);
}

// dK's or dV's sums of one query head: the outputs where the group is that head alone, else the partials.
__device__ inline void write_key_truth(const GradParams& p, int which, long long at, const Sums& s, int nt, int e,
                                       double scale) {
  if (p.group == 1) return write_truth(p.out, which, at, s, nt, e, scale);
  p.part.value[which][at] = s.value[nt][e];
  p.part.noise[which][at] = s.noise[nt][e];
  p.part.squares[which][at] = s.squares[nt][e];
}

// ---- Launch 3: the rows' statistics ----------------------------------------------------------------------------
struct RowsParams {
  const TcRowStats* fwd;       // (q_rows, H) from the forward's kernel
  const float *out, *noise;    // its output and the output's sensitivity (units of u)
  const float* dout;           // fp32 dO
  long long cells;             // total_q * H: the sequences' rows, slack rows past them
  int dv;
  RowStat* rows;
};
__global__ void rows_kernel(RowsParams rp) {
  const long long cell = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (cell >= rp.cells) return;
  const TcRowStats f = rp.fwd[cell];
  float big_d = 0.0f, d_abs = 0.0f, d_squares = 0.0f, d_carried = 0.0f;
  if (f.z > 0.0f) {
    for (int x = lane; x < rp.dv; x += 32) {
      const long long at = cell * rp.dv + x;
      const float go = rp.dout[at] * rp.out[at];
      big_d += go;
      d_abs += fabsf(go);
      d_squares += go * go;
      d_carried += fabsf(rp.dout[at]) * rp.noise[at];
    }
  }
  big_d = warp_sum(big_d);
  d_abs = warp_sum(d_abs);
  d_squares = warp_sum(d_squares);
  d_carried = warp_sum(d_carried);
  if (lane == 0)
    rp.rows[cell] = RowStat{f.m, f.z, f.logit_sens, big_d,
                            tolerance::gradient_sensitivity<float>(rp.dv, d_abs, d_carried),
                            tolerance::terms_magnitude(d_squares), f.mb, f.zb, 0.0f};
}

// ---- Launch 4: dQ ------------------------------------------------------------------------------------------------
__host__ __device__ inline int tile_ld(int d, int dv) { return (d > dv ? d : dv) + kPad; }
// Shared memory: the block's Q and dO rows, two stages of a K (or K') tile and a V tile, the pairs' swap. At head dims
// of 128, 145,408 bytes: one block of eight warps per multiprocessor.
__host__ __device__ inline int dq_smem_bytes(int d, int dv) {
  return 2 * (kM * (d + kPad) + kM * (dv + kPad) + 4 * kN * tile_ld(d, dv)) + kSwapBytes;
}

template <bool kSoftcap, class T>
__global__ void __launch_bounds__(kPairThreads) dq_kernel(GradParams param) {
  extern __shared__ __align__(128) unsigned char smem[];
  const GradParams p = held(param);
  Tile bk;
  if (!locate_tile<false>(p, bk)) return;
  const int h = blockIdx.y, kh = h / p.group, d = p.d, dv = p.dv;
  const int ld_q = d + kPad, ld_o = dv + kPad, ld = tile_ld(d, dv);
  T* qs = reinterpret_cast<T*>(smem);
  T* os = qs + kM * ld_q;
  T* slots = os + kM * ld_o;
  auto slot = [&](int stage, int which) { return slots + (stage * 2 + which) * kN * ld; };
  const GradPair pw(slots + 4 * kN * ld);
  const int group = pw.group, half = pw.half, lane = pw.lane, g = lane / 4, t4 = lane % 4;

  // The keys the block's rows see, and this pair's rows.
  const Spans keys = spans_of(bk, group, [&](int i, int& lo, int& hi) { keys_of_row(p, bk.s, i, lo, hi); });
  const int jlo = keys.lo, jhi = keys.hi, wlo = keys.warp_lo, whi = keys.warp_hi;
  if (jlo >= jhi) return;  // no row of the block sees a key: its dQ stays zero (every thread takes this branch)

  const long long row0 = static_cast<long long>(bk.s.q_start) + bk.first;
  const T *q = static_cast<const T*>(p.q), *k = static_cast<const T*>(p.k), *ks = static_cast<const T*>(p.ks);
  const T *v = static_cast<const T*>(p.v), *dout = static_cast<const T*>(p.dout);
  load_rows<kPairThreads>(qs, ld_q, q + (row0 * p.H + h) * d, static_cast<long long>(p.H) * d, 0, bk.count, d);
  load_rows<kPairThreads>(os, ld_o, dout + (row0 * p.H + h) * dv, static_cast<long long>(p.H) * dv, 0, bk.count, dv);
  cp_async_commit();
  const T* qw = qs + group * 16 * ld_q;
  const T* ow = os + group * 16 * ld_o;
  const long long key0 = static_cast<long long>(bk.s.k_start) + bk.s.p0;
  const long long k_stride = static_cast<long long>(p.Hk) * d, v_stride = static_cast<long long>(p.Hk) * dv;
  const T* k_base = k + (key0 * p.Hk + kh) * d;
  const T* ks_base = ks + (key0 * p.Hk + kh) * d;
  const T* v_base = v + (key0 * p.Hk + kh) * dv;
  // Both warps of a pair take the same branch: the pair's barrier needs them both.
  auto pair_sees = [&](int j0) { return j0 < whi && j0 + kN > wlo; };
  const Cols qc = cols_of(half, d);  // this warp's output columns

  // This lane's two rows: g and g + 8 of the pair's 16.
  int i_of[2], n_keys[2];
  float sum_factor[2];  // the sum sensitivity of dQ's n_keys terms
  RowStat rs[2];
  for (int rr = 0; rr < 2; ++rr) {
    const int r = group * 16 + g + rr * 8;
    i_of[rr] = bk.first + r;
    int lo, hi;
    keys_of_row(p, bk.s, i_of[rr], lo, hi);
    n_keys[rr] = hi > lo ? hi - lo : 0;
    sum_factor[rr] = tolerance::sum_sensitivity<float>(n_keys[rr]);
    rs[rr] = n_keys[rr] > 0 ? p.rows[(row0 + r) * p.H + h] : RowStat{};
  }
  // The statistics of this lane's row rr where it sees the key of accumulator column (nt, c) of this warp's half of
  // tile j0.
  auto row_seeing = [&](int j0) {
    return [&, j0](int nt, int rr, int c) -> const RowStat* {
      return sees(p, bk.s, i_of[rr], j0 + half * kHalf + nt * 8 + 2 * t4 + c) ? &rs[rr] : nullptr;
    };
  };
  // The same for a tile that every row of the pair sees whole (keys.whole): no test. The element-wise stages take one
  // or the other, each compiled on its own, so that most tiles (all but the diagonal ones of a causal mask) run
  // without the mask's comparisons; both compute each visible element with the same instructions.
  const auto row_seeing_all = [&](int, int rr, int) -> const RowStat* { return &rs[rr]; };
  auto load_truth = [&](int st, int j0) {
    load_rows<kPairThreads>(slot(st, 0), ld, k_base, k_stride, j0, jhi, d);
    load_rows<kPairThreads>(slot(st, 1), ld, v_base, v_stride, j0, jhi, dv);
  };
  auto load_base = [&](int st, int j0) {
    load_rows<kPairThreads>(slot(st, 0), ld, ks_base, k_stride, j0, jhi, d);
    load_rows<kPairThreads>(slot(st, 1), ld, v_base, v_stride, j0, jhi, dv);
  };
  // This warp's half of tile `st`: its keys' rows of K (or K') and of V.
  auto half_of = [&](int st, int which) { return slot(st, which) + half * kHalf * ld; };
  auto write_rows = [&](auto&& write) {
#pragma unroll
    for (int nt = 0; nt < kW / 8; ++nt) {
      const int x = qc.c0 + nt * 8 + 2 * t4;
      if (x >= qc.c1) continue;
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        if (n_keys[rr] == 0) continue;
        const long long at = ((row0 + group * 16 + g + rr * 8) * p.H + h) * d + x;
        for (int c = 0; c < 2; ++c) write(at + c, nt, 2 * rr + c);
      }
    }
  };

  // ---- The reference: dQ ----
  {
    Sums sums;
    sums.clear();
    sweep(jlo, jhi, load_truth, [&](int st, int j0) {
      if (!pair_sees(j0)) return pw.skip();
      {
        Pieces a;
        float s[4][4], dp[4][4], dpa[4][4];
        qk(s, qw, ld_q, half_of(st, 0), ld, d, lane);
        qk_abs(dp, dpa, ow, ld_o, half_of(st, 1), ld, dv, lane);
        if (keys.whole(j0)) ds_pieces<kSoftcap>(a, p, s, dp, dpa, sum_factor, row_seeing_all);
        else ds_pieces<kSoftcap>(a, p, s, dp, dpa, sum_factor, row_seeing(j0));
        a.publish(pw);
      }
      accumulate(sums, pw, slot(st, 0), ld, qc, lane);
    });
    write_rows([&](long long at, int nt, int e) { write_truth(p.out, 0, at, sums, nt, e, p.scale_d); });
  }

  if (!p.out.baseline[0]) return;
  // ---- The baseline: its D = sum_j P_j dP_j first (every ds needs it), then dQ ----
  float db[2] = {0.0f, 0.0f};
  sweep(jlo, jhi, load_base, [&](int st, int j0) {
    if (!pair_sees(j0)) return;
    float s[4][4], dp[4][4];
    qk(s, qw, ld_q, half_of(st, 0), ld, d, lane);
    qk(dp, ow, ld_o, half_of(st, 1), ld, dv, lane);
    const auto terms = [&](auto pair) {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const RowStat* r = pair(nt, e >> 1, e & 1);
          if (!r) continue;
          float t;
          db[e >> 1] += base_weight<T, kSoftcap>(p, *r, s[nt][e], t) * rd_t<T>(dp[nt][e]);
        }
    };
    if (keys.whole(j0)) terms(row_seeing_all);
    else terms(row_seeing(j0));
  });
  {  // the pair's halves of the row's keys, the first half's first: both warps end with the same bits
    uint4 a, b;
    pw.exchange(make_uint4(__float_as_uint(db[0]), __float_as_uint(db[1]), 0u, 0u), a, b);
    db[0] = __uint_as_float(a.x) + __uint_as_float(b.x);
    db[1] = __uint_as_float(a.y) + __uint_as_float(b.y);
  }
  for (int rr = 0; rr < 2; ++rr) {  // the quad's four lanes hold a row's keys 4c + t: every lane ends with the sum
    db[rr] += __shfl_xor_sync(0xffffffffu, db[rr], 1);
    db[rr] += __shfl_xor_sync(0xffffffffu, db[rr], 2);
    rs[rr].db = db[rr];
    if (half == 0 && t4 == 0 && n_keys[rr] > 0) p.rows[(row0 + group * 16 + g + rr * 8) * p.H + h].db = db[rr];
  }
  {
    float acc[kW / 8][4];
    clear(acc);
    sweep(jlo, jhi, load_base, [&](int st, int j0) {
      if (!pair_sees(j0)) return pw.skip();
      {
        HalfFrag a;
        float s[4][4], dp[4][4];
        qk(s, qw, ld_q, half_of(st, 0), ld, d, lane);
        qk(dp, ow, ld_o, half_of(st, 1), ld, dv, lane);
        if (keys.whole(j0)) base_fragments<T, kSoftcap>(a, nullptr, p, s, dp, row_seeing_all);
        else base_fragments<T, kSoftcap>(a, nullptr, p, s, dp, row_seeing(j0));
        pw.publish(0, a);
        pw.sync();
      }
      accumulate_exact(acc, pw, 0, slot(st, 0), ld, qc, lane);
    });
    write_rows([&](long long at, int nt, int e) { p.out.baseline[0][at] = rd_t<T>(acc[nt][e]); });
  }
}

// ---- Launch 5: dK and dV ------------------------------------------------------------------------------------------
// Shared memory: the block's K rows (K' = rd(K scale) in their place for the baseline) and V rows, two stages of a Q
// tile and a dO tile, two stages of the tiles' row statistics, the pairs' swap. At head dims of 128 that is 150,016
// bytes: one block of eight warps per multiprocessor. (With four warps a block, two blocks of 109,056 bytes shared one;
// with K' in a slot of its own only one did, and this kernel took 2.5 times dQ's time: ncu, H100, 2026-12-06, 346
// against 136 ms at L 8192 B 2 H 32.)
__host__ __device__ inline int dkdv_smem_bytes(int d, int dv) {
  return 2 * (kN * (d + kPad) + kN * (dv + kPad) + 4 * kM * tile_ld(d, dv)) +
         2 * kM * static_cast<int>(sizeof(RowStat)) + kSwapBytes;
}

template <bool kSoftcap, class T>
__global__ void __launch_bounds__(kPairThreads) dkdv_kernel(GradParams param) {
  extern __shared__ __align__(128) unsigned char smem[];
  const GradParams p = held(param);
  Tile bk;
  if (!locate_tile<true>(p, bk)) return;
  // One query head per block (blockIdx.y): a group's heads run side by side, and a small GQA case fills more of the
  // device than one block per KV head would (reduce_kernel sums the heads when the group has more than one).
  const int h = blockIdx.y, kh = h / p.group, d = p.d, dv = p.dv;
  const int ld_k = d + kPad, ld_v = dv + kPad, ld = tile_ld(d, dv);
  T* kr = reinterpret_cast<T*>(smem);
  T* vr = kr + kN * ld_k;
  T* slots = vr + kN * ld_v;
  RowStat* stats = reinterpret_cast<RowStat*>(slots + 4 * kM * ld);
  const GradPair pw(stats + 2 * kM);
  auto q_slot = [&](int stage) { return slots + (stage * 2) * kM * ld; };
  auto o_slot = [&](int stage) { return slots + (stage * 2 + 1) * kM * ld; };
  const int group = pw.group, half = pw.half, lane = pw.lane, g = lane / 4, t4 = lane % 4;

  // The query rows that see the block's keys, and this pair's keys.
  const Spans rows = spans_of(bk, group, [&](int j, int& lo, int& hi) { rows_of_key(p, bk.s, j, lo, hi); });
  const int ilo = rows.lo, ihi = rows.hi, wlo = rows.warp_lo, whi = rows.warp_hi;
  if (ilo >= ihi) return;  // no row sees these keys: their gradients stay zero

  const long long krow0 = static_cast<long long>(bk.s.k_start) + bk.s.p0 + bk.first;
  const long long k_stride = static_cast<long long>(p.Hk) * d, v_stride = static_cast<long long>(p.Hk) * dv;
  const T *q = static_cast<const T*>(p.q), *dout = static_cast<const T*>(p.dout);
  load_rows<kPairThreads>(kr, ld_k, static_cast<const T*>(p.k) + (krow0 * p.Hk + kh) * d, k_stride, 0, bk.count, d);
  load_rows<kPairThreads>(vr, ld_v, static_cast<const T*>(p.v) + (krow0 * p.Hk + kh) * dv, v_stride, 0, bk.count, dv);
  cp_async_commit();
  const T* kw = kr + group * 16 * ld_k;
  const T* vw = vr + group * 16 * ld_v;
  // Both warps of a pair take the same branch: the pair's barrier needs them both.
  auto pair_sees = [&](int i0) { return i0 < whi && i0 + kM > wlo; };
  const Cols kc = cols_of(half, d), vc = cols_of(half, dv);  // this warp's output columns of dK and of dV

  // This lane's two keys, and the terms of their sums: the rows that see them, times the group's heads.
  int j_of[2], row_lo[2], row_hi[2];  // the rows that see the key: [row_lo, row_hi)
  float sum_factor[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    j_of[rr] = bk.first + group * 16 + g + rr * 8;
    rows_of_key(p, bk.s, j_of[rr], row_lo[rr], row_hi[rr]);
    const int n = row_hi[rr] > row_lo[rr] ? row_hi[rr] - row_lo[rr] : 0;
    sum_factor[rr] = tolerance::sum_sensitivity<float>(static_cast<long long>(n) * p.group);
  }
  // The statistics of the row of accumulator column (nt, c) of this warp's half of tile i0 (stage st) where it sees
  // this lane's key rr: two comparisons of a constant with the key's row range, taken relative to the lane's first
  // row of the tile once (sees() took six or more; 458 integer comparisons per tile in Nsight Compute, H100).
  auto row_seeing = [&](int st, int i0) {
    const int base = i0 + half * kHalf + 2 * t4;
    const int lo0 = row_lo[0] - base, lo1 = row_lo[1] - base, hi0 = row_hi[0] - base, hi1 = row_hi[1] - base;
    const RowStat* first = &stats[st * kM + half * kHalf + 2 * t4];
    return [=](int nt, int rr, int c) -> const RowStat* {
      const int k = nt * 8 + c;
      return k >= (rr ? lo1 : lo0) && k < (rr ? hi1 : hi0) ? first + k : nullptr;
    };
  };
  // The same for a tile whose rows see every key of the pair (rows.whole): no test, as dQ's row_seeing_all.
  auto row_seeing_all = [&](int st) {
    const RowStat* first = &stats[st * kM + half * kHalf + 2 * t4];
    return [=](int nt, int, int c) -> const RowStat* { return first + nt * 8 + c; };
  };
  // This warp's half of a Q or dO tile: its 32 rows.
  auto half_of = [&](const T* tile) { return tile + half * kHalf * ld; };
  // The tiles of query head h: rows i0 .. of Q and dO, and their statistics.
  auto loader = [&](int h) {
    const long long row0 = static_cast<long long>(bk.s.q_start);
    return [&, h, row0](int st, int i0) {
      load_rows<kPairThreads>(q_slot(st), ld, q + (row0 * p.H + h) * d, static_cast<long long>(p.H) * d, i0, ihi, d);
      load_rows<kPairThreads>(o_slot(st), ld, dout + (row0 * p.H + h) * dv, static_cast<long long>(p.H) * dv, i0, ihi,
                              dv);
      for (int r = threadIdx.x; r < kM; r += kPairThreads)
        stats[st * kM + r] = i0 + r < ihi ? p.rows[(row0 + i0 + r) * p.H + h] : RowStat{};
    };
  };
  auto write_key = [&](int cols, Cols c, auto&& write) {
#pragma unroll
    for (int nt = 0; nt < kW / 8; ++nt) {
      const int x = c.c0 + nt * 8 + 2 * t4;
      if (x >= c.c1) continue;
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        if (j_of[rr] >= bk.s.lk) continue;
        // (key row, query head): the outputs' (key row, KV head) where the group is one head, else the partials'.
        const long long at = ((krow0 + group * 16 + g + rr * 8) * p.H + h) * cols + x;
        for (int c = 0; c < 2; ++c) write(at + c, nt, 2 * rr + c);
      }
    }
  };

  // ---- The reference's dV: sum_i P_ij dO_i ----
  {
    Sums sums;
    sums.clear();
    sweep(ilo, ihi, loader(h), [&](int st, int i0) {
      if (!pair_sees(i0)) return pw.skip();
      {
        Pieces a;
        float s[4][4];
        qk(s, kw, ld_k, half_of(q_slot(st)), ld, d, lane);
        const auto weights = [&](auto pair) {
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
              float pj[2] = {0.0f, 0.0f}, pn[2] = {0.0f, 0.0f};
#pragma unroll
              for (int c = 0; c < 2; ++c) {
                const RowStat* r = pair(nt, rr, c);
                if (!r) continue;
                float t, cc;
                pj[c] = expf(truth_logit<kSoftcap>(p, s[nt][2 * rr + c], t, cc) - r->m) / r->z;
                pn[c] = tolerance::weight_sensitivity(r->logit_sens, pj[c]);
              }
              a.set(nt, rr, sum_factor[rr], pj, pn, pj);
            }
        };
        if (rows.whole(i0)) weights(row_seeing_all(st));
        else weights(row_seeing(st, i0));
        a.publish(pw);
      }
      accumulate(sums, pw, o_slot(st), ld, vc, lane);
    });
    write_key(dv, vc, [&](long long at, int nt, int e) { write_key_truth(p, 2, at, sums, nt, e, 1.0); });
  }

  // ---- The reference's dK: scale sum_i ds_ij q_i ----
  {
    Sums sums;
    sums.clear();
    sweep(ilo, ihi, loader(h), [&](int st, int i0) {
      if (!pair_sees(i0)) return pw.skip();
      {
        Pieces a;
        float s[4][4], dp[4][4], dpa[4][4];
        qk(s, kw, ld_k, half_of(q_slot(st)), ld, d, lane);
        qk_abs(dp, dpa, vw, ld_v, half_of(o_slot(st)), ld, dv, lane);
        if (rows.whole(i0)) ds_pieces<kSoftcap>(a, p, s, dp, dpa, sum_factor, row_seeing_all(st));
        else ds_pieces<kSoftcap>(a, p, s, dp, dpa, sum_factor, row_seeing(st, i0));
        a.publish(pw);
      }
      accumulate(sums, pw, q_slot(st), ld, kc, lane);
    });
    write_key(d, kc, [&](long long at, int nt, int e) { write_key_truth(p, 1, at, sums, nt, e, p.scale_d); });
  }

  if (!p.out.baseline[1]) return;
  // K' takes K's place: every warp is done with K (the sweeps end on a barrier; this one is for the reader's sake).
  __syncthreads();
  load_rows<kPairThreads>(kr, ld_k, static_cast<const T*>(p.ks) + (krow0 * p.Hk + kh) * d, k_stride, 0, bk.count, d);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  const T* kpw = kw;
  // ---- The baseline's dK and dV: per query head in fp32, rounded (dK scaled and rounded again), summed over the
  // group (reduce_kernel, in head order) and rounded ----
  float head_k[kW / 8][4], head_v[kW / 8][4];
  clear(head_k);
  clear(head_v);
  sweep(ilo, ihi, loader(h), [&](int st, int i0) {
    if (!pair_sees(i0)) return pw.skip();
    {
      HalfFrag ap, ad;
      float s[4][4], dp[4][4];
      qk(s, kpw, ld_k, half_of(q_slot(st)), ld, d, lane);
      qk(dp, vw, ld_v, half_of(o_slot(st)), ld, dv, lane);
      if (rows.whole(i0)) base_fragments<T, kSoftcap>(ad, &ap, p, s, dp, row_seeing_all(st));
      else base_fragments<T, kSoftcap>(ad, &ap, p, s, dp, row_seeing(st, i0));
      pw.publish(0, ap);
      pw.publish(1, ad);
      pw.sync();
    }
    accumulate_exact(head_v, pw, 0, o_slot(st), ld, vc, lane);
    accumulate_exact(head_k, pw, 1, q_slot(st), ld, kc, lane);
  });
  // A group of one head: its sum (from 0, as reduce_kernel's) written as the output.
  const bool direct = p.group == 1;
  write_key(d, kc, [&](long long at, int nt, int e) {
    const float k = rd_t<T>(rd_t<T>(head_k[nt][e]) * p.scale);
    if (direct) p.out.baseline[1][at] = rd_t<T>(0.0f + k);
    else p.part.base[1][at] = k;
  });
  write_key(dv, vc, [&](long long at, int nt, int e) {
    const float v = rd_t<T>(head_v[nt][e]);
    if (direct) p.out.baseline[2][at] = rd_t<T>(0.0f + v);
    else p.part.base[2][at] = v;
  });
}

// ---- Launch 6, where a group has more than one query head: dK and dV summed over the group's heads ----------------
// Every (key row, KV head, column) of dK (which 1, blockIdx.y 0) or dV (2), in the layout of the outputs. Rows no
// block wrote hold zero partials (the slot is zeroed) and give the zeros the outputs start with. The reference's value
// is summed in fp64, its sensitivity and squares in fp32 (inflated after, as write_truth does); the baseline's in fp32
// in head order, the host baseline's group sum.
template <class T>
__global__ void reduce_kernel(GradParams p, long long k_elems, long long v_elems) {
  const int which = 1 + static_cast<int>(blockIdx.y), dim = which == 1 ? p.d : p.dv;
  const long long n = which == 1 ? k_elems : v_elems;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  const double scale = which == 1 ? p.scale_d : 1.0;
  const float mag = static_cast<float>(fabs(scale));
  for (long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const long long x = o % dim, cell = o / dim, kh = cell % p.Hk, row = cell / p.Hk;
    double value = 0.0;
    float noise = 0.0f, squares = 0.0f, base = 0.0f;
    for (int h = static_cast<int>(kh) * p.group; h < (static_cast<int>(kh) + 1) * p.group; ++h) {
      const long long at = (row * p.H + h) * dim + x;
      value += static_cast<double>(p.part.value[which][at]);
      noise += p.part.noise[which][at];
      squares += p.part.squares[which][at];
      if (p.out.baseline[which]) base += p.part.base[which][at];
    }
    p.out.truth[which][o] = scale * value;
    p.out.noise[which][o] = mag * noise * kSensInflation;
    p.out.terms[which][o] = mag * tolerance::terms_magnitude(squares * kSquaresInflation);
    if (p.out.baseline[which]) p.out.baseline[which][o] = rd_t<T>(base);
  }
}

// ---- Launch 2: the copies in the dtype ------------------------------------------------------------------------
// Q, K, K' = rd(K * scale), V and dO: copy blockIdx.y of one launch.
template <class T>
struct Copies {
  static constexpr int kCount = 5;
  T* dst[kCount];
  const float* src[kCount];
  long long n[kCount];
  float mul[kCount];
};
template <class T>
__global__ void copy_kernel(Copies<T> c) {
  const int w = static_cast<int>(blockIdx.y);
  T* dst = c.dst[w];
  const float* src = c.src[w];
  const float mul = c.mul[w];
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < c.n[w]; i += step) {
    if constexpr (std::is_same_v<T, f16>) dst[i] = __float2half_rn(src[i] * mul);
    else dst[i] = __float2bfloat16_rn(src[i] * mul);
  }
}

// Sets a kernel's shared-memory cap once, to the largest layout (head dims of 128) or the device's limit.
template <class Kernel>
void launch(Kernel kernel, int bytes, int most, unsigned gx, unsigned gy, const GradParams& p, const char* what) {
  if (bytes > most)
    throw std::runtime_error(std::string(what) + ": the case needs " + std::to_string(bytes) +
                             " bytes of shared memory, the device allows " + std::to_string(most));
  kernel<<<dim3(gx, gy), kPairThreads, bytes, harness_stream()>>>(p);
  check_last(what);
}
int smem_cap(const void* kernel, int wanted) {
  int device = 0, limit = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  const int most = std::min(limit, wanted);
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most),
        "tensor-core gradient reference: shared memory size");
  return most;
}
template <bool kSoftcap, class T>
void launch_gradients(const GradParams& p, unsigned q_tiles, unsigned k_tiles, long long k_elems, long long v_elems) {
  static const int dq_most = smem_cap(reinterpret_cast<const void*>(dq_kernel<kSoftcap, T>),
                                      dq_smem_bytes(kMaxGradDim, kMaxGradDim));
  static const int dkdv_most = smem_cap(reinterpret_cast<const void*>(dkdv_kernel<kSoftcap, T>),
                                        dkdv_smem_bytes(kMaxGradDim, kMaxGradDim));
  if (q_tiles > 0)
    launch(dq_kernel<kSoftcap, T>, dq_smem_bytes(p.d, p.dv), dq_most, q_tiles, static_cast<unsigned>(p.H), p,
           "tensor-core gradient reference: dQ");
  if (k_tiles > 0)
    launch(dkdv_kernel<kSoftcap, T>, dkdv_smem_bytes(p.d, p.dv), dkdv_most, k_tiles, static_cast<unsigned>(p.H), p,
           "tensor-core gradient reference: dK and dV");
  const long long most = std::max(k_elems, v_elems);
  if (k_tiles > 0 && p.group > 1 && most > 0) {
    const dim3 grid(static_cast<unsigned>(std::min<long long>((most + 255) / 256, 4096)), 2);
    reduce_kernel<T><<<grid, 256, 0, harness_stream()>>>(p, k_elems, v_elems);
    check_last("tensor-core gradient reference: the groups' sums");
  }
}

// The partial sums of dK and dV per query head (group > 1), zeroed, in one slot.
KeyPartials key_partials(const std::string& slot, long long k_elems, long long v_elems, int group) {
  KeyPartials part{};
  if (group <= 1) return part;
  const auto nk = static_cast<std::size_t>(k_elems) * group, nv = static_cast<std::size_t>(v_elems) * group;
  float* all = slot_of<float>(slot + ".key_partials", 4 * (nk + nv));
  check(cudaMemsetAsync(all, 0, 4 * (nk + nv) * sizeof(float), harness_stream()), "cudaMemsetAsync");
  float* at = all;
  for (float** array : {&part.value[1], &part.noise[1], &part.squares[1], &part.base[1]}) {
    *array = at;
    at += nk;
  }
  for (float** array : {&part.value[2], &part.noise[2], &part.squares[2], &part.base[2]}) {
    *array = at;
    at += nv;
  }
  return part;
}
// The copies in the dtype (launch 2), then launches 4 to 6.
template <class T>
void copy_and_launch(GradParams& p, const DeviceInputs& in, const std::string& slot, long long q_elems,
                     long long k_elems, long long v_elems, long long o_elems, unsigned q_tiles, unsigned k_tiles) {
  Copies<T> c{};
  const std::tuple<const char*, const float*, long long, float> what[Copies<T>::kCount] = {
      {".q", in.q, q_elems, 1.0f},
      {".k", in.k, k_elems, 1.0f},
      {".ks", in.k, k_elems, p.scale},
      {".v", in.v, v_elems, 1.0f},
      {".dout", in.dout, o_elems, 1.0f}};
  long long most = 0;
  for (int w = 0; w < Copies<T>::kCount; ++w) {
    const auto& [name, src, n, mul] = what[w];
    c.dst[w] = slot_of<T>(slot + name, static_cast<std::size_t>(n));
    c.src[w] = src;
    c.n[w] = n;
    c.mul[w] = mul;
    most = std::max(most, n);
  }
  if (most > 0) {
    const dim3 grid(static_cast<unsigned>(std::min<long long>((most + 255) / 256, 4096)), Copies<T>::kCount);
    copy_kernel<T><<<grid, 256, 0, harness_stream()>>>(c);
    check_last("tensor-core gradient reference: copies");
  }
  p.q = c.dst[0];
  p.k = c.dst[1];
  p.ks = c.dst[2];
  p.v = c.dst[3];
  p.dout = c.dst[4];
  p.part = key_partials(slot, k_elems, v_elems, p.group);
  if (p.cap > 0.0f) launch_gradients<true, T>(p, q_tiles, k_tiles, k_elems, v_elems);
  else launch_gradients<false, T>(p, q_tiles, k_tiles, k_elems, v_elems);
}

}  // namespace

std::string tc_gradient_unsupported_reason(const DeviceCase& dc) {
  const char* env = std::getenv("FLASHCHECK_REFERENCE");
  if (env && std::strcmp(env, "simt") == 0) return "FLASHCHECK_REFERENCE=simt";
  const KernelCase& c = dc.kcase();
  if (!c.backward() || c.kv_storage != KvStorage::kPacked || c.kv_cache) return "not a backward case with packed K/V";
  if (!dc.inputs().dout) return "the case has no dO on the device";
  if (c.head_dim > kMaxGradDim || c.v_head_dim > kMaxGradDim)
    return "head dims above 128 do not fit the gradient kernels' tiles and registers";
  // The forward's kernel gives the rows' statistics: its conditions (bf16 or fp16, head dims of multiples of 16,
  // finite inputs) are this one's.
  return tc_unsupported_reason(dc);
}

void tc_reference_gradients(const DeviceCase& dc, const TcGradientOutputs& out, const std::string& slot) {
  const KernelCase& c = dc.kcase();
  const CaseGeometry& g = dc.geometry();
  const MaskRule rule = mask_rule(c);
  const long long H = c.heads, d = c.head_dim, dv = c.v_head_dim, Hk = c.kv_heads;
  const long long cells = g.q_rows * H;

  // 1. The forward: the rows' statistics and the fp32 output with its sensitivity.
  DeviceResult fwd;
  fwd.out = slot_of<float>(slot + ".o", static_cast<std::size_t>(cells * dv));
  fwd.noise = slot_of<float>(slot + ".o_noise", static_cast<std::size_t>(cells * dv));
  fwd.lse = slot_of<float>(slot + ".lse", static_cast<std::size_t>(cells));
  fwd.lse_noise = slot_of<float>(slot + ".lse_noise", static_cast<std::size_t>(cells));
  fwd.empty = slot_of<std::uint8_t>(slot + ".empty", static_cast<std::size_t>(cells));
  auto* fwd_stats = slot_of<TcRowStats>(slot + ".fwd_stats", static_cast<std::size_t>(cells));
  tc_reference_and_baseline(dc, EmptyRow::kZero, fwd, DeviceResult{}, fwd_stats);

  const DeviceInputs& in = dc.inputs();
  GradParams p{};
  p.seqs = in.seqs;
  p.B = static_cast<int>(c.seqs.size());
  p.H = static_cast<int>(H);
  p.Hk = static_cast<int>(Hk);
  p.group = static_cast<int>(c.group());
  p.d = static_cast<int>(d);
  p.dv = static_cast<int>(dv);
  p.scale = static_cast<float>(c.softmax_scale());
  p.scale_d = c.softmax_scale();
  p.cap = static_cast<float>(c.softcap);
  p.win_left = static_cast<int>(rule.left);
  p.win_right = static_cast<int>(rule.right);
  p.out = out;

  // 3. The rows' statistics, one warp per (row, head) of the sequences.
  p.rows = slot_of<RowStat>(slot + ".rows", static_cast<std::size_t>(cells));
  RowsParams rp{fwd_stats, fwd.out, fwd.noise, in.dout, g.total_q * H, p.dv, p.rows};
  if (rp.cells > 0) {
    rows_kernel<<<static_cast<unsigned>((rp.cells * 32 + 255) / 256), 256, 0, harness_stream()>>>(rp);
    check_last("tensor-core gradient reference: rows");
  }

  // 4 and 5.
  long long q_tiles = 0, k_tiles = 0;
  for (const SeqGeometry& s : g.seqs) {
    q_tiles += (s.lq + kM - 1) / kM;
    k_tiles += (s.lk + kN - 1) / kN;
  }
  if (q_tiles > INT_MAX || k_tiles > INT_MAX || H > 65535)
    throw std::invalid_argument("tensor-core gradient reference: grid too large");
  // 2 (the copies in the dtype), 4 and 5.
  const auto qt = static_cast<unsigned>(q_tiles), kt = static_cast<unsigned>(k_tiles);
  const long long kv = g.kv_rows * Hk;
  if (c.dtype == DType::kF16) copy_and_launch<f16>(p, in, slot, cells * d, kv * d, kv * dv, cells * dv, qt, kt);
  else copy_and_launch<bf16>(p, in, slot, cells * d, kv * d, kv * dv, cells * dv, qt, kt);
}

}  // namespace flashcheck::device
