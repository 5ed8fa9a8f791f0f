#include "reference/host/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/geometry.h"
#include "reference/host/logical_kv.h"

namespace flashcheck::reference {

Result host_attention(const KernelCase& c, const CaseTensors& t, EmptyRow empty_row) {
  const CaseGeometry g = geometry(c);
  const std::int64_t H = c.heads, d = c.head_dim, dv = c.v_head_dim, Hk = c.kv_heads, group = c.group();
  const double scale = c.softmax_scale();
  const MaskRule rule = mask_rule(c);
  Result r;
  r.out.assign(static_cast<std::size_t>(g.total_q * H * dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(g.total_q * H), -std::numeric_limits<double>::infinity());
  r.empty.assign(static_cast<std::size_t>(g.total_q * H), 0);
  r.noise.assign(r.out.size(), 0.0);
  r.lse_noise.assign(r.lse.size(), 0.0);

  std::vector<double> s, sabs, o(static_cast<std::size_t>(dv)), spread(static_cast<std::size_t>(dv));
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const SeqGeometry& sg = g.seqs[b];
    const detail::LogicalKv kv = detail::gather_sequence(c, g, t, b);
    const std::int64_t lk = kv.lk;
    const std::int64_t off = diagonal_offset(c.alignment, sg.lq, lk);
    s.resize(static_cast<std::size_t>(lk));
    sabs.resize(static_cast<std::size_t>(lk));
    for (std::int64_t i = 0; i < sg.lq; ++i) {
      const std::int64_t row = sg.q_start + i;
      const KeyRange range = visible_keys(i, lk, off, rule);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t kh = h / group;  // query head h reads KV head h / (H / Hk)
        double* out = r.out.data() + (row * H + h) * dv;
        const std::size_t cell = static_cast<std::size_t>(row * H + h);
        if (range.empty()) {
          r.empty[cell] = 1;
          if (empty_row == EmptyRow::kNaN) {
            for (std::int64_t x = 0; x < dv; ++x) out[x] = std::numeric_limits<double>::quiet_NaN();
            r.lse[cell] = std::numeric_limits<double>::quiet_NaN();
          } else if (empty_row == EmptyRow::kUniform && lk > 0) {
            // The mean of V over the sequence's keys; its fp32 sensitivity is that of a sum of lk terms.
            double* noise = r.noise.data() + (row * H + h) * dv;
            for (std::int64_t j = 0; j < lk; ++j)
              for (std::int64_t x = 0; x < dv; ++x) {
                const double v = kv.v[static_cast<std::size_t>((j * Hk + kh) * dv + x)];
                out[x] += v;
                noise[x] += std::fabs(v);
              }
            for (std::int64_t x = 0; x < dv; ++x) {
              out[x] /= static_cast<double>(lk);
              noise[x] = std::sqrt(static_cast<double>(lk + 1)) * noise[x] / static_cast<double>(lk) + std::fabs(out[x]);
            }
          }
          continue;
        }
        const float* q = t.q.data.data() + (row * H + h) * d;
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const float* k = kv.k.data() + (j * Hk + kh) * d;
          double dot = 0.0, dot_abs = 0.0;
          for (std::int64_t x = 0; x < d; ++x) {
            dot += static_cast<double>(q[x]) * static_cast<double>(k[x]);
            dot_abs += std::fabs(static_cast<double>(q[x]) * static_cast<double>(k[x]));
          }
          sabs[static_cast<std::size_t>(j)] = std::fabs(scale) * dot_abs;
          double logit = scale * dot;
          if (c.softcap > 0) logit = c.softcap * std::tanh(logit / c.softcap);
          s[static_cast<std::size_t>(j)] = logit;
          if (logit > m || std::isnan(logit)) m = logit;  // NaN propagates instead of being skipped
        }
        double z = 0.0;
        std::fill(o.begin(), o.end(), 0.0);
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const double p = std::exp(s[static_cast<std::size_t>(j)] - m);
          z += p;
          const float* v = kv.v.data() + (j * Hk + kh) * dv;
          for (std::int64_t x = 0; x < dv; ++x) o[static_cast<std::size_t>(x)] += p * static_cast<double>(v[x]);
        }
        for (std::int64_t x = 0; x < dv; ++x) out[x] = o[static_cast<std::size_t>(x)] / z;
        r.lse[cell] = m + std::log(z);
        // First-order fp32 rounding sensitivity of this row, in units of the unit roundoff u, following
        // the probabilistic error analysis of inner products (Higham & Mary 2019: errors grow like
        // sqrt(n) u rather than n u):
        //   logits:  |ds_j| <~ sqrt(d) S_j with S_j = |scale| sum_x |q_x k_jx| (softcap only shrinks it)
        //   softmax: dP_j = P_j (ds_j - sum_i P_i ds_i), so |dO_x| <~ max_j |ds_j| sum_j P_j |v_jx - O_x|
        //   P.V:     a sum of n terms, sqrt(n + 1) sum_j P_j |v_jx|, plus the final rounding |O_x|
        //   LSE:     max_j |ds_j| + |m| + |log Z| + sqrt(n + 1)
        double smax = 0.0;
        for (std::int64_t j = range.lo; j < range.hi; ++j) smax = std::max(smax, sabs[static_cast<std::size_t>(j)]);
        const double ds = std::sqrt(static_cast<double>(d)) * smax;
        const double sum_terms = std::sqrt(static_cast<double>(range.hi - range.lo + 1));
        std::fill(o.begin(), o.end(), 0.0);  // reused: sum_j P_j |v_jx - O_x|
        std::vector<double>& a = spread;     // sum_j P_j |v_jx|
        std::fill(a.begin(), a.end(), 0.0);
        for (std::int64_t j = range.lo; j < range.hi; ++j) {
          const double p = std::exp(s[static_cast<std::size_t>(j)] - m) / z;
          const float* v = kv.v.data() + (j * Hk + kh) * dv;
          for (std::int64_t x = 0; x < dv; ++x) {
            o[static_cast<std::size_t>(x)] += p * std::fabs(static_cast<double>(v[x]) - out[x]);
            a[static_cast<std::size_t>(x)] += p * std::fabs(static_cast<double>(v[x]));
          }
        }
        double* noise = r.noise.data() + (row * H + h) * dv;
        for (std::int64_t x = 0; x < dv; ++x)
          noise[x] = ds * o[static_cast<std::size_t>(x)] + sum_terms * a[static_cast<std::size_t>(x)] + std::fabs(out[x]);
        r.lse_noise[cell] = ds + std::fabs(m) + std::fabs(std::log(z)) + sum_terms;
      }
    }
  }
  return r;
}

}  // namespace flashcheck::reference
