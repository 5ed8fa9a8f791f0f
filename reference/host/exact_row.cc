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
    if (shape_.softcap > 0) logit = shape_.softcap * std::tanh(logit / shape_.softcap);
    logits_[j] = logit;
    if (logit > m || std::isnan(logit)) m = logit;  // NaN propagates instead of being skipped
  }
  double z = 0.0;
  for (std::int64_t x = 0; x < dv; ++x) out[x] = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    const double p = std::exp(logits_[j] - m);
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
  for (std::int64_t x = 0; x < dv; ++x) {
    out[x] /= z;
    noise[x] = tolerance::output_sensitivity(ds, terms, abs_weighted_[static_cast<std::size_t>(x)] / z, out[x]);
  }
  return {m + log_z, tolerance::lse_sensitivity(ds, m, log_z, terms)};
}

}  // namespace flashcheck::reference
