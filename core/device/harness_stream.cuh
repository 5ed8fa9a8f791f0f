// The calling thread's harness stream as a cudaStream_t, for launches in .cu files (device_memory.h keeps
// CUDA's headers out of its interface).
#pragma once

#include <cuda_runtime.h>

#include "core/device/device_memory.h"

namespace flashcheck::device {

inline cudaStream_t harness_stream() { return static_cast<cudaStream_t>(stream()); }

}  // namespace flashcheck::device
