// The gradient comparators of core/compare.h: the tolerance rule applied to dQ, dK and dV on their defined rows.
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "core/compare.h"
#include "core/defined_memory.h"
#include "core/geometry.h"

namespace flashcheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using TensorRows = GradientTensor;

std::array<TensorRows, 3> gradient_rows(const KernelCase& c, bool zero_unused_keys) {
  const CaseGeometry g = geometry(c);
  const std::vector<RowSpan> keys = key_rows(g, zero_unused_keys);
  return {TensorRows{"dq", query_rows(g), c.heads, c.head_dim}, TensorRows{"dk", keys, c.kv_heads, c.head_dim},
          TensorRows{"dv", keys, c.kv_heads, c.v_head_dim}};
}

const std::vector<double>& part(const GradientResult& r, int which) { return which == 0 ? r.dq : which == 1 ? r.dk : r.dv; }
const std::vector<double>& noise_part(const GradientResult& r, int which) {
  return which == 0 ? r.dq_noise : which == 1 ? r.dk_noise : r.dv_noise;
}
const std::vector<double>& terms_part(const GradientResult& r, int which) {
  return which == 0 ? r.dq_terms : which == 1 ? r.dk_terms : r.dv_terms;
}

// Visits every defined element of one gradient: f(at, loc) with loc's b/h/i/d filled.
template <class F>
void for_each_defined(const TensorRows& t, F&& f) {
  for (std::size_t s = 0; s < t.rows.size(); ++s)
    for (std::int64_t row = t.rows[s].begin; row < t.rows[s].end; ++row)
      for (std::int64_t h = 0; h < t.heads; ++h)
        for (std::int64_t x = 0; x < t.dim; ++x)
          f(static_cast<std::size_t>((row * t.heads + h) * t.dim + x),
            ElementLoc{static_cast<std::int64_t>(s), h, row - t.rows[s].begin, x});
}

// A truth past the dtype's range rounds to an infinity: the dtype's infinity or largest value of its sign is then
// the best a kernel can return (an fp16 dK of 8e4), and such an element is not judged further.
bool beyond_range(DType dt, double truth, double out) {
  const double rounded = round_to(dt, truth);
  if (!std::isinf(rounded) || !std::isfinite(truth)) return false;
  return (out > 0) == (truth > 0) && std::fabs(out) >= detail::format_of(dt).max_finite;
}

bool has_content(const std::vector<double>& truth, const std::vector<double>& terms, std::size_t at) {
  return truth[at] != 0.0 || (!terms.empty() && terms[at] != 0.0);
}

}  // namespace

Comparison compare_gradient(DType dt, bool softcap, const GradientTensor& t, const std::vector<double>& got,
                            const std::vector<double>& truth, const std::vector<double>& base,
                            const std::vector<double>& noise, const std::vector<double>& terms, double k_max,
                            std::int64_t mean_cells) {
  Comparison cmp;
  cmp.tensor = t.name;
  const double extra = tolerance::grad_extra_floor(softcap);
  double worst = -1, err_sum = 0, base_sum = 0, mean_floor_sum = 0, spacing_sum = 0, floor_max = 0;
  std::int64_t sampled = 0;
  const double unit_roundoff = std::ldexp(1.0, -(detail::format_of(dt).mantissa_bits + 1));
  for_each_defined(t, [&](std::size_t at, ElementLoc loc) {
    const double o = got[at], r = truth[at], p = base[at];
    loc.out = o;
    loc.truth = r;
    loc.baseline = p;
    ++cmp.compared;
    if (beyond_range(dt, r, o)) return;
    double e = std::fabs(o - r);
    if (!std::isfinite(o) || !std::isfinite(r)) {
      ++cmp.nonfinite;
      e = kInf;
    }
    // The dtype floor at the magnitude of the element's terms: a flash backward rounds its terms (FA2 rounds every
    // dS to the dtype and takes dpsum from the rounded output), and where they cancel, that scale, not |truth|, is
    // the scale of its rounding error.
    const double sp = rounding_floor(dt, terms.empty() ? r : std::max(std::fabs(r), terms[at]));
    double be = std::fabs(p - r);
    if (!std::isfinite(be)) be = tolerance::overflowed_baseline_error(sp);
    const double nz = noise.empty() ? 0.0 : noise[at];
    floor_max = std::max(floor_max, tolerance::max_floor(sp, nz));
    cmp.base_max = std::max(cmp.base_max, be);
    if (has_content(truth, terms, at)) {
      ++sampled;
      const double term = terms.empty() ? 0.0 : terms[at];
      mean_floor_sum += tolerance::grad_mean_floor(rounding_floor(dt, r), unit_roundoff, term, std::fabs(r), nz);
      spacing_sum += sp;
      err_sum += std::isfinite(e) ? e : 0.0;
      base_sum += be;
    }
    if (e > worst) {
      worst = e;
      cmp.worst = loc;
    }
  });
  cmp.floor = floor_max + extra;
  cmp.err_max = worst < 0 ? 0.0 : worst;
  cmp.bound = k_max * cmp.base_max + cmp.floor;
  // The mean is over the elements with content; the rest are zero in truth, and the max check holds them there.
  const double n = static_cast<double>(std::max<std::int64_t>(sampled, 1));
  const std::int64_t cells = std::min(mean_cells, mean_cells_of(t, truth, terms));
  cmp.err_mean = cmp.nonfinite ? kInf : err_sum / n;
  cmp.base_mean = base_sum / n;
  cmp.mean_bound = mean_cells > 0 ? tolerance::kMean * cmp.base_mean +
                                        tolerance::mean_check_floor(mean_floor_sum / n, spacing_sum / n,
                                                                    std::max<std::int64_t>(cells, 1)) +
                                        extra
                                  : std::numeric_limits<double>::infinity();
  for_each_defined(t, [&](std::size_t at, const ElementLoc&) {
    if (beyond_range(dt, truth[at], got[at])) return;
    cmp.mismatches += std::fabs(got[at] - truth[at]) <= cmp.bound ? 0 : 1;  // NaN counts
  });
  return cmp;
}

