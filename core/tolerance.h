// The tolerance rule, in one place: its multipliers, its floors and the fp32 rounding sensitivity the
// references attach to every value. The host comparator (core/compare.cc), the device comparator
// (reference/device/compare.cu), the integration property, the fp64 references (reference/host) and
// the fp32 device reference (reference/device/attention.cu) all take them from here, so that a change
// of the rule is a change of one line. docs/TOLERANCE.md explains the rule and its calibration.
//
// Included by host C++20 and by CUDA C++17 device code: plain scalars, no library types. Each formula
// is a template on the floating type because the device evaluates it in float and the host in double;
// the order of operations is written out and is the same for both.
#pragma once

#include <math.h>  // the C names (fabs, fabsf, sqrtf, frexpf, ...) that host and device code share

#include "core/portable.h"

namespace flashcheck::tolerance {

// ---- Multipliers of the baseline's error -------------------------------------------------------------
// flash-attention's tests judge a kernel by its error relative to that of a low-precision reference
// computed from the same inputs (hopper/test_flash_attn.py: `rtol = 2 if softcap == 0.0 else 3` on the
// max error; test_flash_attn_kvcache: `mult_mean = 1.5` on the mean error). Softcap adds a tanh whose
// rounding the baseline and the kernel place differently, hence the looser max multiplier.
inline constexpr double kMax = 2.0;
inline constexpr double kMaxSoftcap = 3.0;
inline constexpr double kMean = 1.5;
// The LSE is judged in the same form as the output, against the LSE of the same baseline.
inline constexpr double kLse = 2.0;
// The integration property (properties/integration.h): transformers' eager attention plays the baseline.
inline constexpr double kIntegration = 2.0;

FC_HD constexpr double k_max(bool softcap) { return softcap ? kMaxSoftcap : kMax; }

// ---- Gradients --------------------------------------------------------------------------------------------
// The backward is judged per gradient (dQ, dK, dV) in the output's form, against the gradients of the same
// low-precision baseline (flash-attention's hopper/test_flash_attn.py: dq_pt from autograd through
// attention_ref(upcast=False, reorder_ops=True); `rtol = 2 if softcap == 0.0 else 3`;
// `dq_atol = 2 * (dq_ref + 0.3 - 0.3 - dq_ref).abs().max().item() + (0 if softcap == 0 else 3e-4)`): the same
// multiplier (k_max; the mean check with kMean is ours, below), the same dtype floor, the fp32 noise floor from the
// gradients' own sensitivities (below), and with softcap flash-attention's absolute 3e-4 on top (the tanh
// derivative 1 - t^2 loses digits the baseline does not lose in the same place).
inline constexpr double kGradSoftcapAtol = 3e-4;
FC_HD constexpr double grad_extra_floor(bool softcap) { return softcap ? kGradSoftcapAtol : 0.0; }

// ---- The dtype floor ---------------------------------------------------------------------------------
// flash-attention adds `fwd_atol = 2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max()`: twice the error of
// one rounding in the dtype near |truth| + 0.3. Over a large tensor that max is the spacing of the
// dtype at |truth| + 0.3; taking the spacing directly keeps the floor from collapsing to 0 on the few
// elements of a small case (in bf16, 0.5 + 0.3 - 0.3 rounds back to exactly 0.5).
inline constexpr double kFloorOffset = 0.3;
inline constexpr double kFloorSpacings = 2.0;
// A baseline element that overflowed the dtype (fp16 logits past 65504 give inf, then NaN) is no
// yardstick; it counts as the best any output in the dtype can do, the truth rounded: half a spacing.
inline constexpr double kOverflowedBaselineSpacings = 0.5;

// ---- The fp32 noise floor ----------------------------------------------------------------------------
// The ratio rule presumes a baseline much less accurate than the kernel, which holds in fp16/bf16 and
// not in fp32, where both make rounding errors of the same size in different orders. Every reference
// value therefore carries its first-order sensitivity to fp32 rounding in units of u (below), and the
// floor is at least lambda * u * sensitivity. In the probabilistic model of rounding errors (Higham &
// Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019)
// an error exceeds lambda times its sqrt(n) u scale with probability near exp(-lambda^2 / 2): lambda 8
// makes that about 1e-14 per element. The mean check, an average over many elements, uses lambda 2.
inline constexpr double kUnitRoundoff32 = 0x1.0p-24;
inline constexpr double kNoiseLambda = 8.0;
inline constexpr double kNoiseLambdaMean = 2.0;
// The dtype part of the mean floor, as a fraction of one spacing: small enough that a bias of a fraction
// of an ulp still fails, large enough that two exact computations one rounding apart do not.
inline constexpr double kMeanFloorFraction = 0.1;
// The mean check on a handful of rows. A correct kernel's error in a row comes largely from roundings the row's
// elements share (its P rounded to the dtype before P.V, its normalization), and the mean over n independent
// rows settles only as 1/sqrt(n): with one row the kernel's mean is that row's roundings, which a baseline that
// happened to round closer cannot bound. The false-alarm run of issue 15 failed three such cases, each one
// query over two keys (head dims 1, 16 and 256: one row, whatever the number of elements). The mean floor is
// therefore at least this many mean spacings over sqrt(rows compared); from 100 rows on the fraction above is
// the larger.
inline constexpr double kSmallSampleSpacings = 1.0;

namespace math {
FC_HD inline float abs(float x) { return fabsf(x); }
FC_HD inline double abs(double x) { return fabs(x); }
FC_HD inline float sqrt(float x) { return sqrtf(x); }
FC_HD inline double sqrt(double x) { return ::sqrt(x); }
FC_HD inline float frexp(float x, int* e) { return frexpf(x, e); }
FC_HD inline double frexp(double x, int* e) { return ::frexp(x, e); }
FC_HD inline float ldexp(float x, int e) { return ldexpf(x, e); }
FC_HD inline double ldexp(double x, int e) { return ::ldexp(x, e); }
// std::max's choice (the first unless the second is larger), so that a NaN second argument is ignored
// exactly as the comparators have always ignored it.
template <class T>
FC_HD T max(T a, T b) { return a < b ? b : a; }
}  // namespace math

// The spacing of a dtype (given by its explicit mantissa bits and the exponent of its smallest normal)
// at |truth| + 0.3.
template <class T>
FC_HD T spacing(T truth, int mantissa_bits, int min_normal_exp) {
  int e = 0;
  math::frexp(math::abs(truth) + static_cast<T>(kFloorOffset), &e);  // the leading bit has exponent e - 1
  return math::ldexp(static_cast<T>(1), math::max(e - 1, min_normal_exp) - mantissa_bits);
}

// The floor of the max check for one element (and of the LSE check for one row): the larger of the
// dtype floor and the fp32 noise floor.
template <class T>
FC_HD T max_floor(T spacing, T noise) {
  return math::max(static_cast<T>(kFloorSpacings) * spacing,
                   static_cast<T>(kNoiseLambda) * static_cast<T>(kUnitRoundoff32) * noise);
}

// One element's share of the mean check's floor (the floor is the mean of these).
template <class T>
FC_HD T mean_floor(T spacing, T noise) {
  return math::max(static_cast<T>(kMeanFloorFraction) * spacing,
                   static_cast<T>(kNoiseLambdaMean) * static_cast<T>(kUnitRoundoff32) * noise);
}

// A gradient's mean check. flash-attention checks gradients by their max only; the mean check is ours, and its
// noise lambda is 4, not 2: dK's and dV's errors share each query row's rounded D and LSE (and dQ's each row's D),
// so their elements are not independent and their mean need not settle below one element's scale. At 4 sigma a
// fully correlated tensor still passes with probability 1 - 6e-5. The calibration run that set it (fp32 dV of a
// head-dim-1 MQA case, every element 2 sigma off together) is in docs/TOLERANCE.md.
inline constexpr double kNoiseLambdaGradMean = 4.0;
// One element's share of a gradient's mean floor: the fraction of a spacing at |truth| (as for the forward), the
// noise term, and, where the element's terms cancel (terms above |truth|), one unit roundoff of the dtype per unit of
// the excess: a flash backward rounds every term (dS to the dtype, D from the rounded output), so its expected error
// there is about u * terms, which the baseline's D from unrounded P * dP need not share. The calibration's softcap-50
// dQ of head dim 1 (terms 30 times |dQ|) is in docs/TOLERANCE.md.
template <class T>
FC_HD T grad_mean_floor(T spacing_at_truth, T unit_roundoff, T terms, T abs_truth, T noise) {
  const T excess = terms > abs_truth ? terms - abs_truth : static_cast<T>(0);
  return math::max(math::max(static_cast<T>(kMeanFloorFraction) * spacing_at_truth, unit_roundoff * excess),
                   static_cast<T>(kNoiseLambdaGradMean) * static_cast<T>(kUnitRoundoff32) * noise);
}

// The floor of the mean check: the larger of the mean of the elements' shares above and the small-sample floor
// at their mean spacing over `rows` compared (row, head) cells.
template <class T>
FC_HD T mean_check_floor(T mean_of_shares, T mean_spacing, long long rows) {
  return math::max(mean_of_shares,
                   static_cast<T>(kSmallSampleSpacings) * mean_spacing / math::sqrt(static_cast<T>(rows)));
}

// The error an overflowed baseline element counts for.
template <class T>
FC_HD T overflowed_baseline_error(T spacing) {
  return static_cast<T>(kOverflowedBaselineSpacings) * spacing;
}

// ---- The fp32 rounding sensitivity of attention, in units of u ---------------------------------------
// First-order, in the probabilistic model above, where an inner product of n terms errs like sqrt(n) u:
//   logits:  |ds_j| <~ sqrt(d) S_j, S_j = |scale| sum_x |q_x k_jx| (softcap only shrinks it)
//   softmax: dP_j = P_j (ds_j - sum_i P_i ds_i), so |dO_x| <~ max_j |ds_j| sum_j P_j |v_jx - O_x|,
//            bounded by max_j |ds_j| (a_x + |O_x|) with a_x = sum_j P_j |v_jx| so that one pass over the
//            keys suffices (the device reference has no second pass)
//   P.V:     a sum of n terms, sqrt(n + 1) a_x, plus the final rounding |O_x|
//   LSE:     max_j |ds_j| + |m| + |log Z| + sqrt(n + 1)

// S_j of one key, from sum_x |q_x k_jx|.
template <class T>
FC_HD T logit_magnitude(T scale, T dot_abs) {
  return dot_abs * math::abs(scale);
}

// max_j |ds_j| from the head dim and max_j S_j.
template <class T>
FC_HD T logit_sensitivity(T head_dim, T max_magnitude) {
  return math::sqrt(head_dim) * max_magnitude;
}

// The growth factor of a sum of n terms.
template <class T>
FC_HD T sum_sensitivity(long long n) {
  return math::sqrt(static_cast<T>(n + 1));
}

// One output element O_x, from the logit sensitivity, the sum factor and a_x = sum_j P_j |v_jx|.
template <class T>
FC_HD T output_sensitivity(T logit_sens, T sum_sens, T abs_weighted, T out) {
  return logit_sens * (abs_weighted + math::abs(out)) + sum_sens * abs_weighted + math::abs(out);
}

// The LSE m + log Z of a row.
template <class T>
FC_HD T lse_sensitivity(T logit_sens, T m, T log_z, T sum_sens) {
  return logit_sens + math::abs(m) + math::abs(log_z) + sum_sens;
}

// ---- The fp32 rounding sensitivity of the gradients, in units of u ----------------------------------------
// First-order as above, per (row, head) with its visible keys j, L = the row's logit sensitivity, dP_j = dO . v_j,
// D = dO . O (FA2's dpsum) and dS_j = P_j (dP_j - D) (times c_j = 1 - t_j^2, t_j = tanh(s_j / cap), with softcap):
//   dP_j:  sqrt(dv + 1) sum_x |dO_x v_jx|                    D: sqrt(dv + 1) sum_x |dO_x O_x| + sum_x |dO_x| O-noise_x
//   dS_j:  sigma_j = c_j (2 L P_j |dP_j - D| + P_j (sens dP_j + sens D)) + |dS_j| 2 |t_j| L / cap
//   dQ_x = scale sum_j dS_j k_jx:  |scale| (sqrt(n + 1) sum_j |dS_j k_jx| + sum_j sigma_j |k_jx|)
//   dK_jx = scale sum_i dS_ij q_ix: the same over the rows i (and query heads of the group) that see key j
//   dV_jx = sum_i P_ij dO_ix:       sqrt(m + 1) sum_i P_ij |dO_ix| + sum_i 2 L_i P_ij |dO_ix|
// A gradient element is a sum whose terms the reference accumulates twice, as values and as magnitudes; the
// element's sensitivity is the sum factor times the magnitudes plus what its terms carry from the forward.
template <class T>
FC_HD T gradient_sensitivity(long long terms, T abs_sum, T carried) {
  return sum_sensitivity<T>(terms) * abs_sum + carried;
}

// The magnitude of a gradient element's terms as a kernel that rounds each of them errs: the root of the sum of
// their squares (independent roundings), from that sum.
template <class T>
FC_HD T terms_magnitude(T sum_of_squares) {
  return math::sqrt(sum_of_squares);
}

// The sensitivity of a softmax weight P_j: dP_j = P_j (ds_j - sum_i P_i ds_i), at most 2 L P_j.
template <class T>
FC_HD T weight_sensitivity(T logit_sens, T p) {
  return static_cast<T>(2) * logit_sens * p;
}

// ---- The finite-difference check of a backward (the grad-fd property) ------------------------------------
// Central differences of an fp32 forward along a random direction, with steps of kFdFirstStep times each input
// tensor's largest magnitude, halved (at most kFdMaxHalvings times) until the fp64 forward's Richardson estimate puts
// the truncation within kFdTruncationShare of the difference at two steps running; the bound is kFdSafety times the
// sum of the forward's rounding (every output element's noise floor), the gradients' rounding along the step and the
// truncation.
inline constexpr double kFdFirstStep = 0x1.0p-7;
inline constexpr double kFdTruncationShare = 0.01;
inline constexpr double kFdSafety = 2.0;
inline constexpr int kFdMaxHalvings = 12;
// And until the step moves no score (scaled; with softcap, over min(1, cap)) by more than this: softmax and tanh are
// smooth at that scale, so Richardson's estimate holds. Without it a step can carry a saturated row's winning key past
// another (a score margin of 36 moved by more) at every step tried, and where the two keys' V agree along dO the
// difference stays exactly linear and passes Richardson (fixtures/found/harness-grad-fd-saturated-flip.json).
inline constexpr double kFdMaxScoreMove = 0x1.0p-3;
inline constexpr double kUnitRoundoff64Over32 = 0x1.0p-29;  // fp64's unit roundoff over fp32's

// sigma_j of one dS_j (softcap: c = 1 - t^2, else c = 1, t = 0).
template <class T>
FC_HD T dscore_sensitivity(T logit_sens, T p, T dp_minus_d, T dp_sens, T d_sens, T c, T t, T ds, T cap) {
  T s = c * (weight_sensitivity(logit_sens, p) * math::abs(dp_minus_d) + p * (dp_sens + d_sens));
  if (cap > 0) s += math::abs(ds) * static_cast<T>(2) * math::abs(t) * logit_sens / cap;
  return s;
}

// An empty row under the uniform convention: the mean of n values, from the sum of their magnitudes.
template <class T>
FC_HD T uniform_mean_sensitivity(long long n, T abs_sum, T mean) {
  return sum_sensitivity<T>(n) * abs_sum / static_cast<T>(n) + math::abs(mean);
}

}  // namespace flashcheck::tolerance
