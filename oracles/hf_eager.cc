#include "oracles/hf_eager.h"

#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tanh.h>
#include <cmath>
#include <limits>

#include "core/tolerance.h"
#include "kernels/torch/torch_tensors.h"
#include "oracles/model_autograd.h"
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

// Eager's output [B, Lq, Hq, D] from q [B, Lq, Hq, D], k and v [B, Lk, Hkv, D] (differentiable when they are).
at::Tensor eager_output(const ModelCase& m, const EagerMask& mask, const detail::Leaves& x) {
  const std::int64_t B = m.batch, Lq = m.q_len, Lk = m.kv_len();
  // The model's query is a transposed view of the projection; keys and values come out of the cache
  // contiguous in [B, Hkv, L, D].
  const at::Tensor q = x.q.transpose(1, 2);
  const at::Tensor k = repeat_kv(x.k.transpose(1, 2).contiguous(), m.group());
  const at::Tensor v = repeat_kv(x.v.transpose(1, 2).contiguous(), m.group());

  at::Tensor w = at::matmul(q, k.transpose(2, 3)).mul(m.softmax_scale());
  if (m.softcap) {
    w = w.div(*m.softcap);
    w = at::tanh(w);
    w = w.mul(*m.softcap);
  }
  std::vector<float> additive(mask.allowed.size());
  const float lowest = finfo_min(m.dtype);
  for (std::size_t i = 0; i < additive.size(); ++i) additive[i] = mask.allowed[i] ? 0.0f : lowest;
  w = w.add(torch_bridge::from_values(additive, {B, 1, Lq, Lk}, m.dtype));
  const at::Tensor p = at::softmax(w, -1, at::kFloat).to(torch_bridge::scalar_type(m.dtype));
  return at::matmul(p, v).transpose(1, 2).contiguous();
}

}  // namespace

EagerResult eager_attention(const ModelCase& m, const ModelTensors& t, Profile profile) {
  EagerResult r;
  r.mask = eager_mask(m, profile);
  r.out.shape = {m.batch, m.q_len, m.heads, m.head_dim};
  r.out.data = torch_bridge::to_values(eager_output(m, r.mask, detail::model_leaves(m, t, false)));
  return r;
}

GradientResult eager_gradients(const ModelCase& m, const ModelTensors& t, const HostTensor& dout, Profile profile) {
  const detail::Leaves x = detail::model_leaves(m, t, true);
  return detail::model_gradients(m, x, eager_output(m, eager_mask(m, profile), x), dout);
}

GradientResult exact_gradients(const ModelCase& m, const ModelTensors& t, const EagerMask& mask, const HostTensor& dout) {
  const std::int64_t B = m.batch, Lq = m.q_len, Lk = m.kv_len(), H = m.heads, Hk = m.kv_heads, D = m.head_dim;
  GradientResult r;
  for (std::vector<double>* v : {&r.dq, &r.dq_noise, &r.dq_terms}) v->assign(static_cast<std::size_t>(B * Lq * H * D), 0.0);
  for (std::vector<double>* v : {&r.dk, &r.dv, &r.dk_noise, &r.dv_noise, &r.dk_terms, &r.dv_terms})
    v->assign(static_cast<std::size_t>(B * Lk * Hk * D), 0.0);
  // Per key element: the magnitudes of its terms and what they carry from the forward, and their number.
  std::vector<double> dk_abs(r.dk.size()), dk_carried(r.dk.size()), dv_abs(r.dv.size()), dv_carried(r.dv.size());
  std::vector<long long> terms(static_cast<std::size_t>(B * Lk * Hk), 0);
  std::vector<double> out(static_cast<std::size_t>(D)), out_noise(static_cast<std::size_t>(D));
  std::vector<std::int64_t> keys;
  const double scale = m.softmax_scale();
  reference::ExactRow exact({.head_dim = D, .v_head_dim = D, .scale = scale, .softcap = m.softcap.value_or(0.0)});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Lq; ++i)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t g = h / m.group();
        exact.clear();
        keys.clear();
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (!mask.at(b, i, j)) continue;
          const std::size_t kv = static_cast<std::size_t>(((b * Lk + j) * Hk + g) * D);
          exact.add_key(&t.k.data[kv], &t.v.data[kv]);
          keys.push_back(j);
        }
        if (keys.empty()) continue;
        const std::size_t at = static_cast<std::size_t>(((b * Lq + i) * H + h) * D);
        const float* q = &t.q.data[at];
        const float* go = &dout.data[at];
        exact.compute(q, out.data(), out_noise.data());
        const auto& shares = exact.backward(go, out.data(), out_noise.data(), &r.dq[at], &r.dq_noise[at], &r.dq_terms[at]);
        for (std::size_t n = 0; n < keys.size(); ++n) {
          const reference::KeyGrad& kg = shares[n];
          const std::size_t cell = static_cast<std::size_t>((b * Lk + keys[n]) * Hk + g);
          ++terms[cell];
          for (std::int64_t x = 0; x < D; ++x) {
            const std::size_t e = cell * static_cast<std::size_t>(D) + static_cast<std::size_t>(x);
            const double qx = q[x], gx = go[x];
            r.dk[e] += scale * kg.ds * qx;
            dk_abs[e] += std::fabs(scale * kg.ds * qx);
            dk_carried[e] += std::fabs(scale) * kg.ds_noise * std::fabs(qx);
            r.dk_terms[e] += (scale * kg.ds_magnitude * qx) * (scale * kg.ds_magnitude * qx);
            r.dv[e] += kg.p * gx;
            dv_abs[e] += std::fabs(kg.p * gx);
            dv_carried[e] += kg.p_noise * std::fabs(gx);
            r.dv_terms[e] += (kg.p * gx) * (kg.p * gx);
          }
        }
      }
  for (std::size_t e = 0; e < r.dk.size(); ++e) {
    const long long n = terms[e / static_cast<std::size_t>(D)];
    r.dk_noise[e] = tolerance::gradient_sensitivity(n, dk_abs[e], dk_carried[e]);
    r.dv_noise[e] = tolerance::gradient_sensitivity(n, dv_abs[e], dv_carried[e]);
    r.dk_terms[e] = tolerance::terms_magnitude(r.dk_terms[e]);
    r.dv_terms[e] = tolerance::terms_magnitude(r.dv_terms[e]);
  }
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
