// The gradient rule of core/compare.h (compare_gradient, mean_cells_of) evaluated on the GPU: a kernel's dQ, dK or
// dV, the device truth, its noise and terms, and the baseline never leave the device; only the statistics and the
// three values at the worst element come back. The definition is the host's, element by element (same skips, same
// floors, same first-worst rule), so that the device path of grad-conformance judges exactly as the host path does;
// reference/device/gradient_compare_test.cc (label gpu) holds the two side by side. Host-callable, no CUDA headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/compare.h"
#include "core/defined_memory.h"
#include "core/dtype.h"
#include "core/verdict.h"

namespace flashcheck::device {

// One gradient tensor on the device, storage [rows, heads, dim] row-major, and which of its rows are defined.
struct DeviceGradientTensor {
  std::string name;  // "dq", "dk", "dv": Comparison::tensor
  std::int64_t rows = 0, heads = 0, dim = 0;
  // Host-side: the defined rows as spans (one per sequence), the non-empty ones increasing, disjoint and within
  // [0, rows); an empty span defines nothing. ElementLoc b is the span index, i the row within the span.
  std::vector<RowSpan> spans;
  const float* got = nullptr;       // device: the kernel's gradient (float32)
  const double* truth = nullptr;    // device: fp64 reference
  const float* baseline = nullptr;  // device: the low-precision baseline (float32)
  const double* noise = nullptr;    // device, may be null (then 0)
  const double* terms = nullptr;    // device, may be null (then no terms: the host's `terms.empty()`)
};

// compare_gradient of core/compare.h evaluated on the device: same definition, element by element. The sums (and so
// the means) may differ from the host's in their last bits (a tree instead of a running sum), the same every run;
// counts, maxima, floor, bound and the worst element are the host's exactly. Throws std::invalid_argument on spans
// that are not increasing, disjoint and within the rows, or on a null got/truth/baseline with defined elements.
Comparison device_compare_gradient(DType dt, bool softcap, const DeviceGradientTensor& t, double k_max,
                                   std::int64_t mean_cells);

// compare_gradients of core/compare.h on the device: device_compare_gradient of each tensor with dQ's
// device_mean_cells (at least 1), all three queued at once and read back in one copy (one wait per case, not four).
GradientComparisons device_compare_gradients(DType dt, bool softcap, const DeviceGradientTensor& dq,
                                             const DeviceGradientTensor& dk, const DeviceGradientTensor& dv, double k_max);

// mean_cells_of of core/compare.h on the device: the defined (row, head) cells with a nonzero truth or terms.
std::int64_t device_mean_cells(const DeviceGradientTensor& t);

}  // namespace flashcheck::device
