// The tensor-core building blocks the reference kernels share (attention_tc.cu, gradients_tc.cu): mma.sync
// m16n8k16 with bf16 or fp16 operands and fp32 accumulators, ldmatrix, cp.async, tiles of 64 rows in shared memory and
// the double-buffered sweep over them. attention_tc.cu's head explains the accuracy of the products. An element type
// T is the case's dtype, bf16 or f16: the inputs are exact in it, and so are the products of two of them in fp32.
// CUDA only, sm_80+.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <type_traits>

namespace flashcheck::device::tc {

using bf16 = __nv_bfloat16;
using f16 = __half;

constexpr int kM = 64;  // query rows per block, 16 per warp
constexpr int kN = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
// bf16 of padding per shared-memory row: with head dims that are multiples of 16, every row stride is an
// odd multiple of 16 bytes, so the 8 rows an ldmatrix reads fall in distinct banks.
constexpr int kPad = 8;

constexpr unsigned kAbsMask = 0x7fff7fffu;  // clears the signs of a bf16 (or fp16) pair
static_assert(kM == kN, "one tile loader serves Q and the key tiles");

// ---- PTX wrappers (sm_80+) -------------------------------------------------------------------------
__device__ inline unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
// 16 bytes from global to shared memory (dst a shared-space address); with `valid` false, 16 zero bytes (src is not
// read).
__device__ inline void cp_async16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ inline void cp_async_wait_all_but_one() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }
__device__ inline void ldsm_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ inline void ldsm_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// c += a.b for one 16 x 8 tile, k = 16.
__device__ inline void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The same with fp16 operands.
__device__ inline void mma_f16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <class T>
__device__ inline void mma_t(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<T, f16>) mma_f16(c, a, b0, b1);
  else mma(c, a, b0, b1);
}
__device__ inline unsigned pack(bf16 lo, bf16 hi) {
  return static_cast<unsigned>(__bfloat16_as_ushort(lo)) | (static_cast<unsigned>(__bfloat16_as_ushort(hi)) << 16);
}
__device__ inline float rd(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
// x rounded to T (round to nearest even), as a float, and a pair of floats as a T pair.
template <class T>
__device__ inline float rd_t(float x) {
  if constexpr (std::is_same_v<T, f16>) return __half2float(__float2half_rn(x));
  else return rd(x);
}
// Both conversions in one instruction (F2FP), as each alone would round.
template <class T>
__device__ inline unsigned pack_t(float lo, float hi) {
  unsigned r;
  if constexpr (std::is_same_v<T, f16>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    memcpy(&r, &h, sizeof r);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&r, &h, sizeof r);
  }
  return r;
}
// A pair of floats as three bf16 pairs hi + mid + lo, each difference exact in fp32: each value to 2^-25 relative.
struct Split3 {
  unsigned hi, mid, lo;
};
__device__ inline Split3 split3(float x0, float x1) {
  const unsigned h = pack_t<bf16>(x0, x1);
  const float r0 = x0 - __uint_as_float(h << 16), r1 = x1 - __uint_as_float(h & 0xffff0000u);
  const unsigned m = pack_t<bf16>(r0, r1);
  return {h, m, pack_t<bf16>(r0 - __uint_as_float(m << 16), r1 - __uint_as_float(m & 0xffff0000u))};
}
// A T pair (an operand register) as two floats.
template <class T>
__device__ inline float2 unpack_t(unsigned x) {
  const auto lo = static_cast<unsigned short>(x & 0xffffu), hi = static_cast<unsigned short>(x >> 16);
  if constexpr (std::is_same_v<T, f16>) return make_float2(__half2float(__ushort_as_half(lo)), __half2float(__ushort_as_half(hi)));
  else return make_float2(__bfloat162float(__ushort_as_bfloat16(lo)), __bfloat162float(__ushort_as_bfloat16(hi)));
}
// A pair of fp16 values as bf16 pairs hi + lo, exactly: hi holds 8 of an fp16 value's 11 significant bits and lo the
// rest, and bf16's range holds fp16's subnormals. The products of bf16 pieces with an fp16 operand go through this.
__device__ inline void split_f16x2(unsigned x, unsigned& hi, unsigned& lo) {
  const float2 f = unpack_t<f16>(x);
  const bf16 h0 = __float2bfloat16_rn(f.x), h1 = __float2bfloat16_rn(f.y);
  hi = pack(h0, h1);
  lo = pack(__float2bfloat16_rn(f.x - __bfloat162float(h0)), __float2bfloat16_rn(f.y - __bfloat162float(h1)));
}


