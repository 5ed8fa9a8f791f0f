// How many CUDA devices this process can give its workers, asked without initializing CUDA in it (a
// process that forks workers must not: the CUDA runtime does not survive fork).
#pragma once

namespace flashcheck {

// Devices visible to this process (CUDA_VISIBLE_DEVICES applies); 0 without a GPU or in a build without CUDA.
int cuda_device_count();
// Whether this build has the CUDA kernels at all (the cuda preset).
bool cuda_build();

}  // namespace flashcheck
