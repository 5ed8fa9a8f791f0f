// The tolerance rule (flash-attn FA3 form, research/kernels.md §8.8) and the comparators behind it.
//
//   pass  iff  max|out - truth| <= k * max|baseline - truth| + 2 * max|(truth + 0.3 - 0.3) - truth|_dtype
//         and  mean|out - truth| <= 1.5 * mean|baseline - truth| + mean floor
//         and  no NaN/Inf in the output where the truth is finite
//         and  every empty row equals the declared convention exactly
//         and  (when the kernel returns it) the LSE passes the same form on non-empty rows
// with k = 2, or 3 with softcap; errors are taken on valid, non-empty rows only. Every check is phrased
// so that a NaN fails it.
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

// Pass/fail decision of a comparison, with the reason of a failure ("" when it passes).
std::string failure_reason(const Comparison& cmp);

// The floor term for one value: |(t + 0.3 - 0.3) - t| with t and every step rounded to the dtype.
double rounding_floor(DType dt, double truth);

}  // namespace flashcheck
