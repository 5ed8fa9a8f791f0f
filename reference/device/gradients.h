// The device gradient reference: dQ, dK and dV of a backward case on the GPU, exact in fp64 with their fp32
// sensitivities (the fp64 host reference's definition, reference/host/gradients.h, and its per-key formula,
// reference/key_share.h), and the low-precision baseline the gradient rule scales from, the host baseline's rounding
// steps in fp32. One warp per query row and head (dQ) or per key and KV head (dK, dV, summed over the group), so
// nothing is accumulated with atomics and every run gives the same bits. Checked against the host by the
// device-gradient-reference property and reference/device/gradients_test.cc (label gpu), judged by
// reference/gradient_agreement.h. Host-callable, no CUDA headers.
#pragma once

#include <array>
#include <string>

#include "core/case_tensors.h"
#include "core/device/device_case.h"
#include "core/kernel_case.h"

namespace flashcheck::device {

// Both need a validated backward case (packed K/V, no cache) and its tensors with dout; they upload the tensors to
// device slots named after `slot` and return the results on the host, in GradientResult's packed layouts. These two
// are the fp64 SIMT kernels whatever the case.
GradientResult device_gradients(const KernelCase& c, const CaseTensors& t, const std::string& slot = "grad.truth");
GradientResult device_low_precision_gradients(const KernelCase& c, const CaseTensors& t,
                                              const std::string& slot = "grad.baseline");

// Both, from the tensor-core reference (gradients_tc.h) where it takes the case and from the two above otherwise;
// `tensor_cores` says which, since the two are held to different accuracies (reference/gradient_agreement.h).
struct DeviceGradients {
  GradientResult truth, baseline;
  bool tensor_cores = false;
};
DeviceGradients device_gradients_and_baseline(const KernelCase& c, const CaseTensors& t, const std::string& slot = "grad");

// The same for a case whose inputs, dO included, are already on the device (DeviceCase), kept there (tensor cores
// where they take the case): the device path of grad-conformance compares a kernel's gradients with them without a copy to the host. Device
// pointers in GradientResult's packed layouts, [0] dQ, [1] dK, [2] dV; valid until the slots are reused.
struct DeviceGradientReference {
  std::array<const double*, 3> truth{}, noise{}, terms{};
  std::array<const float*, 3> baseline{};
};
DeviceGradientReference device_reference_gradients(const DeviceCase& dc, const std::string& slot = "grad.ref");

}  // namespace flashcheck::device