// A kernel parameter held in a register, for a value that every element of a tile uses: left alone, the compiler
// reloaded such values from the constant bank next to each use, and the use waited for the load (Nsight Compute on an
// H100, 2026-12-07: the logits' scale, 8 % of the forward reference's samples in pass 2). The shuffle is what the
// compiler cannot rematerialize. All lanes of the warp call it, converged.
template <class V>
__device__ inline V in_register(V v) {
  return __shfl_sync(0xffffffffu, threadIdx.x % 32 == 0 ? v : V{}, 0);
}

// The larger of a and b, NaN if either is: one instruction (sm_80+) where the select took three or four, at two of
// pass 1's logits per element.
__device__ inline float nan_max(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// Combines (m, z) of a log-sum-exp: NaN propagates, -inf (no key yet) contributes nothing. Symmetric in
// its two operands, so the lanes of a quad that merge each other's halves end with the same bits.
__device__ inline void lse_merge(float& m, float& z, float m2, float z2) {
  const float mn = nan_max(m, m2);
  if (mn == -INFINITY) return;
  const float a = m == -INFINITY ? 0.0f : z * expf(m - mn);
  const float b = m2 == -INFINITY ? 0.0f : z2 * expf(m2 - mn);
  m = mn;
  z = a + b;
}
__device__ inline void quad_merge(float& m, float& z) {
  for (int off = 1; off <= 2; off *= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off), z2 = __shfl_xor_sync(0xffffffffu, z, off);
    lse_merge(m, z, m2, z2);
  }
}

// ---- Tiles -----------------------------------------------------------------------------------------
constexpr int kMaxCols = 256;  // the widest row a tile holds (the kernels' largest head dim)
// Rows j0 .. j0 + 63 of a 16-bit matrix (row stride `stride`), `cols` wide (a multiple of 8, at most kMaxCols), into
// shared memory (leading dimension ld); rows at or past `end` become zeros, so that no key outside the range brings
// garbage into an MMA. kBlockThreads: the block's threads, all of which take part. Thread t copies the 16 bytes at
// columns 8 (t % 8) + 64 k of rows t / 8 + i kBlockThreads / 8, unrolled and predicated, with one shared address
// taken per call and both addresses stepped: Nsight Compute on an H100 (2026-12-07) found the looped version, which
// converted a generic address per copy and branched on each thread's own count of copies per row, in a fifth of the
// forward reference's issue slots.
template <int kBlockThreads = kThreads, class T>
__device__ inline void load_rows(T* dst, int ld, const T* src, long long stride, int j0, int end, int cols) {
  constexpr int kStep = kBlockThreads / 8;  // rows per step of the block
  static_assert(kN % kStep == 0, "whole steps per tile");
  const int r0 = threadIdx.x / 8, c0 = threadIdx.x % 8 * 8;
  unsigned s = smem_addr(dst + r0 * ld + c0);
  const T* g = src + (j0 + r0) * stride + c0;
  const unsigned s_step = kStep * ld * static_cast<unsigned>(sizeof(T));
  const long long g_step = kStep * stride;
#pragma unroll
  for (int i = 0; i < kN / kStep; ++i, s += s_step, g += g_step) {
    const bool valid = j0 + r0 + i * kStep < end;
    const T* row = valid ? g : src;  // a readable address; where !valid nothing is read and zeros are written
#pragma unroll
    for (int k = 0; k < kMaxCols / 64; ++k)
      if (c0 + 64 * k < cols) cp_async16(s + 128 * k, row + 64 * k, valid);
  }
}

