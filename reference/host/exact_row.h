// Exact attention of one (query row, head) in fp64 over the keys it may attend, with the fp32 rounding
// sensitivity of core/tolerance.h. The one fp64 attention of the project: the kernel-level reference
// (reference/host/attention.cc) and the model-level one (oracles/hf_eager.cc) differ only in which keys
// a row sees and in their layouts, so they list the allowed keys and leave the arithmetic to this.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/key_share.h"

namespace flashcheck::reference {

struct RowShape {
  std::int64_t head_dim = 0;    // d: values per query and key row
  std::int64_t v_head_dim = 0;  // dv: values per value and output row
  double scale = 1.0;           // multiplies q.k
  double softcap = 0.0;         // > 0: logits become softcap * tanh(logit / softcap)
};

struct RowStats {
  double lse = 0;        // m + log Z
  double lse_noise = 0;  // its fp32 sensitivity, units of u
};

// One key's share of a row's backward (reference/key_share.h).
using KeyGrad = KeyShare<double>;

// Holds the allowed keys of one row and the scratch of the computation; reused across rows so that the
// loop over a case allocates nothing once warm.
class ExactRow {
 public:
  explicit ExactRow(const RowShape& shape) : shape_(shape) {}

  void clear() {
    k_.clear();
    v_.clear();
  }
  // Key rows are summed in the order they are added; `k` holds d floats, `v` dv floats.
  void add_key(const float* k, const float* v) {
    k_.push_back(k);
    v_.push_back(v);
  }
  std::size_t keys() const { return k_.size(); }

  // Writes out[dv] and noise[dv] (the sensitivity of each output value, units of u). Needs at least one
  // key: rows without one follow the caller's empty-row convention. A NaN logit makes the row NaN.
  RowStats compute(const float* q, double* out, double* noise);

  // The backward of the row computed last, for the upstream gradient dout[dv]: writes dq[d] and dq_noise[d]
  // (dq = scale sum_j ds_j k_j) and dq_terms[d] (the root sum of squares of |scale| ds-magnitude_j |k_j|) and returns every key's share, in the order the keys were added, from which the
  // caller accumulates dK_j += scale ds_j q and dV_j += P_j dout. `out`/`out_noise` are compute()'s.
  const std::vector<KeyGrad>& backward(const float* dout, const double* out, const double* out_noise, double* dq,
                                       double* dq_noise, double* dq_terms);

 private:
  RowShape shape_;
  std::vector<const float*> k_, v_;
  std::vector<double> logits_, abs_weighted_;
  // Kept by compute() for backward(): the weights, tanh(s_j / cap) with softcap, the logit sensitivity.
  std::vector<double> weights_, tanh_, softcap_derivative_;
  double logit_sens_ = 0;
  std::vector<KeyGrad> key_grads_;
};

}  // namespace flashcheck::reference
