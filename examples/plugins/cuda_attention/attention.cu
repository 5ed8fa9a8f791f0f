// Exact attention on the GPU, one thread per (query row, head), online softmax in float: a complete
// flashcheck plugin for a "cuda" kernel. Tensors arrive on the device (DLPack, kDLCUDA) in bf16 or fp32.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include <flashcheck/plugin.h>

namespace {

const char* kContract = R"({
  "summary": "example: exact attention on the GPU, one thread per query row and head",
  "device": "cuda",
  "features": {"bottom_right": "native", "window": "native", "softcap": "native", "gqa": "native",
               "varlen": "native", "seqused_k": "native", "zero_length": "native"},
  "dtypes": ["bf16", "fp32"],
  "max_head_dim": 256,
  "empty_row": "zero",
  "returns_lse": true
})";

struct Params {
  const void *q, *k, *v;
  void* out;
  float* lse;
  const std::int32_t *cu_q, *cu_k, *used;
  std::int32_t batch, H, Hk, d, total_q;
  float scale, softcap;
  std::int32_t left, right;
  bool bf16;
};

__device__ float load(const Params& p, const void* t, std::int64_t i) {
  return p.bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(t)[i]) : static_cast<const float*>(t)[i];
}

__device__ void store(const Params& p, std::int64_t i, float x) {
  if (p.bf16) static_cast<__nv_bfloat16*>(p.out)[i] = __float2bfloat16(x);
  else static_cast<float*>(p.out)[i] = x;
}

constexpr int kMaxDim = 256;

__global__ void attend(Params p) {
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= static_cast<std::int64_t>(p.total_q) * p.H) return;
  const std::int64_t row = t / p.H, h = t % p.H, kh = h / (p.H / p.Hk);
  int b = 0;
  while (b + 1 < p.batch && p.cu_q[b + 1] <= row) ++b;
  const std::int64_t q0 = p.cu_q[b], lq = p.cu_q[b + 1] - q0, k0 = p.cu_k[b];
  const std::int64_t lk = p.used ? p.used[b] : p.cu_k[b + 1] - k0;
  const std::int64_t diag = (row - q0) + lk - lq;  // bottom-right
  const std::int64_t lo = p.left >= 0 ? max(diag - p.left, std::int64_t{0}) : 0;
  const std::int64_t hi = p.right >= 0 ? min(diag + p.right, lk - 1) : lk - 1;
  float o[kMaxDim];
  for (int x = 0; x < p.d; ++x) o[x] = 0.0f;
  float m = -INFINITY, z = 0.0f;
  for (std::int64_t j = lo; j <= hi; ++j) {
    float dot = 0.0f;
    for (int x = 0; x < p.d; ++x) dot += load(p, p.q, (row * p.H + h) * p.d + x) * load(p, p.k, ((k0 + j) * p.Hk + kh) * p.d + x);
    float s = dot * p.scale;
    if (p.softcap > 0) s = p.softcap * tanhf(s / p.softcap);
    const float m2 = fmaxf(m, s), c = expf(m - m2), e = expf(s - m2);  // rescale what was summed so far
    z = z * c + e;
    for (int x = 0; x < p.d; ++x) o[x] = o[x] * c + e * load(p, p.v, ((k0 + j) * p.Hk + kh) * p.d + x);
    m = m2;
  }
  for (int x = 0; x < p.d; ++x) store(p, (row * p.H + h) * p.d + x, z > 0 ? o[x] / z : 0.0f);
  if (p.lse) p.lse[row * p.H + h] = z > 0 ? m + logf(z) : -INFINITY;
}

int run(const FlashcheckKernel*, const FlashcheckRunArgs* a, char* error, size_t error_size) {
  if (a->k_new || a->block_table || a->leftpad_k || a->v->shape[2] != a->q->shape[2] || a->q->shape[2] > kMaxDim) {
    std::snprintf(error, error_size, "outside this kernel's contract (KV cache, paging, leftpad, dv != d, d > 256)");
    return FLASHCHECK_ERROR;
  }
  Params p{};
  p.q = a->q->data, p.k = a->k->data, p.v = a->v->data, p.out = a->out->data;
  p.lse = a->lse ? static_cast<float*>(a->lse->data) : nullptr;
  p.cu_q = static_cast<const std::int32_t*>(a->cu_seqlens_q->data);
  p.cu_k = static_cast<const std::int32_t*>(a->cu_seqlens_k->data);
  p.used = a->seqused_k ? static_cast<const std::int32_t*>(a->seqused_k->data) : nullptr;
  p.batch = a->batch, p.total_q = static_cast<std::int32_t>(a->q->shape[0]);
  p.H = static_cast<std::int32_t>(a->q->shape[1]), p.Hk = static_cast<std::int32_t>(a->k->shape[1]);
  p.d = static_cast<std::int32_t>(a->q->shape[2]);
  p.scale = a->softmax_scale, p.softcap = a->softcap, p.left = a->window_left, p.right = a->window_right;
  p.bf16 = a->q->dtype.code == kDLBfloat;
  const std::int64_t threads = static_cast<std::int64_t>(p.total_q) * p.H;
  if (threads > 0) attend<<<static_cast<unsigned>((threads + 127) / 128), 128, 0, static_cast<cudaStream_t>(a->stream)>>>(p);
  const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(a->stream));
  if (e != cudaSuccess) {
    std::snprintf(error, error_size, "CUDA: %s", cudaGetErrorString(e));
    return FLASHCHECK_ERROR;
  }
  return FLASHCHECK_OK;
}

const FlashcheckKernel kKernels[] = {{"example-cuda-attention", kContract, run, nullptr}};
const FlashcheckPlugin kPlugin = {FLASHCHECK_PLUGIN_ABI_VERSION, "example-cuda-attention", 1, kKernels, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) const FlashcheckPlugin* flashcheck_plugin(void) { return &kPlugin; }
