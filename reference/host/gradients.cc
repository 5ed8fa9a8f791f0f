#include "reference/host/gradients.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/geometry.h"
#include "core/tolerance.h"
#include "reference/host/exact_row.h"
#include "reference/host/logical_kv.h"

namespace flashcheck::reference {
namespace {

GradientResult zero_gradients(const KernelCase& c, bool with_noise) {
  const CaseGeometry g = geometry(c);
  GradientResult r;
  r.dq.assign(static_cast<std::size_t>(g.q_rows * c.heads * c.head_dim), 0.0);
  r.dk.assign(static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.head_dim), 0.0);
  r.dv.assign(static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.v_head_dim), 0.0);
  if (with_noise) {
    for (std::vector<double>* v : {&r.dq_noise, &r.dq_terms}) v->assign(r.dq.size(), 0.0);
    for (std::vector<double>* v : {&r.dk_noise, &r.dk_terms}) v->assign(r.dk.size(), 0.0);
    for (std::vector<double>* v : {&r.dv_noise, &r.dv_terms}) v->assign(r.dv.size(), 0.0);
  }
  return r;
}

void require_backward(const KernelCase& c, const CaseTensors& t) {
  if (!c.backward() || c.kv_storage != KvStorage::kPacked || c.kv_cache)
    throw std::invalid_argument("gradients need a backward case with packed K/V and no cache");
  if (t.dout.empty()) throw std::invalid_argument("gradients need the case's dout tensor");
}

}  // namespace

GradientResult host_gradients(const KernelCase& c, const CaseTensors& t) {
  require_backward(c, t);
  const CaseGeometry g = geometry(c);
  const std::int64_t H = c.heads, Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim, group = c.group();
  const double scale = c.softmax_scale();
  const MaskRule rule = mask_rule(c);
  GradientResult r = zero_gradients(c, true);
  ExactRow exact({.head_dim = d, .v_head_dim = dv, .scale = scale, .softcap = c.softcap});
  std::vector<double> out(static_cast<std::size_t>(dv)), out_noise(static_cast<std::size_t>(dv));
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const SeqGeometry& sg = g.seqs[b];
    const detail::LogicalKv kv = detail::gather_sequence(c, g, t, b);
    const std::int64_t lk = kv.lk, off = diagonal_offset(c.alignment, sg.lq, lk);
    // Per logical key and KV head: the gradient, the magnitudes of its terms, what the terms carry, their count.
    std::vector<double> dk(static_cast<std::size_t>(lk * Hk * d)), dk_abs(dk.size()), dk_carried(dk.size()), dk_terms(dk.size());
    std::vector<double> dvv(static_cast<std::size_t>(lk * Hk * dv)), dv_abs(dvv.size()), dv_carried(dvv.size()), dv_terms(dvv.size());
    std::vector<long long> terms(static_cast<std::size_t>(lk * Hk), 0);
    for (std::int64_t i = 0; i < sg.lq; ++i) {
      const std::int64_t row = sg.q_start + i;
      const KeyRange range = visible_keys(i, lk, off, rule);
      if (range.empty()) continue;  // no key: the row contributes nothing, its dQ stays 0
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t kh = h / group;
        exact.clear();
        for (std::int64_t j = range.lo; j < range.hi; ++j)
          exact.add_key(kv.k.data() + (j * Hk + kh) * d, kv.v.data() + (j * Hk + kh) * dv);
        const float* q = t.q.data.data() + (row * H + h) * d;
        const float* dout = t.dout.data.data() + (row * H + h) * dv;
        exact.compute(q, out.data(), out_noise.data());
        const std::size_t qcell = static_cast<std::size_t>((row * H + h) * d);
        const std::vector<KeyGrad>& keys = exact.backward(dout, out.data(), out_noise.data(), r.dq.data() + qcell,
                                                          r.dq_noise.data() + qcell, r.dq_terms.data() + qcell);
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const KeyGrad& kg = keys[static_cast<std::size_t>(j - range.lo)];
          const std::size_t cell = static_cast<std::size_t>(j * Hk + kh);
          ++terms[cell];
          for (std::int64_t x = 0; x < d; ++x) {
            const double qx = static_cast<double>(q[x]);
            const std::size_t at = cell * static_cast<std::size_t>(d) + static_cast<std::size_t>(x);
            dk[at] += scale * kg.ds * qx;
            dk_abs[at] += std::fabs(scale * kg.ds * qx);
            dk_carried[at] += std::fabs(scale) * kg.ds_noise * std::fabs(qx);
            dk_terms[at] += (scale * kg.ds_magnitude * qx) * (scale * kg.ds_magnitude * qx);
          }
          for (std::int64_t x = 0; x < dv; ++x) {
            const double gx = static_cast<double>(dout[x]);
            const std::size_t at = cell * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x);
            dvv[at] += kg.p * gx;
            dv_abs[at] += std::fabs(kg.p * gx);
            dv_carried[at] += kg.p_noise * std::fabs(gx);
            dv_terms[at] += (kg.p * gx) * (kg.p * gx);
          }
        }
      }
    }
    // Logical key j is storage row k_start + p0 + j (packed K/V).
    for (std::int64_t j = 0; j < lk; ++j)
      for (std::int64_t kh = 0; kh < Hk; ++kh) {
        const std::size_t cell = static_cast<std::size_t>(j * Hk + kh);
        const std::size_t to = static_cast<std::size_t>((sg.k_start + sg.p0 + j) * Hk + kh);
        for (std::int64_t x = 0; x < d; ++x) {
          const std::size_t at = cell * static_cast<std::size_t>(d) + static_cast<std::size_t>(x);
          r.dk[to * static_cast<std::size_t>(d) + static_cast<std::size_t>(x)] = dk[at];
          r.dk_terms[to * static_cast<std::size_t>(d) + static_cast<std::size_t>(x)] = tolerance::terms_magnitude(dk_terms[at]);
          r.dk_noise[to * static_cast<std::size_t>(d) + static_cast<std::size_t>(x)] =
              tolerance::gradient_sensitivity(terms[cell], dk_abs[at], dk_carried[at]);
        }
        for (std::int64_t x = 0; x < dv; ++x) {
          const std::size_t at = cell * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x);
          r.dv[to * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x)] = dvv[at];
          r.dv_terms[to * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x)] = tolerance::terms_magnitude(dv_terms[at]);
          r.dv_noise[to * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x)] =
              tolerance::gradient_sensitivity(terms[cell], dv_abs[at], dv_carried[at]);
        }
      }
  }
  return r;
}

