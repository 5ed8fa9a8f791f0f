// PyTorch's CUDA attention kernels under test (CUDA builds only).
#pragma once

namespace flashcheck {

class Registry;
void register_cuda_kernels(Registry& r);

}  // namespace flashcheck
