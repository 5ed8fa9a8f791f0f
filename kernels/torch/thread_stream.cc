// use_thread_stream (kernels/devices.h) for the CUDA build: the harness's side and torch's current stream
// become the thread's default stream, so that a thread's case runs in order on one stream and
// synchronizing it leaves the other threads' cases running.
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "core/device/device_memory.h"
#include "kernels/devices.h"

namespace flashcheck {

bool use_thread_stream() {
  device::own_thread_stream();
  // cudaStreamPerThread is a handle, not a stream torch created: torch takes it as an external stream.
  c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromExternal(cudaStreamPerThread, c10::cuda::current_device()));
  return true;
}

}  // namespace flashcheck
