// PyTorch's CPU attention kernels under test: the SDPA math path and the CPU flash-attention kernel.
#pragma once

namespace flashcheck {

class Registry;
void register_torch_cpu_kernels(Registry& r);

}  // namespace flashcheck