GradientResult low_precision_gradients(const KernelCase& c, const CaseTensors& t) {
  require_backward(c, t);
  const CaseGeometry g = geometry(c);
  const std::int64_t H = c.heads, Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim, group = c.group();
  const DType dt = c.dtype;
  const float scale = static_cast<float>(c.softmax_scale()), cap = static_cast<float>(c.softcap);
  const MaskRule rule = mask_rule(c);
  GradientResult r = zero_gradients(c, false);
  const auto rd = [dt](float x) { return round_float(dt, x); };
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const SeqGeometry& sg = g.seqs[b];
    detail::LogicalKv kv = detail::gather_sequence(c, g, t, b);
    std::vector<float> kscaled = kv.k;
    for (float& x : kscaled) x = rd(x * scale);  // k' = rd(k * scale), as the forward baseline
    const std::int64_t lk = kv.lk, off = diagonal_offset(c.alignment, sg.lq, lk);
    // Group sums of the per-query-head gradients (fp32 accumulation of dtype values).
    std::vector<float> dk_group(static_cast<std::size_t>(lk * Hk * d), 0.0f), dv_group(static_cast<std::size_t>(lk * Hk * dv), 0.0f);
    std::vector<float> dk_head(static_cast<std::size_t>(lk * d)), dv_head(static_cast<std::size_t>(lk * dv));
    std::vector<float> tval(static_cast<std::size_t>(lk)), p(static_cast<std::size_t>(lk)), dp(static_cast<std::size_t>(lk));
    std::vector<float> ds(static_cast<std::size_t>(lk)), dqacc(static_cast<std::size_t>(d));
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t kh = h / group;
      std::fill(dk_head.begin(), dk_head.end(), 0.0f);
      std::fill(dv_head.begin(), dv_head.end(), 0.0f);
      for (std::int64_t i = 0; i < sg.lq; ++i) {
        const std::int64_t row = sg.q_start + i;
        const KeyRange range = visible_keys(i, lk, off, rule);
        if (range.empty()) continue;
        const float* q = t.q.data.data() + (row * H + h) * d;
        const float* dout = t.dout.data.data() + (row * H + h) * dv;
        // Forward: logits, softmax, weights rounded to the dtype.
        float m = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const float* k = kscaled.data() + (j * Hk + kh) * d;
          float dot = 0.0f;
          for (std::int64_t x = 0; x < d; ++x) dot += q[x] * k[x];
          float l = rd(dot);
          if (cap > 0) {
            tval[static_cast<std::size_t>(j)] = rd(std::tanh(rd(l / cap)));
            l = rd(tval[static_cast<std::size_t>(j)] * cap);
          }
          p[static_cast<std::size_t>(j)] = l;
          if (l > m || std::isnan(l)) m = l;
        }
        float z = 0.0f;
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m);
          z += p[static_cast<std::size_t>(j)];
        }
        for (std::int64_t j = range.lo; j < range.hi; ++j) p[static_cast<std::size_t>(j)] = rd(p[static_cast<std::size_t>(j)] / z);
        // Backward through P.V and the softmax.
        float big_d = 0.0f;
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const float* v = kv.v.data() + (j * Hk + kh) * dv;
          float acc = 0.0f;
          for (std::int64_t x = 0; x < dv; ++x) acc += dout[x] * v[x];
          dp[static_cast<std::size_t>(j)] = rd(acc);
          big_d += p[static_cast<std::size_t>(j)] * dp[static_cast<std::size_t>(j)];
          float* dvh = dv_head.data() + j * dv;
          for (std::int64_t x = 0; x < dv; ++x) dvh[x] += p[static_cast<std::size_t>(j)] * dout[x];
        }
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const std::size_t uj = static_cast<std::size_t>(j);
          float g = rd(p[uj] * (dp[uj] - big_d));
          if (cap > 0) {
            const float dtanh = rd(g * cap);
            const float du = rd(dtanh * (1.0f - tval[uj] * tval[uj]));
            g = rd(du / cap);
          }
          ds[uj] = g;
        }
        std::fill(dqacc.begin(), dqacc.end(), 0.0f);
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const float* k = kscaled.data() + (j * Hk + kh) * d;
          float* dkh = dk_head.data() + j * d;
          for (std::int64_t x = 0; x < d; ++x) {
            dqacc[static_cast<std::size_t>(x)] += ds[static_cast<std::size_t>(j)] * k[x];
            dkh[x] += ds[static_cast<std::size_t>(j)] * q[x];
          }
        }
        double* dq = r.dq.data() + (row * H + h) * d;
        for (std::int64_t x = 0; x < d; ++x) dq[x] = rd(dqacc[static_cast<std::size_t>(x)]);
      }
      for (std::int64_t j = 0; j < lk; ++j) {
        for (std::int64_t x = 0; x < d; ++x)
          dk_group[static_cast<std::size_t>((j * Hk + kh) * d + x)] += rd(rd(dk_head[static_cast<std::size_t>(j * d + x)]) * scale);
        for (std::int64_t x = 0; x < dv; ++x)
          dv_group[static_cast<std::size_t>((j * Hk + kh) * dv + x)] += rd(dv_head[static_cast<std::size_t>(j * dv + x)]);
      }
    }
    for (std::int64_t j = 0; j < lk; ++j)
      for (std::int64_t kh = 0; kh < Hk; ++kh) {
        const std::int64_t to = (sg.k_start + sg.p0 + j) * Hk + kh;
        for (std::int64_t x = 0; x < d; ++x) r.dk[static_cast<std::size_t>(to * d + x)] = rd(dk_group[static_cast<std::size_t>((j * Hk + kh) * d + x)]);
        for (std::int64_t x = 0; x < dv; ++x)
          r.dv[static_cast<std::size_t>(to * dv + x)] = rd(dv_group[static_cast<std::size_t>((j * Hk + kh) * dv + x)]);
      }
  }
  return r;
}

}  // namespace flashcheck::reference
