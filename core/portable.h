// Code shared verbatim by host and device translation units: it must give the same bits under g++ and
// nvcc, so it avoids libm transcendental functions and states every rounding explicitly.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FC_HD __host__ __device__
#else
#define FC_HD
#endif

namespace flashcheck::portable {

// Double-precision multiply and add that nvcc may not contract into a fused multiply-add: the host
// compiler does not contract under -std=c++20, so both sides round every operation.
FC_HD inline double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
FC_HD inline double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

}  // namespace flashcheck::portable
