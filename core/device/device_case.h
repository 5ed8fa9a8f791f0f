// The inputs of one case on the GPU: generated there by the same counter-based recipe as the host (same
// bits), or uploaded from host tensors (captured fixtures, transformed cases). Layouts are those of the
// host CaseTensors, values float32 exact in the case's dtype. Host-callable, no CUDA headers.
#pragma once

#include <cstdint>
#include <string>

#include "core/case_tensors.h"
#include "core/geometry.h"
#include "core/kernel_case.h"

namespace flashcheck::device {

// Per-sequence geometry as the device kernels read it.
struct DeviceSeq {
  std::int32_t q_start, lq, k_start, new_start, p0, lk, cache_len, off;  // off: diagonal offset (alignment)
};

// Device pointers; null for tensors the case does not have.
struct DeviceInputs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* k_new = nullptr;
  const float* v_new = nullptr;
  const float* dout = nullptr;                // backward cases: dO (q_rows, H, dv), poison in slack rows
  const std::int32_t* block_table = nullptr;  // (B, max_blocks) row-major, -1 padded
  std::int32_t max_blocks = 0;
  const DeviceSeq* seqs = nullptr;            // (B)
  const std::int32_t* row_seq = nullptr;      // (total_q): the sequence of each packed query row
};

class DeviceCase {
 public:
  // Generates the case's tensors on the device. `slot` names the device buffers: two cases alive at once
  // (a metamorphic pair) need two slot names.
  explicit DeviceCase(const KernelCase& c, const std::string& slot = "case");
  // Uploads given tensors (they must match the case, check_shapes).
  DeviceCase(const KernelCase& c, const CaseTensors& t, const std::string& slot = "case");

  const KernelCase& kcase() const { return c_; }
  const CaseGeometry& geometry() const { return g_; }
  const DeviceInputs& inputs() const { return in_; }
  const std::string& slot_name() const { return slot_; }

  // Whether every value the sequences use is finite and below 2^60 (NaN poison in slack rows aside). The tensor-core
  // reference (reference/device/attention_tc.cu) splits P into pieces, and a zero piece times an infinite
  // V gives NaN where fp32 arithmetic gives an infinity: such cases go to the SIMT kernels.
  bool finite_inputs() const { return finite_; }

  // The tensors, copied back to the host.
  CaseTensors download() const;

 private:
  // Host-side arrays (sequence geometry, row -> sequence, block table and, when generating, the storage
  // rows to fill) go to the device in one copy.
  struct Staging;
  void upload_metadata(Staging& st, bool with_row_maps);
  KernelCase c_;
  CaseGeometry g_;
  DeviceInputs in_;
  std::string slot_;
  const unsigned char* base_ = nullptr;  // the uploaded metadata
  bool finite_ = true;
};

}  // namespace flashcheck::device
