// Exact attention on the CPU, one query row at a time, in float: the smallest complete flashcheck plugin.
// It takes varlen batches, grouped KV heads, bottom-right causal attention, windows, softcap and
// seqused_k, in bf16 and fp32, and returns the LSE: its contract says so, and flashcheck holds it to that.
// Its backward (plugin ABI version 2) recomputes each row's weights and writes dQ, dK and dV.
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
  "returns_lse": true,
  "backward": {"deterministic": true, "zeroes_unused_keys": true}
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

// The keys row i of a sequence sees: [lo, hi] (bottom-right diagonal, window distances; hi < lo when none).
void visible(const FlashcheckRunArgs* a, std::int64_t i, std::int64_t lq, std::int64_t lk, std::int64_t* lo, std::int64_t* hi) {
  const std::int64_t diag = i + lk - lq;  // bottom-right: the last query sees the last key
  *lo = a->window_left >= 0 ? diag - a->window_left : 0;
  *hi = a->window_right >= 0 ? diag + a->window_right : lk - 1;
#ifdef EXAMPLE_BROKEN
  if (a->window_left >= 0) *lo -= 1;  // one key too many on the left: the classic off-by-one
#endif
  if (*lo < 0) *lo = 0;
  if (*hi > lk - 1) *hi = lk - 1;
}

// Softmax weights of one (row, head) into p[lo..hi]; returns false when the row sees no key. t[j] keeps
// tanh(logit / softcap) for the backward.
bool weights(const FlashcheckRunArgs* a, std::int64_t row, std::int64_t d, std::int64_t k0, std::int64_t Hk, std::int64_t kh,
             std::int64_t lo, std::int64_t hi, std::vector<float>& p, std::vector<float>& t, float* lse) {
  float m = -INFINITY;
  for (std::int64_t j = lo; j <= hi; ++j) {
    float dot = 0;
    for (std::int64_t x = 0; x < d; ++x) dot += load(a->q, row * d + x) * load(a->k, ((k0 + j) * Hk + kh) * d + x);
    float logit = dot * a->softmax_scale;
    if (a->softcap > 0) {
      t[static_cast<std::size_t>(j)] = std::tanh(logit / a->softcap);
      logit = a->softcap * t[static_cast<std::size_t>(j)];
    }
    p[static_cast<std::size_t>(j)] = logit;
    m = std::fmax(m, logit);
  }
  if (hi < lo) {
    *lse = -INFINITY;
    return false;
  }
  float z = 0;
  for (std::int64_t j = lo; j <= hi; ++j) z += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m));
  for (std::int64_t j = lo; j <= hi; ++j) p[static_cast<std::size_t>(j)] /= z;
  *lse = m + std::log(z);
  return true;
}

int run(const FlashcheckKernel*, const FlashcheckRunArgs* a, char* error, size_t error_size) {
  if (a->k_new || a->block_table || a->leftpad_k) {
    std::snprintf(error, error_size, "KV cache, paging and leftpad are not in this kernel's contract");
    return FLASHCHECK_ERROR;
  }
  const std::int64_t H = a->q->shape[1], d = a->q->shape[2], Hk = a->k->shape[1], dv = a->v->shape[2];
  const std::int64_t group = H / Hk;
  std::vector<float> p, t;
  for (std::int32_t b = 0; b < a->batch; ++b) {
    const std::int64_t q0 = at(a->cu_seqlens_q, b), lq = at(a->cu_seqlens_q, b + 1) - q0;
    const std::int64_t k0 = at(a->cu_seqlens_k, b);
    const std::int64_t lk = a->seqused_k ? at(a->seqused_k, b) : at(a->cu_seqlens_k, b + 1) - k0;
    p.assign(static_cast<std::size_t>(lk > 0 ? lk : 0), 0.0f);
    t.assign(p.size(), 0.0f);
    for (std::int64_t i = 0; i < lq; ++i) {
      std::int64_t lo, hi;
      visible(a, i, lq, lk, &lo, &hi);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t row = (q0 + i) * H + h, kh = h / group;
        float lse;
        const bool any = weights(a, row, d, k0, Hk, kh, lo, hi, p, t, &lse);
        for (std::int64_t x = 0; x < dv; ++x) {
          float o = 0;
          for (std::int64_t j = lo; any && j <= hi; ++j) o += p[static_cast<std::size_t>(j)] * load(a->v, ((k0 + j) * Hk + kh) * dv + x);
          store(a->out, row * dv + x, o);
        }
        if (a->lse) static_cast<float*>(a->lse->data)[row] = lse;
      }
    }
  }
  return FLASHCHECK_OK;
}

