// The buffer a kernel writes its output into: owned by the harness, poisoned before every launch and
// framed by canary margins, so that rows a kernel never writes and writes past either end are caught.
#pragma once

#include <cstdint>
#include <vector>

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "kernels/poisoned_array.h"

namespace flashcheck {

// Canary margin for a case: one whole output row (all heads) plus 64 elements on each side, so that the
// classic overrun -- one row too many -- lands in the canaries instead of the heap.
inline std::int64_t canary_margin(const KernelCase& c) { return c.heads * c.v_head_dim + 64; }

class OutputBuffer;
struct CaseGeometry;
// The buffer of a case: rows for the whole output storage (slack rows included: a kernel may leave them
// or write them; only the sequences' rows are compared) and canary margins past both ends.
OutputBuffer output_buffer_for(const KernelCase& c, const CaseGeometry& g);

class OutputBuffer {
 public:
  // Output (total_q, H, dv) and LSE (total_q, H), each with `margin` canary elements on both sides.
  OutputBuffer(std::int64_t out_elems, std::int64_t lse_elems, std::int64_t margin = 64);
  OutputBuffer() : OutputBuffer(0, 0) {}

  float* out() { return out_.data(); }
  float* lse() { return lse_.data(); }
  const float* out() const { return out_.data(); }
  const float* lse() const { return lse_.data(); }
  std::int64_t out_elems() const { return out_.size(); }
  std::int64_t lse_elems() const { return lse_.size(); }

  // Fills the interior with the "unwritten" NaN pattern and the margins with the canary pattern.
  void poison();
  // Margin elements whose bits changed since poison(): out-of-bounds writes.
  std::int64_t canary_damage() const { return out_.canary_damage() + lse_.canary_damage(); }
  // True when the element still holds the exact "unwritten" bit pattern.
  static bool unwritten(float x) { return PoisonedArray::unwritten(x); }

  // Set by a kernel that wrote the LSE.
  bool lse_written = false;

  AttentionResult to_result() const;

 private:
  PoisonedArray out_, lse_;
};

}  // namespace flashcheck
