// A float array a kernel writes into, owned by the harness: its interior poisoned with an "unwritten" NaN pattern
// before every launch and framed by canary margins, so that elements a kernel never writes and writes past either
// end are both caught. The output buffer (kernels/output_buffer.h) and the gradient buffer (kernels/grad_buffer.h)
// are made of these.
#pragma once

#include <cstdint>
#include <vector>

namespace flashcheck {

class PoisonedArray {
 public:
  PoisonedArray(std::int64_t elems, std::int64_t margin);
  PoisonedArray() : PoisonedArray(0, 0) {}

  float* data() { return v_.data() + margin_; }
  const float* data() const { return v_.data() + margin_; }
  std::int64_t size() const { return elems_; }

  // Fills the interior with the "unwritten" pattern and the margins with the canary pattern.
  void poison();
  // Margin elements whose bits changed since poison(): out-of-bounds writes.
  std::int64_t canary_damage() const;
  // True when the element still holds the exact "unwritten" bit pattern.
  static bool unwritten(float x);

 private:
  std::int64_t elems_, margin_;
  std::vector<float> v_;
};

}  // namespace flashcheck