namespace {

Comparison compare_pair_one(const TensorRows& t, const std::vector<double>& a, const std::vector<double>& b, double bound) {
  Comparison cmp;
  cmp.tensor = t.name;
  cmp.bound = bound;
  double worst = -1, sum = 0;
  for_each_defined(t, [&](std::size_t at, ElementLoc loc) {
    const double va = a[at], vb = b[at];
    loc.out = vb;
    loc.truth = va;
    loc.baseline = va;
    ++cmp.compared;
    double e = va == vb ? 0.0 : std::fabs(va - vb);  // the same infinity twice: a gradient past the dtype's range
    if (!(va == vb) && (!std::isfinite(va) || !std::isfinite(vb))) {
      ++cmp.nonfinite;
      e = kInf;
    }
    sum += std::isfinite(e) ? e : 0.0;
    if (!(e <= bound)) ++cmp.mismatches;
    if (e > worst) {
      worst = e;
      cmp.worst = loc;
    }
  });
  cmp.err_max = worst < 0 ? 0.0 : worst;
  cmp.err_mean = cmp.nonfinite ? kInf : sum / static_cast<double>(std::max<std::int64_t>(cmp.compared, 1));
  cmp.mean_bound = kInf;  // a pair has no baseline: only the max bound applies
  return cmp;
}

}  // namespace

std::int64_t mean_cells_of(const GradientTensor& t, const std::vector<double>& truth, const std::vector<double>& terms) {
  std::int64_t cells = 0;
  for (const RowSpan& span : t.rows)
    for (std::int64_t row = span.begin; row < span.end; ++row)
      for (std::int64_t h = 0; h < t.heads; ++h) {
        const auto first = static_cast<std::size_t>((row * t.heads + h) * t.dim);
        bool content = false;
        for (std::int64_t x = 0; x < t.dim && !content; ++x) content = has_content(truth, terms, first + static_cast<std::size_t>(x));
        cells += content ? 1 : 0;
      }
  return cells;
}

const Comparison& GradientComparisons::decisive() const {
  for (const Comparison* c : {&dq, &dk, &dv})
    if (!failure_reason(*c).empty()) return *c;
  const Comparison* best = &dq;
  for (const Comparison* c : {&dk, &dv})
    if (c->bound_use() > best->bound_use()) best = c;
  return *best;
}

GradientComparisons compare_gradients(const KernelCase& c, const GradientResult& got, const GradientResult& truth,
                                      const GradientResult& baseline, bool zero_unused_keys) {
  const auto rows = gradient_rows(c, zero_unused_keys);
  const std::int64_t query_cells = mean_cells_of(rows[0], truth.dq, truth.dq_terms);
  Comparison out[3];
  for (int w = 0; w < 3; ++w)
    out[w] = compare_gradient(c.dtype, c.softcap > 0, rows[static_cast<std::size_t>(w)], part(got, w), part(truth, w),
                              part(baseline, w), noise_part(truth, w), terms_part(truth, w),
                              tolerance::k_max(c.softcap > 0), std::max<std::int64_t>(query_cells, 1));
  return {out[0], out[1], out[2]};
}

GradientComparisons compare_gradient_pair(const KernelCase& c, const GradientResult& a, const GradientResult& b,
                                          const GradientComparisons& bounds, bool zero_unused_keys) {
  const auto rows = gradient_rows(c, zero_unused_keys);
  const double bound[3] = {bounds.dq.bound, bounds.dk.bound, bounds.dv.bound};
  Comparison out[3];
  for (int w = 0; w < 3; ++w) out[w] = compare_pair_one(rows[static_cast<std::size_t>(w)], part(a, w), part(b, w), bound[w]);
  return {out[0], out[1], out[2]};
}

std::string failure_reason(const GradientComparisons& g) {
  for (const Comparison* c : {&g.dq, &g.dk, &g.dv})
    if (std::string why = failure_reason(*c); !why.empty()) return c->tensor + ": " + why;
  return "";
}

}  // namespace flashcheck
