#include "reference/gradient_agreement.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "core/dtype.h"
#include "core/tolerance.h"

namespace flashcheck::reference {
namespace {

struct Part {
  const char* name;
  const std::vector<double>& host;
  const std::vector<double>& device;
};

// The first element where |host - device| > bound(at), or where exactly one is NaN; "" if none.
template <class Bound>
std::string first_beyond(const char* what, const Part& part, Bound&& bound) {
  if (part.host.size() != part.device.size())
    return fmt::format("{} {}: {} elements on the host, {} on the device", what, part.name, part.host.size(), part.device.size());
  for (std::size_t at = 0; at < part.host.size(); ++at) {
    const double h = part.host[at], d = part.device[at];
    if (std::isnan(h) || std::isnan(d)) {
      if (std::isnan(h) != std::isnan(d)) return fmt::format("{} {} element {}: host {} device {}", what, part.name, at, h, d);
      continue;
    }
    const double b = bound(at);
    if (h != d && !(std::fabs(h - d) <= b))  // h != d: the same infinity agrees
      return fmt::format("{} {} element {}: host {:.17g} device {:.17g}, difference {:.3g} > {:.3g}", what, part.name, at, h, d,
                         std::fabs(h - d), b);
  }
  return "";
}

struct ErrorScale {
  double max = 0, mean = 0;
  std::size_t nan = 0;
};

// max and mean |base - truth| over the elements with a finite truth; an infinite baseline error counts as infinite.
ErrorScale error_scale(const std::vector<double>& truth, const std::vector<double>& base) {
  ErrorScale e;
  std::size_t n = 0;
  for (std::size_t at = 0; at < truth.size() && at < base.size(); ++at) {
    if (!std::isfinite(truth[at])) continue;
    if (std::isnan(base[at])) {
      ++e.nan;
      continue;
    }
    const double err = std::fabs(base[at] - truth[at]);
    e.max = std::max(e.max, err);
    e.mean += err;
    ++n;
  }
  if (n > 0) e.mean /= static_cast<double>(n);
  return e;
}

// Within a factor of two of each other, or both below the rule's floor (where the floor decides the bound anyway).
bool same_scale(double a, double b, double floor) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::max(a, b) <= 2 * std::min(a, b) || std::max(a, b) <= floor;
}

// The largest floor of the rule's max check over the gradient's elements (core/tolerance.h max_floor: the dtype
// spacings at |truth| + 0.3, or the fp32 noise floor of the element's sensitivity).
double rule_floor(DType dt, const std::vector<double>& truth, const std::vector<double>& noise) {
  const detail::FloatFormat f = detail::format_of(dt);
  double floor = 0;
  for (std::size_t at = 0; at < truth.size() && at < noise.size(); ++at)
    if (std::isfinite(truth[at]))
      floor = std::max(floor, tolerance::max_floor(tolerance::spacing(truth[at], f.mantissa_bits, f.min_normal_exp), noise[at]));
  return floor;
}

std::string baseline_scale_disagreement(DType dt, const char* name, const std::vector<double>& truth, const std::vector<double>& noise,
                                        const std::vector<double>& host, const std::vector<double>& device) {
  if (host.size() != device.size())
    return fmt::format("baseline {}: {} elements on the host, {} on the device", name, host.size(), device.size());
  const double floor = rule_floor(dt, truth, noise);
  const ErrorScale h = error_scale(truth, host), d = error_scale(truth, device);
  if (h.nan != d.nan) return fmt::format("baseline {}: {} NaN elements on the host, {} on the device", name, h.nan, d.nan);
  if (!same_scale(h.max, d.max, floor))
    return fmt::format("baseline {}: largest error {:.3g} on the host, {:.3g} on the device (rule floor {:.3g})", name, h.max,
                       d.max, floor);
  if (!same_scale(h.mean, d.mean, floor))
    return fmt::format("baseline {}: mean error {:.3g} on the host, {:.3g} on the device (rule floor {:.3g})", name, h.mean,
                       d.mean, floor);
  return "";
}

}  // namespace

