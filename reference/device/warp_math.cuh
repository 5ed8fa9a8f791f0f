// Small helpers the reference kernels share: a warp's sum, rounding to a case's dtype, and the launch by head dim.
// CUDA only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dtype.h"

namespace flashcheck::device {

// A butterfly over the 32 lanes: every lane ends with the same bits (a + b == b + a), so lanes agree on branches.
template <class T>
__device__ inline T warp_sum(T x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// x rounded to the dtype (round to nearest even), as a float.
__device__ inline float round_dt(DType t, float x) {
  if (t == DType::kBF16) return __bfloat162float(__float2bfloat16_rn(x));
  if (t == DType::kF16) return __half2float(__float2half_rn(x));
  return x;
}

// Calls Launch<kT>::run(p) with the smallest kT in {1, 2, 4, 8, 16} such that 32 kT >= dim: the values each lane
// owns along a head dim (up to 512), so that the common head dims get fewer registers and no dead loops.
template <template <int> class Launch, class P>
void launch_for_head_dim(int dim, const P& p) {
  const int t = (dim + 31) / 32;
  if (t <= 1) Launch<1>::run(p);
  else if (t <= 2) Launch<2>::run(p);
  else if (t <= 4) Launch<4>::run(p);
  else if (t <= 8) Launch<8>::run(p);
  else Launch<16>::run(p);
}

}  // namespace flashcheck::device
