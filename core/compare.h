// The comparators behind the tolerance rule (flash-attention's form: hopper/test_flash_attn.py). The
// rule's constants and formulas live in core/tolerance.h; this is where they are applied to a case.
//
//   pass  iff  max|out - truth| <= k_max * max|baseline - truth| + floor
//         and  mean|out - truth| <= k_mean * mean|baseline - truth| + mean floor
//         and  no NaN/Inf in the output where the truth is finite
//         and  the bounds are finite (an infinite one would pass anything)
//         and  every empty row equals the declared convention exactly
//         and  (when the kernel returns it) the LSE passes the same form on non-empty rows
// with the multipliers, floors and sensitivities of core/tolerance.h (docs/TOLERANCE.md explains them);
// errors are taken on valid, non-empty rows only. Every check is phrased so that a NaN fails it.
#pragma once

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "core/tolerance.h"
#include "core/verdict.h"

namespace flashcheck {

struct ToleranceRule {
  double k_max = tolerance::kMax;
  double k_mean = tolerance::kMean;
  double k_lse = tolerance::kLse;
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

// The spacing of the dtype at |truth| + 0.3 (tolerance::spacing), from which the floors are built.
double rounding_floor(DType dt, double truth);

}  // namespace flashcheck
