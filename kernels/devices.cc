#include "kernels/devices.h"

#if defined(FLASHCHECK_HAVE_CUDA)
#include "core/device/device_memory.h"
#endif

namespace flashcheck {

#if defined(FLASHCHECK_HAVE_CUDA)
int cuda_device_count() { return device::count(); }
bool cuda_build() { return true; }
#else
int cuda_device_count() { return 0; }
bool cuda_build() { return false; }
bool use_thread_stream() { return false; }
#endif

}  // namespace flashcheck
