// Small device helpers the reference kernels share: a warp's sum and rounding to a case's dtype. CUDA only.
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

}  // namespace flashcheck::device
