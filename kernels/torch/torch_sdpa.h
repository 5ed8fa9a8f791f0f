// PyTorch's scaled-dot-product-attention family: the CPU kernels (`sdpa-math-cpu`, `cpu-flash`) and, in
// CUDA builds, the public scaled_dot_product_attention with one backend forced (`sdpa-flash`,
// `sdpa-efficient`, `sdpa-cudnn`, `sdpa-math-cuda`). All take dense (B, H, L, d) tensors and know only
// top-left causal; the adapter translates the rest (contracts list how).
#pragma once

#include <memory>

namespace flashcheck {

class Kernel;
enum class SdpaBackend { kMath, kFlash, kEfficient, kCudnn };

std::unique_ptr<Kernel> make_sdpa_cuda_kernel(SdpaBackend backend);

}  // namespace flashcheck
