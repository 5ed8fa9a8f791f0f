#include "core/compare.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>

#include "core/geometry.h"

namespace flashcheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Same non-finite class: both NaN, or the same infinity.
bool same_nonfinite(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b); }

}  // namespace

double Comparison::bound_use() const {
  if (err_max == 0) return 0.0;
  return bound > 0 ? err_max / bound : kInf;
}

double Comparison::ratio() const {
  if (base_max == 0) return err_max == 0 ? 0.0 : kInf;
  return err_max / base_max;
}

ToleranceRule tolerance_for(const KernelCase& c) {
  ToleranceRule r;
  r.k_max = tolerance::k_max(c.softcap > 0);
  return r;
}

double rounding_floor(DType dt, double truth) {
  const detail::FloatFormat f = detail::format_of(dt);
  return tolerance::spacing(truth, f.mantissa_bits, f.min_normal_exp);
}

Comparison compare(const KernelCase& c, const AttentionResult& out, const AttentionResult& truth,
                   const AttentionResult& baseline, EmptyRow convention, const ToleranceRule& rule) {
  const CaseGeometry g = geometry(c);
  const std::int64_t H = c.heads, dv = c.v_head_dim;
  Comparison cmp;
  double err_sum = 0, base_sum = 0, mean_floor_sum = 0, spacing_sum = 0, floor_max = 0;
  std::int64_t compared_rows = 0;  // (row, head) cells whose elements are compared: the mean check's samples
  double lse_floor = 0;
  const bool check_lse = !out.lse.empty();
  cmp.lse_checked = check_lse;
  struct Worst {
    double err = -1;
    ElementLoc loc;
  } worst, lse_worst;

  for (std::size_t b = 0; b < g.seqs.size(); ++b) {
    const SeqGeometry& s = g.seqs[b];
    for (std::int64_t i = 0; i < s.lq; ++i) {
      const std::int64_t row = s.q_start + i;
      for (std::int64_t h = 0; h < H; ++h) {
        const std::size_t cell = static_cast<std::size_t>(row * H + h);
        const bool empty = truth.empty[cell] != 0;
        const double* o = out.out.data() + cell * static_cast<std::size_t>(dv);
        const double* t = truth.out.data() + cell * static_cast<std::size_t>(dv);
        const double* p = baseline.out.data() + cell * static_cast<std::size_t>(dv);
        if (empty) {
          ++cmp.empty_rows;
          if (convention != EmptyRow::kUniform) {
            bool wrong = false;
            for (std::int64_t x = 0; x < dv; ++x) {
              const bool ok = convention == EmptyRow::kZero ? o[x] == 0.0 : std::isnan(o[x]);
              if (!ok && !wrong) {
                wrong = true;
                if (!cmp.first_empty_wrong.valid())
                  cmp.first_empty_wrong = {static_cast<std::int64_t>(b), h, i, x, o[x], t[x], p[x]};
              }
            }
            cmp.empty_wrong += wrong ? 1 : 0;
            continue;
          }
        }
        if (dv > 0) ++compared_rows;
        for (std::int64_t x = 0; x < dv; ++x) {
          const ElementLoc loc{static_cast<std::int64_t>(b), h, i, x, o[x], t[x], p[x]};
          ++cmp.compared;
          if (!std::isfinite(t[x])) {
            // The truth itself is not finite (captured tensors can hold NaN): demand the same class.
            if (!same_nonfinite(o[x], t[x])) {
              ++cmp.nonfinite;
              if (worst.err < kInf) worst = {kInf, loc};
            }
            continue;
          }
          double e = std::fabs(o[x] - t[x]);
          if (!std::isfinite(o[x])) {
            ++cmp.nonfinite;
            e = kInf;
          }
          // A baseline that overflowed the dtype (fp16 logits past 65504: inf, then NaN) is no yardstick; such an
          // element counts as the best any output in the dtype can do, the truth rounded (half an ulp). Without
          // this the bound became infinite and any output passed.
          const double sp = rounding_floor(c.dtype, t[x]);
          double be = std::fabs(p[x] - t[x]);
          if (!std::isfinite(be)) be = tolerance::overflowed_baseline_error(sp);
          const double nz = truth.noise.empty() ? 0.0 : truth.noise[cell * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x)];
          const double fl = tolerance::max_floor(sp, nz);
          mean_floor_sum += tolerance::mean_floor(sp, nz);
          spacing_sum += sp;
          err_sum += std::isfinite(e) ? e : 0.0;
          base_sum += be;
          floor_max = std::max(floor_max, fl);
          cmp.base_max = std::max(cmp.base_max, be);
          if (e > worst.err) worst = {e, loc};
        }
        if (check_lse && !empty) {
          const double lt = truth.lse[cell], lo = out.lse[cell], lb = baseline.lse[cell];
          double e = std::fabs(lo - lt);
          if (!std::isfinite(lo)) e = kInf;
          const double lbe = std::fabs(lb - lt), lsp = rounding_floor(c.dtype, lt);
          cmp.lse_base = std::max(cmp.lse_base, std::isfinite(lbe) ? lbe : tolerance::overflowed_baseline_error(lsp));
          const double lnz = truth.lse_noise.empty() ? 0.0 : truth.lse_noise[cell];
          lse_floor = std::max(lse_floor, tolerance::max_floor(lsp, lnz));
          if (e > lse_worst.err || std::isnan(e)) lse_worst = {std::isnan(e) ? kInf : e, {static_cast<std::int64_t>(b), h, i, -1, lo, lt, lb}};
        }
      }
    }
  }

  cmp.floor = floor_max;
  cmp.err_max = worst.err < 0 ? 0.0 : worst.err;
  cmp.worst = worst.loc;
  cmp.bound = rule.k_max * cmp.base_max + cmp.floor;
  const double n = static_cast<double>(std::max<std::int64_t>(cmp.compared, 1));
  cmp.err_mean = cmp.nonfinite ? kInf : err_sum / n;
  cmp.base_mean = base_sum / n;
  cmp.mean_bound = rule.k_mean * cmp.base_mean +
                   tolerance::mean_check_floor(mean_floor_sum / n, spacing_sum / n, std::max<std::int64_t>(compared_rows, 1));
  // Mismatch count against the final bound needs a second pass over the recorded errors; recompute cheaply.
  for (std::size_t b = 0; b < g.seqs.size(); ++b) {
    const SeqGeometry& s = g.seqs[b];
    for (std::int64_t row = s.q_start; row < s.q_start + s.lq; ++row)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::size_t cell = static_cast<std::size_t>(row * H + h);
        if (truth.empty[cell] && convention != EmptyRow::kUniform) continue;
        for (std::int64_t x = 0; x < dv; ++x) {
          const std::size_t at = cell * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x);
          const double t = truth.out[at], o = out.out[at];
          const bool ok = std::isfinite(t) ? std::fabs(o - t) <= cmp.bound : same_nonfinite(o, t);
          cmp.mismatches += ok ? 0 : 1;
        }
      }
  }
  if (check_lse) {
    cmp.lse_err = lse_worst.err < 0 ? 0.0 : lse_worst.err;
    cmp.lse_worst = lse_worst.loc;
    cmp.lse_bound = rule.k_lse * cmp.lse_base + lse_floor;
  }
  return cmp;
}