// dS_j = P_j (dP_j - D) with dP_j = dO . v_j and D = dO . O (times 1 - tanh^2 under softcap); dQ = scale sum_j dS_j k_j,
// dK_j += scale dS_j q, dV_j += P_j dO, summed over the query heads of each KV head's group.
int backward(const FlashcheckKernel*, const FlashcheckBackwardArgs* g, char*, size_t) {
  const FlashcheckRunArgs* a = g->forward;
  const std::int64_t H = a->q->shape[1], d = a->q->shape[2], Hk = a->k->shape[1], dv = a->v->shape[2];
  const std::int64_t group = H / Hk, key_rows = a->k->shape[0];
  std::vector<float> dk(static_cast<std::size_t>(key_rows * Hk * d), 0.0f), dvv(static_cast<std::size_t>(key_rows * Hk * dv), 0.0f);
  std::vector<float> p, t, dq(static_cast<std::size_t>(d));
  for (std::int32_t b = 0; b < a->batch; ++b) {
    const std::int64_t q0 = at(a->cu_seqlens_q, b), lq = at(a->cu_seqlens_q, b + 1) - q0;
    const std::int64_t k0 = at(a->cu_seqlens_k, b);
    const std::int64_t lk = a->seqused_k ? at(a->seqused_k, b) : at(a->cu_seqlens_k, b + 1) - k0;
    p.assign(static_cast<std::size_t>(lk > 0 ? lk : 0), 0.0f);
    t.assign(p.size(), 0.0f);
    for (std::int64_t i = 0; i < lq; ++i) {
      std::int64_t lo, hi;
      visible(a, i, lq, lk, &lo, &hi);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t row = (q0 + i) * H + h, kh = h / group;
        float lse;
        std::fill(dq.begin(), dq.end(), 0.0f);
        if (weights(a, row, d, k0, Hk, kh, lo, hi, p, t, &lse)) {
          float big_d = 0;
          for (std::int64_t x = 0; x < dv; ++x) big_d += load(g->dout, row * dv + x) * load(a->out, row * dv + x);
          for (std::int64_t j = lo; j <= hi; ++j) {
            const float pj = p[static_cast<std::size_t>(j)];
            float dp = 0;
            for (std::int64_t x = 0; x < dv; ++x) dp += load(g->dout, row * dv + x) * load(a->v, ((k0 + j) * Hk + kh) * dv + x);
            float ds = pj * (dp - big_d);
            if (a->softcap > 0) ds *= 1 - t[static_cast<std::size_t>(j)] * t[static_cast<std::size_t>(j)];
            ds *= a->softmax_scale;
            const std::int64_t key = (k0 + j) * Hk + kh;
#ifdef EXAMPLE_BROKEN_BACKWARD
            const bool first_of_group = h % group == 0;  // dK/dV from one query head per group: GQA's sum forgotten
#else
            const bool first_of_group = true;
#endif
            for (std::int64_t x = 0; x < d; ++x) {
              dq[static_cast<std::size_t>(x)] += ds * load(a->k, key * d + x);
              if (first_of_group) dk[static_cast<std::size_t>(key * d + x)] += ds * load(a->q, row * d + x);
            }
            for (std::int64_t x = 0; x < dv && first_of_group; ++x)
              dvv[static_cast<std::size_t>(key * dv + x)] += pj * load(g->dout, row * dv + x);
          }
        }
        for (std::int64_t x = 0; x < d; ++x) store(g->dq, row * d + x, dq[static_cast<std::size_t>(x)]);
      }
    }
  }
  // Every key row, zeros where no query row reads it (keys past seqused_k among them).
  for (std::int64_t i = 0; i < key_rows * Hk * d; ++i) store(g->dk, i, dk[static_cast<std::size_t>(i)]);
  for (std::int64_t i = 0; i < key_rows * Hk * dv; ++i) store(g->dv, i, dvv[static_cast<std::size_t>(i)]);
  return FLASHCHECK_OK;
}

const FlashcheckKernel kKernels[] = {{"example-cpu-attention", kContract, run, nullptr, backward}};
const FlashcheckPlugin kPlugin = {FLASHCHECK_PLUGIN_ABI_VERSION, "example-cpu-attention", 1, kKernels, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) const FlashcheckPlugin* flashcheck_plugin(void) { return &kPlugin; }
