// The device twin of kernels/output_buffer.h: the output buffer a GPU kernel writes, poisoned with the
// "unwritten" NaN pattern before each launch and framed by canary margins. Host-callable, no CUDA headers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/case_tensors.h"

namespace flashcheck::device {

class DeviceOutput {
 public:
  DeviceOutput(std::int64_t out_elems, std::int64_t lse_elems, std::int64_t margin, const std::string& slot = "kernel");

  float* out() { return out_ + margin_; }
  float* lse() { return lse_ + margin_; }
  const float* out() const { return out_ + margin_; }
  const float* lse() const { return lse_ + margin_; }
  std::int64_t out_elems() const { return out_elems_; }
  std::int64_t lse_elems() const { return lse_elems_; }
  bool lse_written = false;

  void poison();
  std::int64_t canary_damage() const;  // margin elements whose bits changed: out-of-bounds writes
  std::int64_t unwritten() const;      // output elements still holding the poison pattern

  AttentionResult download() const;

 private:
  friend std::int64_t canary_damage(std::initializer_list<const DeviceOutput*> outputs);
  void queue_canary_count(unsigned long long* n) const;  // adds this buffer's damage to *n on the harness stream

  float* out_;
  float* lse_;
  std::int64_t out_elems_, lse_elems_, margin_;
};

// The canary damage of several buffers, counted together: one wait instead of one per buffer.
std::int64_t canary_damage(std::initializer_list<const DeviceOutput*> outputs);

}  // namespace flashcheck::device
