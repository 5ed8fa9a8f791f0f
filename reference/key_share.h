// One key's share of one (query row, head)'s backward, from the row's statistics: the formula the fp64 host
// reference (reference/host/exact_row.cc) and the fp64 device reference (reference/device/gradients.cu) both use,
// so that the two differ only in the order of their sums. Header-only, host and device.
#pragma once

#include <cmath>

#include "core/portable.h"
#include "core/tolerance.h"

namespace flashcheck::reference {

// Its softmax weight P_j, the gradient ds_j of the loss w.r.t. its logit before the softcap (scale * q.k_j), the fp32
// sensitivities of both (units of u), and ds_j's magnitude as a backward rounds it: |ds_j| plus what it moves by when
// dpsum comes from the output rounded to the dtype (every flash backward takes the stored output: ds_j moves by
// P_j c_j |dO * O|_2 per unit rounding).
template <class T>
struct KeyShare {
  T p = 0, ds = 0;
  T p_noise = 0, ds_noise = 0;
  T ds_magnitude = 0;
};

// What a row contributes to every key's share: D = dO . O (FA2's dpsum), its sensitivity and |dO * O|_2, and the
// row's logit sensitivity (core/tolerance.h).
template <class T>
struct RowShareStats {
  T big_d = 0, d_sens = 0, d_terms = 0, logit_sens = 0;
};

// The softcap's derivative d(cap tanh(s / cap)) / ds at x = s / cap: sech^2(x), as 4e / (1 + e)^2 with e = exp(-2|x|).
// Not 1 - tanh(x)^2: once tanh saturates that difference cancels to nothing, or to whichever last bit each tanh
// rounded to, and the host and device references disagreed by 3.6e-5 relative on such a key (an fp16 case with cap
// 50 and logits past 30 caps).
template <class T>
FC_HD T softcap_derivative(T x) {
  const T e = exp(-2 * tolerance::math::abs(x));
  return 4 * e / ((1 + e) * (1 + e));
}

// p: the key's weight; t: tanh(s_j / cap) and c: softcap_derivative(s_j / cap) (0 and 1 without softcap); dp = dO . v_j
// and dp_abs = sum_x |dO_x v_jx| over dv channels.
template <class T>
FC_HD KeyShare<T> key_share(const RowShareStats<T>& row, T p, T t, T c, T cap, T dp, T dp_abs, long long dv) {
  const T dp_sens = tolerance::gradient_sensitivity<T>(dv, dp_abs, static_cast<T>(0));
  KeyShare<T> g;
  g.p = p;
  g.ds = p * (dp - row.big_d) * c;
  g.p_noise = tolerance::weight_sensitivity(row.logit_sens, p);
  g.ds_noise = tolerance::dscore_sensitivity(row.logit_sens, p, dp - row.big_d, dp_sens, row.d_sens, c, t, g.ds, cap);
  g.ds_magnitude = tolerance::math::abs(g.ds) + p * c * row.d_terms;
  return g;
}

}  // namespace flashcheck::reference
