// The tolerance rule (flash-attn FA3 form, research/kernels.md §8.8) and the comparators behind it.
//
//   pass  iff  max|out - truth| <= k * max|baseline - truth| + floor
//         and  mean|out - truth| <= 1.5 * mean|baseline - truth| + mean floor
//         and  no NaN/Inf in the output where the truth is finite
//         and  every empty row equals the declared convention exactly
//         and  (when the kernel returns it) the LSE passes the same form on non-empty rows
// with k = 2, or 3 with softcap; errors are taken on valid, non-empty rows only. The floor is the larger
// of FA3's dtype term 2 * ulp_dtype(|truth| + 0.3) and an fp32 noise term 8 u sensitivity
// (sensitivity from the reference, docs/TOLERANCE.md): the FA3 term alone presumes a baseline far less
// accurate than the kernel, which holds in fp16/bf16 and not in fp32. Every check is phrased so that a
// NaN fails it.
#pragma once

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "core/verdict.h"

namespace flashcheck {

struct ToleranceRule {
  double k_max = 2.0;
  double k_mean = 1.5;
  double k_lse = 2.0;
};
ToleranceRule tolerance_for(const KernelCase& c);

// Compares kernel output with the fp64 truth and the low-precision baseline (both from the reference,
// computed with the kernel's empty-row convention). Checks the LSE when `out.lse` is non-empty.
Comparison compare(const KernelCase& c, const AttentionResult& out, const AttentionResult& truth,
                   const AttentionResult& baseline, EmptyRow convention, const ToleranceRule& rule);

// Two kernel outputs for the same case (a metamorphic pair, `a` the reference run): on valid non-empty
// rows |a - b| <= bound, on empty rows (per `empty`) bitwise equal values, and NaN/Inf in either fails.
// The Comparison reports b as `out` and a as `truth`; base_max is 0 and `bound` is the bound given.
Comparison compare_outputs(const KernelCase& c, const AttentionResult& a, const AttentionResult& b,
                           const std::vector<std::uint8_t>& empty, double bound);

// The max-error bound of the tolerance rule for a case: k * max|baseline - truth| + floor.
double tolerance_bound(const KernelCase& c, const AttentionResult& truth, const AttentionResult& baseline,
                       EmptyRow convention);

// Pass/fail decision of a comparison, with the reason of a failure ("" when it passes).
std::string failure_reason(const Comparison& cmp);

// The floor term for one value: the spacing of the dtype at |t| + 0.3, what FA3's max over a tensor of
// |(t + 0.3 - 0.3) - t| (every step in the dtype) comes to.
double rounding_floor(DType dt, double truth);

}  // namespace flashcheck
