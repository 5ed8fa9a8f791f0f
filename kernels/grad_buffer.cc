#include "kernels/grad_buffer.h"

#include "core/geometry.h"

namespace flashcheck {

GradBuffer::GradBuffer(const KernelCase& c) {
  const CaseGeometry g = geometry(c);
  dq_ = PoisonedArray(g.q_rows * c.heads * c.head_dim, grad_canary_margin(c.heads, c.head_dim));
  dk_ = PoisonedArray(g.kv_rows * c.kv_heads * c.head_dim, grad_canary_margin(c.kv_heads, c.head_dim));
  dv_ = PoisonedArray(g.kv_rows * c.kv_heads * c.v_head_dim, grad_canary_margin(c.kv_heads, c.v_head_dim));
}

void GradBuffer::poison() {
  dq_.poison();
  dk_.poison();
  dv_.poison();
}

GradientResult GradBuffer::to_result() const {
  GradientResult r;
  r.dq.assign(dq(), dq() + dq_elems());
  r.dk.assign(dk(), dk() + dk_elems());
  r.dv.assign(dv(), dv() + dv_elems());
  return r;
}

}  // namespace flashcheck
