// PyTorch's CUDA attention kernels under test (CUDA builds only).
#pragma once

#include <string>
#include <vector>

namespace flashcheck {

class Registry;
void register_cuda_kernels(Registry& r);

// The names register_cuda_kernels gives its kernels, known to every build: a CPU build checks a fixture's
// expectations for those kernels by name (a test of the CUDA build keeps the list and the registry equal).
const std::vector<std::string>& cuda_kernel_names();

}  // namespace flashcheck