// A warp's 16 x 64 logit tile is float s[8][4]: s[nt] covers keys nt*8 .. nt*8 + 7 of the tile, and in the
// m16n8 accumulator layout a lane holds rows g, g + 8 and keys 2t, 2t + 1 (g = lane / 4, t = lane % 4). A warp that
// takes half a tile (gradients_tc.cu's warp pairs) holds s[4][4], 32 keys.
template <int NT>
__device__ inline void zero(float (&s)[NT][4]) {
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
}
// s = Q.K^T of this warp's rows (qw) against the first 8 NT keys of a key tile kt.
template <int NT, class T>
__device__ inline void qk(float (&s)[NT][4], const T* qw, int ld_q, const T* kt, int ld, int d, int lane) {
  zero(s);
  for (int k0 = 0; k0 < d; k0 += 16) {
    unsigned a[4];
    ldsm_x4(a, qw + (lane % 16) * ld_q + k0 + (lane / 16) * 8);
#pragma unroll
    for (int pr = 0; pr < NT / 2; ++pr) {
      unsigned b[4];
      ldsm_x4(b, kt + (pr * 16 + lane % 8 + (lane / 16) * 8) * ld + k0 + ((lane / 8) % 2) * 8);
      mma_t<T>(s[2 * pr], a, b[0], b[1]);
      mma_t<T>(s[2 * pr + 1], a, b[2], b[3]);
    }
  }
}

// The V operand of k-step kk (keys kk*16 ..) for output columns cp*16 .. cp*16 + 15 of a tile: v[0] and v[1]
// for the first half of those columns, v[2] and v[3] for the second.
__device__ inline void load_v(unsigned (&v)[4], const void* vt_, int ld, int kk, int cp, int lane) {
  const auto* vt = static_cast<const unsigned short*>(vt_);
  ldsm_x4_trans(v, vt + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * ld + cp * 16 + (lane / 16) * 8);
}

// A value in three bf16 pieces (hi, mid, lo: the A operands of one k-step) times a B operand b of type T, for two
// n-tiles: n-tile 0 takes b[0], b[1] and n-tile 1 takes b[2], b[3], each piece in turn; acc(n, k) is the accumulator of
// n-tile n for piece k (0 hi, 1 mid, 2 lo). The pieces are bf16; an fp16 B goes in as two exact bf16 pieces
// (split_f16x2), each meeting every piece, and b is left holding its hi piece, which alone serves a sensitivity (2^-9
// relative).
template <class T, class Acc>
__device__ inline void mma_pieces_into(Acc acc, const unsigned (&hi)[4], const unsigned (&mid)[4],
                                       const unsigned (&lo)[4], unsigned (&b)[4]) {
  auto three = [&](const unsigned (&x)[4]) {  // every piece with x, n-tile 0's then n-tile 1's
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      mma(acc(n, 0), hi, x[2 * n], x[2 * n + 1]);
      mma(acc(n, 1), mid, x[2 * n], x[2 * n + 1]);
      mma(acc(n, 2), lo, x[2 * n], x[2 * n + 1]);
    }
  };
  if constexpr (std::is_same_v<T, f16>) {
    unsigned bl[4];
    for (int i = 0; i < 4; ++i) split_f16x2(b[i], b[i], bl[i]);
    three(b);
    three(bl);
  } else {
    three(b);
  }
}
// Every piece into one accumulator per n-tile (t0, t1): a chain three times as deep as each piece's.
template <class T>
__device__ inline void mma_pieces(float (&t0)[4], float (&t1)[4], const unsigned (&hi)[4], const unsigned (&mid)[4],
                                  const unsigned (&lo)[4], unsigned (&b)[4]) {
  mma_pieces_into<T>([&](int n, int) -> float (&)[4] { return n ? t1 : t0; }, hi, mid, lo, b);
}
// Each piece into its own accumulator (t0[k], t1[k]): three chains whose latencies overlap.
template <class T>
__device__ inline void mma_pieces(float (&t0)[3][4], float (&t1)[3][4], const unsigned (&hi)[4],
                                  const unsigned (&mid)[4], const unsigned (&lo)[4], unsigned (&b)[4]) {
  mma_pieces_into<T>([&](int n, int k) -> float (&)[4] { return n ? t1[k] : t0[k]; }, hi, mid, lo, b);
}