double tolerance_bound(const KernelCase& c, const AttentionResult& truth, const AttentionResult& baseline,
                       EmptyRow convention) {
  return compare(c, baseline, truth, baseline, convention, tolerance_for(c)).bound;
}

Comparison compare_outputs(const KernelCase& c, const AttentionResult& a, const AttentionResult& b,
                           const std::vector<std::uint8_t>& empty, double bound) {
  const CaseGeometry g = geometry(c);
  const std::int64_t H = c.heads, dv = c.v_head_dim;
  Comparison cmp;
  cmp.bound = bound;
  double worst = -1, sum = 0;
  for (std::size_t bi = 0; bi < g.seqs.size(); ++bi) {
    const SeqGeometry& s = g.seqs[bi];
    for (std::int64_t i = 0; i < s.lq; ++i)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::size_t cell = static_cast<std::size_t>((s.q_start + i) * H + h);
        const bool is_empty = empty[cell] != 0;
        cmp.empty_rows += is_empty;
        bool row_wrong = false;
        for (std::int64_t x = 0; x < dv; ++x) {
          const std::size_t at = cell * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x);
          const double va = a.out[at], vb = b.out[at];
          const ElementLoc loc{static_cast<std::int64_t>(bi), h, i, x, vb, va, va};
          if (is_empty) {
            // Empty rows hold the convention's value; a NaN's payload is not part of it.
            const bool same = std::memcmp(&va, &vb, sizeof va) == 0 || (va == 0 && vb == 0) || (std::isnan(va) && std::isnan(vb));
            if (!same && !row_wrong) {
              row_wrong = true;
              if (!cmp.first_empty_wrong.valid()) cmp.first_empty_wrong = loc;
            }
            continue;
          }
          ++cmp.compared;
          double e = std::fabs(va - vb);
          if (!std::isfinite(va) || !std::isfinite(vb)) {
            ++cmp.nonfinite;
            e = kInf;
          }
          sum += std::isfinite(e) ? e : 0.0;
          if (!(e <= bound)) ++cmp.mismatches;
          if (e > worst) {
            worst = e;
            cmp.worst = loc;
          }
        }
        cmp.empty_wrong += row_wrong;
      }
  }
  cmp.err_max = worst < 0 ? 0.0 : worst;
  cmp.err_mean = cmp.nonfinite ? kInf : sum / static_cast<double>(std::max<std::int64_t>(cmp.compared, 1));
  cmp.mean_bound = kInf;  // a pair has no baseline: only the max bound applies
  return cmp;
}

