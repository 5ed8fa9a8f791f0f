// use_thread_stream (kernels/devices.h) for the CUDA build: the calling thread takes a stream of torch's
// pool, and both the harness's launches and torch's current stream go there, so that a thread's case runs
// in order on one stream and synchronizing it leaves the other threads' cases running.
//
// Not cudaStreamPerThread: that is one handle for every thread, and torch's caching allocator keys freed
// blocks by stream handle, so a block one thread's case still reads could be handed to another thread's
// case at once (the in-flight test saw NaN outputs and illegal addresses that way).
#include <c10/cuda/CUDAStream.h>

#include "core/device/device_memory.h"
#include "kernels/devices.h"

namespace flashcheck {

bool use_thread_stream() {
  const c10::cuda::CUDAStream s = c10::cuda::getStreamFromPool(/*isHighPriority=*/false);
  c10::cuda::setCurrentCUDAStream(s);
  device::set_thread_stream(s.stream());
  return true;
}

}  // namespace flashcheck
