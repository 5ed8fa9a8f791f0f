#include "reference/host/exact_row.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/tolerance.h"

namespace flashcheck::reference {

RowStats ExactRow::compute(const float* q, double* out, double* noise) {
  if (k_.empty()) throw std::logic_error("ExactRow::compute: a row without keys has no exact attention");
  const std::int64_t d = shape_.head_dim, dv = shape_.v_head_dim;
  const std::size_t n = k_.size();
  logits_.resize(n);
  weights_.resize(n);
  tanh_.assign(n, 0.0);
  softcap_derivative_.assign(n, 1.0);
  abs_weighted_.assign(static_cast<std::size_t>(dv), 0.0);
  double m = -std::numeric_limits<double>::infinity(), max_magnitude = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    const float* k = k_[j];
    double dot = 0.0, dot_abs = 0.0;
    for (std::int64_t x = 0; x < d; ++x) {
      dot += static_cast<double>(q[x]) * static_cast<double>(k[x]);
      dot_abs += std::fabs(static_cast<double>(q[x]) * static_cast<double>(k[x]));
    }
    max_magnitude = std::max(max_magnitude, tolerance::logit_magnitude(shape_.scale, dot_abs));
    double logit = shape_.scale * dot;
    if (shape_.softcap > 0) {
      tanh_[j] = std::tanh(logit / shape_.softcap);
      softcap_derivative_[j] = softcap_derivative(logit / shape_.softcap);
      logit = shape_.softcap * tanh_[j];
    }
    logits_[j] = logit;
    if (logit > m || std::isnan(logit)) m = logit;  // NaN propagates instead of being skipped
  }
  double z = 0.0;
  for (std::int64_t x = 0; x < dv; ++x) out[x] = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    const double p = std::exp(logits_[j] - m);
    weights_[j] = p;
    z += p;
    const float* v = v_[j];
    for (std::int64_t x = 0; x < dv; ++x) {
      out[x] += p * static_cast<double>(v[x]);
      abs_weighted_[static_cast<std::size_t>(x)] += p * std::fabs(static_cast<double>(v[x]));
    }
  }
  const double log_z = std::log(z);
  const double ds = tolerance::logit_sensitivity(static_cast<double>(d), max_magnitude);
  const double terms = tolerance::sum_sensitivity<double>(static_cast<long long>(n));
  logit_sens_ = ds;
  for (double& p : weights_) p /= z;
  for (std::int64_t x = 0; x < dv; ++x) {
    out[x] /= z;
    noise[x] = tolerance::output_sensitivity(ds, terms, abs_weighted_[static_cast<std::size_t>(x)] / z, out[x]);
  }
  return {m + log_z, tolerance::lse_sensitivity(ds, m, log_z, terms)};
}

const std::vector<KeyGrad>& ExactRow::backward(const float* dout, const double* out, const double* out_noise, double* dq,
                                               double* dq_noise, double* dq_terms) {
  const std::int64_t d = shape_.head_dim, dv = shape_.v_head_dim;
  const std::size_t n = k_.size();
  const double cap = shape_.softcap, scale = shape_.scale;
  // D = dO . O (FA2's dpsum), with its sensitivity.
  double big_d = 0.0, d_abs = 0.0, d_carried = 0.0, d_squares = 0.0;
  for (std::int64_t x = 0; x < dv; ++x) {
    const double g = static_cast<double>(dout[x]);
    big_d += g * out[x];
    d_abs += std::fabs(g * out[x]);
    d_squares += (g * out[x]) * (g * out[x]);
    d_carried += std::fabs(g) * out_noise[x];
  }
  const RowShareStats<double> row{.big_d = big_d,
                                  .d_sens = tolerance::gradient_sensitivity(static_cast<long long>(dv), d_abs, d_carried),
                                  .d_terms = tolerance::terms_magnitude(d_squares),
                                  .logit_sens = logit_sens_};
  key_grads_.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    const float* v = v_[j];
    double dp = 0.0, dp_abs = 0.0;
    for (std::int64_t x = 0; x < dv; ++x) {
      dp += static_cast<double>(dout[x]) * static_cast<double>(v[x]);
      dp_abs += std::fabs(static_cast<double>(dout[x]) * static_cast<double>(v[x]));
    }
    key_grads_[j] = key_share(row, weights_[j], tanh_[j], softcap_derivative_[j], cap, dp, dp_abs, static_cast<long long>(dv));
  }
  for (std::int64_t x = 0; x < d; ++x) {
    double sum = 0.0, abs_sum = 0.0, carried = 0.0, magnitude = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      const double kx = static_cast<double>(k_[j][x]);
      sum += key_grads_[j].ds * kx;
      abs_sum += std::fabs(key_grads_[j].ds * kx);
      carried += key_grads_[j].ds_noise * std::fabs(kx);
      magnitude += (key_grads_[j].ds_magnitude * kx) * (key_grads_[j].ds_magnitude * kx);
    }
    dq[x] = scale * sum;
    dq_terms[x] = std::fabs(scale) * tolerance::terms_magnitude(magnitude);
    dq_noise[x] = std::fabs(scale) * tolerance::gradient_sensitivity(static_cast<long long>(n), abs_sum, carried);
  }
  return key_grads_;
}

}  // namespace flashcheck::reference
