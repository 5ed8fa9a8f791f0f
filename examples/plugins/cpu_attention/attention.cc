// Exact attention on the CPU, one query row at a time, in float: the smallest complete flashcheck plugin.
// It takes varlen batches, grouped KV heads, bottom-right causal attention, windows, softcap and
// seqused_k, in bf16 and fp32, and returns the LSE: its contract says so, and flashcheck holds it to that.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <flashcheck/plugin.h>

namespace {

const char* kContract = R"({
  "summary": "example: exact attention on the CPU, one query row at a time",
  "device": "cpu",
  "features": {"bottom_right": "native", "window": "native", "softcap": "native", "gqa": "native",
               "varlen": "native", "seqused_k": "native", "zero_length": "native", "dv_differs": "native"},
  "dtypes": ["bf16", "fp32"],
  "max_head_dim": 256,
  "empty_row": "zero",
  "returns_lse": true
})";

bool is_bf16(const DLTensor* t) { return t->dtype.code == kDLBfloat; }

float load(const DLTensor* t, std::int64_t i) {
  if (!is_bf16(t)) return static_cast<const float*>(t->data)[i];
  const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(t->data)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void store(const DLTensor* t, std::int64_t i, float x) {
  if (!is_bf16(t)) {
    static_cast<float*>(t->data)[i] = x;
    return;
  }
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
  static_cast<std::uint16_t*>(t->data)[i] = static_cast<std::uint16_t>(bits >> 16);
}

std::int32_t at(const DLTensor* t, std::int64_t i) { return static_cast<const std::int32_t*>(t->data)[i]; }

int run(const FlashcheckKernel*, const FlashcheckRunArgs* a, char* error, size_t error_size) {
  if (a->k_new || a->block_table || a->leftpad_k) {
    std::snprintf(error, error_size, "KV cache, paging and leftpad are not in this kernel's contract");
    return FLASHCHECK_ERROR;
  }
  const std::int64_t H = a->q->shape[1], d = a->q->shape[2], Hk = a->k->shape[1], dv = a->v->shape[2];
  const std::int64_t group = H / Hk;
  std::vector<float> s, o(static_cast<std::size_t>(dv));
  for (std::int32_t b = 0; b < a->batch; ++b) {
    const std::int64_t q0 = at(a->cu_seqlens_q, b), lq = at(a->cu_seqlens_q, b + 1) - q0;
    const std::int64_t k0 = at(a->cu_seqlens_k, b);
    const std::int64_t lk = a->seqused_k ? at(a->seqused_k, b) : at(a->cu_seqlens_k, b + 1) - k0;
    for (std::int64_t i = 0; i < lq; ++i) {
      // Bottom-right: the last query sees the last key. A window bounds the distance to that diagonal.
      const std::int64_t diag = i + lk - lq;
      std::int64_t lo = a->window_left >= 0 ? diag - a->window_left : 0;
      const std::int64_t hi = a->window_right >= 0 ? diag + a->window_right : lk - 1;
#ifdef EXAMPLE_BROKEN
      if (a->window_left >= 0) lo -= 1;  // one key too many on the left: the classic off-by-one
#endif
      if (lo < 0) lo = 0;
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t row = (q0 + i) * H + h, kh = h / group;
        float m = -INFINITY;
        s.assign(static_cast<std::size_t>(lk > 0 ? lk : 0), -INFINITY);
        for (std::int64_t j = lo; j <= hi && j < lk; ++j) {
          float dot = 0;
          for (std::int64_t x = 0; x < d; ++x) dot += load(a->q, row * d + x) * load(a->k, ((k0 + j) * Hk + kh) * d + x);
          float logit = dot * a->softmax_scale;
          if (a->softcap > 0) logit = a->softcap * std::tanh(logit / a->softcap);
          s[static_cast<std::size_t>(j)] = logit;
          m = std::fmax(m, logit);
        }
        float z = 0;
        std::fill(o.begin(), o.end(), 0.0f);
        for (std::int64_t j = lo; j <= hi && j < lk && m > -INFINITY; ++j) {
          const float p = std::exp(s[static_cast<std::size_t>(j)] - m);
          z += p;
          for (std::int64_t x = 0; x < dv; ++x) o[static_cast<std::size_t>(x)] += p * load(a->v, ((k0 + j) * Hk + kh) * dv + x);
        }
        for (std::int64_t x = 0; x < dv; ++x) store(a->out, row * dv + x, z > 0 ? o[static_cast<std::size_t>(x)] / z : 0.0f);
        if (a->lse) static_cast<float*>(a->lse->data)[row] = z > 0 ? m + std::log(z) : -INFINITY;
      }
    }
  }
  return FLASHCHECK_OK;
}

const FlashcheckKernel kKernels[] = {{"example-cpu-attention", kContract, run, nullptr}};
const FlashcheckPlugin kPlugin = {FLASHCHECK_PLUGIN_ABI_VERSION, "example-cpu-attention", 1, kKernels, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) const FlashcheckPlugin* flashcheck_plugin(void) { return &kPlugin; }