// ---- Warp pairs ----------------------------------------------------------------------------------------
// A block of eight warps in pairs: warp w takes the 16 rows of group w % 4 and half w / 4 of each tile's 64 terms (the
// keys of a tile, or its query rows). It computes the element-wise part (logits, weights, coefficients) of its 32
// terms only, publishes them as the A operands of its two k-steps in shared memory and, after the pair's barrier,
// reads the tile's four k-steps for its products with the whole tile, of which it accumulates one half of the output
// columns. Where a pass over 128 output columns took two sweeps of four warps, each redoing the element-wise work,
// it takes one: the element-wise work is done once per tile.
constexpr int kPairWarps = 2 * kWarps;
constexpr int kPairThreads = 32 * kPairWarps;
constexpr int kHalf = kN / 2;     // a warp's terms of a tile
using HalfFrag = unsigned[2][4];  // the A operands of its two k-steps (16 terms each)
// kSlots: the operands a warp publishes per tile, at most.
template <int kSlots>
struct PairWarp {
  static constexpr int kSwapBytes = kPairWarps * kSlots * 2 * 32 * static_cast<int>(sizeof(uint4));
  uint4* swap;  // kSwapBytes of shared memory, 16-byte aligned
  int warp, group, half, lane;
  __device__ explicit PairWarp(void* smem)
      : swap(static_cast<uint4*>(smem)), warp(threadIdx.x / 32), group(warp % kWarps), half(warp / kWarps),
        lane(threadIdx.x % 32) {}
  // A lane's 16 bytes of k-step ks of warp w's half of an operand: each lane's own, no bank conflicts.
  __device__ uint4& at(int w, int slot, int ks) const { return swap[((w * kSlots + slot) * 2 + ks) * 32 + lane]; }
  __device__ void publish(int slot, const HalfFrag& f) const {
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) at(warp, slot, ks) = make_uint4(f[ks][0], f[ks][1], f[ks][2], f[ks][3]);
  }
  // The pair's barrier (ids 1 .. 4; __syncthreads has 0). Both warps of a pair must reach it: they take the same
  // branches. The sweep's block barrier after each tile keeps the next tile's publishing from overwriting what the
  // partner still reads.
  __device__ void sync() const { asm volatile("bar.sync %0, %1;\n" ::"r"(1 + group), "r"(64) : "memory"); }
  // A tile the pair does not see, in a sweep whose tiles pass the pair's barrier: it passes it too, so that every pair
  // passes its barrier once per tile. The sweep's block barriers already order every access; but compute-sanitizer's
  // racecheck (2025.3.1) reports hazards between a tile's reads and the next tile's copies where pairs pass their
  // barriers on different tiles, even in a kernel as plain as lab/racecheck_pair_barrier.cu.
  __device__ void skip() const { sync(); }
  // K-step kk (terms 16 kk ..) of the tile's operand: from the half that computed it.
  __device__ void fetch(int slot, int kk, unsigned (&a)[4]) const {
    const uint4 x = at(group + kWarps * (kk / 2), slot, kk % 2);
    a[0] = x.x;
    a[1] = x.y;
    a[2] = x.z;
    a[3] = x.w;
  }
  // Outside the sweeps: this lane's 16 bytes and its partner lane's, the first half's in `first`. Both warps of the
  // pair get the same two values, so what they compute from them in the same order has the same bits.
  __device__ void exchange(uint4 mine, uint4& first, uint4& second) const {
    at(warp, 0, 0) = mine;
    sync();
    first = at(group, 0, 0);
    second = at(group + kWarps, 0, 0);
    sync();  // both have read before either writes again
  }
};

// The pipeline of one pass over the key tiles [jlo, jhi): load(stage, j0) issues a tile's copies and
// body(stage, j0) consumes it while the next tile is in flight.
template <class Load, class Body>
__device__ inline void sweep(int jlo, int jhi, Load load, Body body) {
  // One call site of each: inlined twice, the tile loader was a seventh of the kernel's code.
  for (int j0 = jlo - kN, st = 1; j0 < jhi; j0 += kN, st ^= 1) {
    if (j0 + kN < jhi) load(st ^ 1, j0 + kN);
    cp_async_commit();
    if (j0 < jlo) continue;
    cp_async_wait_all_but_one();
    __syncthreads();
    body(st, j0);
    __syncthreads();
  }
}

}  // namespace flashcheck::device::tc
