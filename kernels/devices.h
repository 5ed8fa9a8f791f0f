// How many CUDA devices this process can give its workers, asked without initializing CUDA in it (a
// process that forks workers must not: the CUDA runtime does not survive fork).
#pragma once

namespace flashcheck {

// Devices visible to this process (CUDA_VISIBLE_DEVICES applies); 0 without a GPU or in a build without CUDA.
int cuda_device_count();
// Whether this build has the CUDA kernels at all (the cuda preset).
bool cuda_build();
// Puts the calling thread's device work on its own stream, torch's calls included, so that several
// threads keep cases in flight on one GPU (core/device/device_memory.h, "Streams"); false in a build
// without CUDA. Call it once, at the start of the thread, before the thread's first case.
bool use_thread_stream();

}  // namespace flashcheck