std::string gradient_disagreement(const KernelCase& c, const GradientResult& ht, const GradientResult& hb,
                                  const GradientResult& dt, const GradientResult& db, GradientAccuracy accuracy) {
  constexpr double kTiny = std::numeric_limits<double>::min();
  const bool fp64 = accuracy == GradientAccuracy::kFp64;
  const double noise_weight = fp64 ? 1.0 : tolerance::kNoiseLambda;
  const int value_bits = fp64 ? 36 : 24, estimate_bits = fp64 ? 24 : 5;
  // At fp32 accuracy, also 2^-40 of the tensor's largest magnitude, or of the smallest floor the rule gives any
  // element in the dtype (the mean check's share at truth 0), whichever is larger: fp32 and the tensor cores' bf16
  // pieces lose what falls below their range (a weight of e^-500 is 0 there and 1e-217 in fp64; a device run of
  // fp16 one-hot softmaxes found dK at 1e-229 against 0), and a difference that far below every floor moves no
  // verdict.
  const detail::FloatFormat format = detail::format_of(c.dtype);
  const double invisible =
      std::ldexp(tolerance::kMeanFloorFraction * tolerance::spacing(0.0, format.mantissa_bits, format.min_normal_exp), -40);
  auto underflow = [&](const std::vector<double>& v) {
    double most = 0;
    for (double x : v)
      if (std::isfinite(x)) most = std::max(most, std::fabs(x));
    return fp64 ? 0.0 : std::max(std::ldexp(most, -40), invisible);
  };
  const std::vector<double>* noise[] = {&ht.dq_noise, &ht.dk_noise, &ht.dv_noise};
  const Part truths[] = {{"dq", ht.dq, dt.dq}, {"dk", ht.dk, dt.dk}, {"dv", ht.dv, dt.dv}};
  const Part noises[] = {{"dq noise", ht.dq_noise, dt.dq_noise}, {"dk noise", ht.dk_noise, dt.dk_noise}, {"dv noise", ht.dv_noise, dt.dv_noise},
                         {"dq terms", ht.dq_terms, dt.dq_terms}, {"dk terms", ht.dk_terms, dt.dk_terms}, {"dv terms", ht.dv_terms, dt.dv_terms}};
  const Part bases[] = {{"dq", hb.dq, db.dq}, {"dk", hb.dk, db.dk}, {"dv", hb.dv, db.dv}};
  for (int i = 0; i < 3; ++i) {
    const std::vector<double>& n = *noise[i];
    if (n.size() != truths[i].host.size()) return fmt::format("host {} has no sensitivities", truths[i].name);
    const std::vector<double>& h = truths[i].host;
    const double slack = underflow(h) + kTiny;
    if (std::string why = first_beyond("reference", truths[i], [&](std::size_t at) {
          return std::ldexp(noise_weight * n[at] + std::fabs(h[at]), -value_bits) + slack;
        }); !why.empty())
      return why;
  }
  // The estimates: 2^-estimate_bits of themselves, and the rounding the values are allowed above. An element's terms
  // (and sensitivity) are sums of its terms' magnitudes, and where those are rounding residue, so are they: a device
  // run found dK's terms at 6e-22 on the host and 7e-23 on the device, both from one pair whose ds was p D c with
  // D = dO . O, O's one-hot channel a cancellation of 1e-16 relative in each side's summation order (results/RESULTS.md).
  for (int i = 0; i < 6; ++i) {
    const Part& p = noises[i];
    const std::vector<double>& n = *noise[i % 3];
    const double slack = underflow(p.host) + kTiny;
    if (std::string why = first_beyond("reference", p, [&](std::size_t at) {
          return std::ldexp(std::fabs(p.host[at]), -estimate_bits) + std::ldexp(noise_weight * n[at], -value_bits) + slack;
        });
        !why.empty())
      return why;
  }
  // The baselines as the rule uses them: each gradient's largest and mean error against the truth, which scale the
  // bound (core/compare_gradients.cc). Element by element they may differ by far more: a dtype computation's
  // intermediates round at ties of two summation orders, and with softcap one ulp of a saturated tanh moves
  // 1 - t^2 by orders of magnitude (a device run of 7,831 cases found such elements).
  for (int i = 0; i < 3; ++i)
    if (std::string why = baseline_scale_disagreement(c.dtype, bases[i].name, truths[i].host, *noise[i], bases[i].host, bases[i].device);
        !why.empty())
      return why;
  return "";
}

}  // namespace flashcheck::reference
