// Whether two computations of a backward case's reference gradients agree: the device gradient reference
// (reference/device/gradients.h) against the fp64 host one (reference/host/gradients.h). Plain host code, so that the
// judge is tested without a GPU (gradient_agreement_test.cc); the device-gradient-reference property and the GPU test
// both judge by it.
#pragma once

#include <string>

#include "core/case_tensors.h"
#include "core/kernel_case.h"

namespace flashcheck::reference {

// How accurate `other` claims to be: fp64 (the SIMT kernels, reference/device/gradients.cu) or fp32 (the tensor-core
// kernels, reference/device/gradients_tc.cu).
enum class GradientAccuracy { kFp64, kFp32 };

// How `other` differs from the host's `truth` (with sensitivities and terms) and `base` beyond what the two
// computations may, or "" when they agree:
//   fp64: the values within 2^-36 of their sensitivity plus magnitude (the two differ only in the order of their
//   sums), the sensitivities and terms within 2^-24 relative;
//   fp32: the values within u (8 sensitivity + magnitude), u = 2^-24 (the bound the forward's tensor-core reference
//   meets, docs/TOLERANCE.md), the sensitivities and terms, estimates from one bf16 piece per factor, inflated,
//   within 2^-5 relative; each also within 2^-40 of its tensor's largest magnitude or of the rule's smallest floor
//   in the dtype (what falls below fp32's and bf16's range is lost);
//   the baselines (fp32 sums of dtype-rounded values) by what the rule takes from them: each gradient's largest and
//   mean error against the truth within a factor of two, or both below the largest floor of the rule's max check
//   over its elements (core/tolerance.h max_floor), and the same count of NaN.
// A NaN must face a NaN, an infinity the same infinity.
std::string gradient_disagreement(const KernelCase& c, const GradientResult& truth, const GradientResult& base,
                                  const GradientResult& other_truth, const GradientResult& other_base,
                                  GradientAccuracy accuracy = GradientAccuracy::kFp64);

}  // namespace flashcheck::reference
