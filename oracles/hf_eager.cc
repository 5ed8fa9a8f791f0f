#include "oracles/hf_eager.h"

#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tanh.h>
#include <cmath>
#include <limits>

#include "kernels/torch/torch_tensors.h"
#include "reference/host/exact_row.h"

namespace flashcheck::hf {
namespace {

// torch.finfo(dtype).min, the value transformers adds to masked logits.
float finfo_min(DType t) {
  switch (t) {
    case DType::kF16: return -65504.0f;
    case DType::kBF16: return -3.3895313892515355e38f;
    case DType::kF32: return std::numeric_limits<float>::lowest();
  }
  return std::numeric_limits<float>::lowest();
}

// transformers' repeat_kv: [B, Hkv, L, D] -> [B, Hkv * n_rep, L, D] by expand and reshape.
at::Tensor repeat_kv(const at::Tensor& x, std::int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto s = x.sizes();
  return x.unsqueeze(2).expand({s[0], s[1], n_rep, s[2], s[3]}).reshape({s[0], s[1] * n_rep, s[2], s[3]});
}

}  // namespace

EagerResult eager_attention(const ModelCase& m, const ModelTensors& t, Profile profile) {
  EagerResult r;
  r.mask = eager_mask(m, profile);
  const std::int64_t B = m.batch, Lq = m.q_len, Lk = m.kv_len();
  // The model's query is a transposed view of the projection; keys and values come out of the cache
  // contiguous in [B, Hkv, L, D].
  const at::Tensor q = torch_bridge::from_values(t.q.data, t.q.shape, m.dtype).transpose(1, 2);
  const at::Tensor k = repeat_kv(torch_bridge::from_values(t.k.data, t.k.shape, m.dtype).transpose(1, 2).contiguous(), m.group());
  const at::Tensor v = repeat_kv(torch_bridge::from_values(t.v.data, t.v.shape, m.dtype).transpose(1, 2).contiguous(), m.group());

  at::Tensor w = at::matmul(q, k.transpose(2, 3)).mul(m.softmax_scale());
  if (m.softcap) {
    w = w.div(*m.softcap);
    w = at::tanh(w);
    w = w.mul(*m.softcap);
  }
  std::vector<float> additive(r.mask.allowed.size());
  const float lowest = finfo_min(m.dtype);
  for (std::size_t x = 0; x < additive.size(); ++x) additive[x] = r.mask.allowed[x] ? 0.0f : lowest;
  w = w.add(torch_bridge::from_values(additive, {B, 1, Lq, Lk}, m.dtype));
  const at::Tensor p = at::softmax(w, -1, at::kFloat).to(torch_bridge::scalar_type(m.dtype));
  const at::Tensor out = at::matmul(p, v).transpose(1, 2).contiguous();
  r.out.shape = {B, Lq, m.heads, m.head_dim};
  r.out.data = torch_bridge::to_values(out);
  return r;
}

ExactAttention exact_attention(const ModelCase& m, const ModelTensors& t, const EagerMask& mask) {
  const std::int64_t B = m.batch, Lq = m.q_len, Lk = m.kv_len(), H = m.heads, Hk = m.kv_heads, D = m.head_dim;
  ExactAttention r;
  r.out.assign(static_cast<std::size_t>(B * Lq * H * D), 0.0);
  r.noise.assign(r.out.size(), 0.0);
  reference::ExactRow exact({.head_dim = D, .v_head_dim = D, .scale = m.softmax_scale(), .softcap = m.softcap.value_or(0.0)});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Lq; ++i)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t g = h / m.group();
        exact.clear();
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (!mask.at(b, i, j)) continue;
          const std::size_t kv = static_cast<std::size_t>(((b * Lk + j) * Hk + g) * D);
          exact.add_key(&t.k.data[kv], &t.v.data[kv]);
        }
        if (exact.keys() == 0) continue;
        const std::size_t at = static_cast<std::size_t>(((b * Lq + i) * H + h) * D);
        exact.compute(&t.q.data[at], &r.out[at], &r.noise[at]);
      }
  return r;
}

}  // namespace flashcheck::hf
