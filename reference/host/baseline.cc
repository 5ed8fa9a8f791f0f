#include "reference/host/baseline.h"

#include <cmath>
#include <limits>

#include "core/geometry.h"
#include "reference/host/logical_kv.h"

namespace flashcheck::reference {

Result low_precision_baseline(const KernelCase& c, const CaseTensors& t, EmptyRow empty_row) {
  const CaseGeometry g = geometry(c);
  const std::int64_t H = c.heads, d = c.head_dim, dv = c.v_head_dim, Hk = c.kv_heads, group = c.group();
  const DType dt = c.dtype;
  const float scale = static_cast<float>(c.softmax_scale());
  const float cap = static_cast<float>(c.softcap);
  const MaskRule rule = mask_rule(c);
  // Uniform empty rows are defined by the exact reference; reuse it rather than restate it.
  const Result exact_empty = empty_row == EmptyRow::kUniform ? host_attention(c, t, empty_row) : Result{};
  Result r;
  r.out.assign(static_cast<std::size_t>(g.total_q * H * dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(g.total_q * H), -std::numeric_limits<double>::infinity());
  r.empty.assign(static_cast<std::size_t>(g.total_q * H), 0);

  std::vector<float> s, p, o(static_cast<std::size_t>(dv));
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const SeqGeometry& sg = g.seqs[b];
    detail::LogicalKv kv = detail::gather_sequence(c, g, t, b);
    for (float& x : kv.k) x = round_float(dt, x * scale);  // scale applied to k, then rounded
    const std::int64_t lk = kv.lk;
    const std::int64_t off = diagonal_offset(c.alignment, sg.lq, lk);
    s.resize(static_cast<std::size_t>(lk));
    p.resize(static_cast<std::size_t>(lk));
    for (std::int64_t i = 0; i < sg.lq; ++i) {
      const std::int64_t row = sg.q_start + i;
      const KeyRange range = visible_keys(i, lk, off, rule);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t kh = h / group;
        double* out = r.out.data() + (row * H + h) * dv;
        const std::size_t cell = static_cast<std::size_t>(row * H + h);
        if (range.empty()) {
          r.empty[cell] = 1;
          if (empty_row == EmptyRow::kNaN) {
            for (std::int64_t x = 0; x < dv; ++x) out[x] = std::numeric_limits<double>::quiet_NaN();
            r.lse[cell] = std::numeric_limits<double>::quiet_NaN();
          } else if (empty_row == EmptyRow::kUniform) {
            for (std::int64_t x = 0; x < dv; ++x)
              out[x] = round_to(dt, exact_empty.out[static_cast<std::size_t>((row * H + h) * dv + x)]);
          }
          continue;
        }
        const float* q = t.q.data.data() + (row * H + h) * d;
        float m = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const float* k = kv.k.data() + (j * Hk + kh) * d;
          float dot = 0.0f;
          for (std::int64_t x = 0; x < d; ++x) dot += q[x] * k[x];
          float logit = round_float(dt, dot);
          if (cap > 0) logit = round_float(dt, round_float(dt, std::tanh(round_float(dt, logit / cap))) * cap);
          s[static_cast<std::size_t>(j)] = logit;
          if (logit > m || std::isnan(logit)) m = logit;
        }
        float z = 0.0f;
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          p[static_cast<std::size_t>(j)] = std::exp(s[static_cast<std::size_t>(j)] - m);
          z += p[static_cast<std::size_t>(j)];
        }
        std::fill(o.begin(), o.end(), 0.0f);
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const float pj = round_float(dt, p[static_cast<std::size_t>(j)] / z);
          const float* v = kv.v.data() + (j * Hk + kh) * dv;
          for (std::int64_t x = 0; x < dv; ++x) o[static_cast<std::size_t>(x)] += pj * v[x];
        }
        for (std::int64_t x = 0; x < dv; ++x) out[x] = round_float(dt, o[static_cast<std::size_t>(x)]);
        r.lse[cell] = static_cast<double>(m + std::log(z));
      }
    }
  }
  return r;
}

}  // namespace flashcheck::reference
