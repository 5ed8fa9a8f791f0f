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

#include <string>

#include "core/case_tensors.h"
#include "core/defined_memory.h"
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

// ---- Gradients (backward cases) -----------------------------------------------------------------------------
// dQ, dK and dV, each judged on its defined rows (core/defined_memory.h) in the form above: the max check against
// k_max times the baseline's max error plus the floor (with softcap, + tolerance::kGradSoftcapAtol), the mean
// check, NaN failing. The Comparison's `tensor` names the gradient ("dq", "dk", "dv"); its worst element is
// (sequence, head, row within the sequence's rows, channel), for dK/dV the key row and the KV head.
struct GradientComparisons {
  Comparison dq, dk, dv;
  // The failing one (the first), else the one that used most of its bound.
  const Comparison& decisive() const;
};
// `zero_unused_keys`: the kernel's backward promises zeros on the allocated keys outside the sequence (then those
// rows are compared too; else they are not defined).
GradientComparisons compare_gradients(const KernelCase& c, const GradientResult& got, const GradientResult& truth,
                                      const GradientResult& baseline, bool zero_unused_keys);

// Two kernels' gradients for one case (a metamorphic pair, `a` the reference run), each within `bounds` (the
// max bounds of compare_gradients for the case); NaN/Inf in either fails.
GradientComparisons compare_gradient_pair(const KernelCase& c, const GradientResult& a, const GradientResult& b,
                                          const GradientComparisons& bounds, bool zero_unused_keys);

// The failure of the first failing gradient, prefixed with its name ("" when all pass).
std::string failure_reason(const GradientComparisons& g);

// One gradient tensor in any layout of [rows, heads, dim] whose defined rows the caller lists (one span per
// sequence or batch row: a worst element's b is the span, its i the row within it).
struct GradientTensor {
  std::string name;
  std::vector<RowSpan> rows;
  std::int64_t heads = 0, dim = 0;
};
// The gradient rule on one tensor, with the baseline's multiplier `k` (k_max of the case for kernels, the
// integration rule's for transformers' paths). `mean_cells` 0 leaves out the mean check; otherwise it is the most
// independent (row, head) cells the mean can settle over: dK's and dV's errors share each query row's D and LSE,
// so their mean settles no faster than over the query cells (mean_cells_of). compare_gradients is this on a
// KernelCase's three gradients.
Comparison compare_gradient(DType dt, bool softcap, const GradientTensor& t, const std::vector<double>& got,
                            const std::vector<double>& truth, const std::vector<double>& baseline,
                            const std::vector<double>& noise, const std::vector<double>& terms, double k,
                            std::int64_t mean_cells);
// The (row, head) cells of a gradient with content: a nonzero truth or terms. A key no query sees (left padding,
// past seqused_k) has none; it is held to zero by the max check and left out of the mean's sample.
std::int64_t mean_cells_of(const GradientTensor& t, const std::vector<double>& truth, const std::vector<double>& terms);

// The spacing of the dtype at |truth| + 0.3 (tolerance::spacing), from which the floors are built.
double rounding_floor(DType dt, double truth);

}  // namespace flashcheck
