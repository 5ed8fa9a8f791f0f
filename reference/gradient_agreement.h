// Whether two computations of a backward case's reference gradients agree: the device gradient reference
// (reference/device/gradients.h) against the fp64 host one (reference/host/gradients.h). Plain host code, so that the
// judge is tested without a GPU (gradient_agreement_test.cc); the device-gradient-reference property and the GPU test
// both judge by it.
#pragma once

#include <string>

#include "core/case_tensors.h"
#include "core/kernel_case.h"

namespace flashcheck::reference {

// How `other` differs from the host's `truth` (with sensitivities and terms) and `base` beyond what the two
// computations may, or "" when they agree:
//   the fp64 values within 2^-36 of their sensitivity plus magnitude (the two differ only in the order of their sums);
//   the sensitivities and terms within 2^-24 relative;
//   the baselines (fp32 sums of dtype-rounded values) by what the rule takes from them: each gradient's largest and
//   mean error against the truth within a factor of two, or both below the largest floor of the rule's max check
//   over its elements (core/tolerance.h max_floor), and the same count of NaN.
// A NaN must face a NaN, an infinity the same infinity.
std::string gradient_disagreement(const KernelCase& c, const GradientResult& truth, const GradientResult& base,
                                  const GradientResult& other_truth, const GradientResult& other_base);

}  // namespace flashcheck::reference
