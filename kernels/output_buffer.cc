#include "kernels/output_buffer.h"

#include "core/geometry.h"

namespace flashcheck {

OutputBuffer::OutputBuffer(std::int64_t out_elems, std::int64_t lse_elems, std::int64_t margin)
    : out_(out_elems, margin), lse_(lse_elems, margin) {}

void OutputBuffer::poison() {
  out_.poison();
  lse_.poison();
  lse_written = false;
}

OutputBuffer output_buffer_for(const KernelCase& c, const CaseGeometry& g) {
  return OutputBuffer(g.q_rows * c.heads * c.v_head_dim, g.q_rows * c.heads, canary_margin(c));
}

AttentionResult OutputBuffer::to_result() const {
  AttentionResult r;
  r.out.assign(out(), out() + out_elems());
  if (lse_written) r.lse.assign(lse(), lse() + lse_elems());
  return r;
}

}  // namespace flashcheck