std::string failure_reason(const Comparison& cmp) {
  if (cmp.nonfinite > 0)
    return fmt::format("{} NaN/Inf {} element{} where the truth is finite", cmp.nonfinite,
                       cmp.tensor.empty() ? "output" : "gradient", cmp.nonfinite > 1 ? "s" : "");
  // An infinite bound (inputs past the dtype's range make the truth's sensitivity infinite) would pass any
  // output: such a case is not judged, it fails.
  if (!std::isfinite(cmp.bound) || (cmp.lse_checked && !std::isfinite(cmp.lse_bound)))
    return fmt::format("the tolerance bound is not finite (output {:.3g}, LSE {:.3g}): the case cannot be judged",
                       cmp.bound, cmp.lse_bound);
  if (cmp.empty_wrong > 0) {
    const ElementLoc& l = cmp.first_empty_wrong;
    return fmt::format("{} empty row{} break the declared convention (first: b{} h{} i{} d{} = {})", cmp.empty_wrong,
                       cmp.empty_wrong > 1 ? "s" : "", l.b, l.h, l.i, l.d, l.out);
  }
  if (!(cmp.err_max <= cmp.bound))
    return fmt::format("max error {:.3g} exceeds the bound {:.3g} ({} element{} over)", cmp.err_max, cmp.bound,
                       cmp.mismatches, cmp.mismatches == 1 ? "" : "s");
  if (!(cmp.err_mean <= cmp.mean_bound))
    return fmt::format("mean error {:.3g} exceeds the bound {:.3g} ({} x baseline mean {:.3g})", cmp.err_mean,
                       cmp.mean_bound, tolerance::kMean, cmp.base_mean);
  if (cmp.lse_checked && !(cmp.lse_err <= cmp.lse_bound))
    return fmt::format("LSE error {:.3g} exceeds the bound {:.3g}", cmp.lse_err, cmp.lse_bound);
  return "";
}

}  // namespace flashcheck
