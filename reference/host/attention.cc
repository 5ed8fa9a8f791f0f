#include "reference/host/attention.h"

#include <cmath>
#include <limits>

#include "core/geometry.h"
#include "core/tolerance.h"
#include "reference/host/exact_row.h"
#include "reference/host/logical_kv.h"

namespace flashcheck::reference {
namespace {

// The uniform convention's empty row: the mean of V over all lk keys of the sequence (KV head kh), with
// the sensitivity of that mean.
void uniform_row(const detail::LogicalKv& kv, std::int64_t Hk, std::int64_t kh, std::int64_t dv, double* out,
                 double* noise) {
  for (std::int64_t j = 0; j < kv.lk; ++j)
    for (std::int64_t x = 0; x < dv; ++x) {
      const double v = kv.v[static_cast<std::size_t>((j * Hk + kh) * dv + x)];
      out[x] += v;
      noise[x] += std::fabs(v);  // the sum of magnitudes, until the last loop
    }
  for (std::int64_t x = 0; x < dv; ++x) {
    out[x] /= static_cast<double>(kv.lk);
    noise[x] = tolerance::uniform_mean_sensitivity(kv.lk, noise[x], out[x]);
  }
}

}  // namespace

Result host_attention(const KernelCase& c, const CaseTensors& t, EmptyRow empty_row) {
  const CaseGeometry g = geometry(c);
  const std::int64_t H = c.heads, d = c.head_dim, dv = c.v_head_dim, Hk = c.kv_heads, group = c.group();
  const MaskRule rule = mask_rule(c);
  Result r;
  r.out.assign(static_cast<std::size_t>(g.total_q * H * dv), 0.0);
  r.lse.assign(static_cast<std::size_t>(g.total_q * H), -std::numeric_limits<double>::infinity());
  r.empty.assign(static_cast<std::size_t>(g.total_q * H), 0);
  r.noise.assign(r.out.size(), 0.0);
  r.lse_noise.assign(r.lse.size(), 0.0);

  ExactRow exact({.head_dim = d, .v_head_dim = dv, .scale = c.softmax_scale(), .softcap = c.softcap});
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const SeqGeometry& sg = g.seqs[b];
    const detail::LogicalKv kv = detail::gather_sequence(c, g, t, b);
    const std::int64_t lk = kv.lk;
    const std::int64_t off = diagonal_offset(c.alignment, sg.lq, lk);
    for (std::int64_t i = 0; i < sg.lq; ++i) {
      const std::int64_t row = sg.q_start + i;
      const KeyRange range = visible_keys(i, lk, off, rule);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t kh = h / group;  // query head h reads KV head h / (H / Hk)
        const std::size_t cell = static_cast<std::size_t>(row * H + h);
        double* out = r.out.data() + cell * static_cast<std::size_t>(dv);
        double* noise = r.noise.data() + cell * static_cast<std::size_t>(dv);
        if (range.empty()) {
          r.empty[cell] = 1;
          if (empty_row == EmptyRow::kNaN) {
            for (std::int64_t x = 0; x < dv; ++x) out[x] = std::numeric_limits<double>::quiet_NaN();
            r.lse[cell] = std::numeric_limits<double>::quiet_NaN();
          } else if (empty_row == EmptyRow::kUniform && lk > 0) {
            uniform_row(kv, Hk, kh, dv, out, noise);
          }
          continue;
        }
        exact.clear();
        for (std::int64_t j = range.lo; j < range.hi; ++j)
          exact.add_key(kv.k.data() + (j * Hk + kh) * d, kv.v.data() + (j * Hk + kh) * dv);
        const RowStats st = exact.compute(t.q.data.data() + (row * H + h) * d, out, noise);
        r.lse[cell] = st.lse;
        r.lse_noise[cell] = st.lse_noise;
      }
    }
  }
  return r;
}

}  // namespace flashcheck::reference
