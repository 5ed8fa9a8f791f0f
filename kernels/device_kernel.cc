#include "kernels/device_kernel.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/device/device_case.h"
#include "core/device/device_memory.h"
#include "core/device/device_output.h"

namespace flashcheck {

void DeviceKernel::run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) {
  const device::DeviceCase dc(c, in, "host-path");
  device::DeviceOutput dout(out.out_elems(), out.lse_elems(), canary_margin(c), "host-path.out");
  run_device(dc, dout);
  device::synchronize();
  const AttentionResult r = dout.download();
  std::transform(r.out.begin(), r.out.end(), out.out(), [](double x) { return static_cast<float>(x); });
  if (dout.lse_written) {
    std::transform(r.lse.begin(), r.lse.end(), out.lse(), [](double x) { return static_cast<float>(x); });
    out.lse_written = true;
  }
}

std::string DeviceKernel::unavailable_reason() const { return device::available() ? "" : "no CUDA device on this machine"; }

std::string cuda_sticky_error() {
  // A sticky error is reported by every later call; synchronizing surfaces an asynchronous one.
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaPeekAtLastError();
  if (e == cudaSuccess) return "";
  if (device::is_sticky(e)) return std::string("sticky CUDA error: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  cudaGetLastError();  // a recoverable error: clear it
  return "";
}

}  // namespace flashcheck
