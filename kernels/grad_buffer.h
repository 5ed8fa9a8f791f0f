// The buffers a kernel's backward writes dQ, dK and dV into: poisoned and canaried like the output buffer, in
// the inputs' packed layouts with their slack rows, so that gradient elements never written and writes past
// either end are caught (the gradient robustness property).
#pragma once

#include <cstdint>

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "kernels/poisoned_array.h"

namespace flashcheck {

// The canary margin on each side of a gradient buffer whose rows hold `heads` x `dim` elements: one row plus 64
// elements (the host's GradBuffer and the device path's buffers alike).
inline std::int64_t grad_canary_margin(std::int64_t heads, std::int64_t dim) { return heads * dim + 64; }

class GradBuffer {
 public:
  // For a validated backward case: dq (q_rows, H, d), dk (kv_rows, Hk, d), dv (kv_rows, Hk, dv), each framed by one
  // row of its tensor plus 64 elements of canaries on both sides.
  explicit GradBuffer(const KernelCase& c);
  GradBuffer() = default;

  float* dq() { return dq_.data(); }
  float* dk() { return dk_.data(); }
  float* dv() { return dv_.data(); }
  const float* dq() const { return dq_.data(); }
  const float* dk() const { return dk_.data(); }
  const float* dv() const { return dv_.data(); }
  std::int64_t dq_elems() const { return dq_.size(); }
  std::int64_t dk_elems() const { return dk_.size(); }
  std::int64_t dv_elems() const { return dv_.size(); }

  void poison();
  std::int64_t canary_damage() const { return dq_.canary_damage() + dk_.canary_damage() + dv_.canary_damage(); }

  GradientResult to_result() const;

 private:
  PoisonedArray dq_, dk_, dv_;
};

}  // namespace flashcheck
