#include "properties/integration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <limits>

#include "core/compare.h"
#include "core/recipe.h"
#include "oracles/hf_eager.h"
#include "oracles/hf_sdpa_path.h"

namespace flashcheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

IntegrationResult check_integration(hf::Profile profile, Kernel& k, const ModelCase& m, hf::PathDefect defect) {
  return check_integration(profile, k, m, materialize(m), defect);
}

IntegrationResult check_sdpa_integration(hf::Profile profile, Kernel& k, const ModelCase& m, hf::PathDefect defect) {
  return check_sdpa_integration(profile, k, m, materialize(m), defect);
}

namespace {

using Clock = std::chrono::steady_clock;

// Names a failure that is a documented divergence of the profile (with a defect, only where the intact path
// fails the same way: the defect must change the outcome to be seen), then stamps the time.
IntegrationResult finish(IntegrationResult r, hf::Profile profile, hf::PathDefect defect, Clock::time_point start,
                         const std::function<std::optional<hf::Divergence>()>& known,
                         const std::function<Verdict()>& intact) {
  Verdict& v = r.verdict;
  if (v.kind != VerdictKind::kPass && v.kind != VerdictKind::kUnsupported && hf::profile_spec(profile).documented_divergences) {
    r.known = known();
    if (r.known && defect != hf::PathDefect::kNone) {
      const Verdict ok = intact();
      if (ok.kind != v.kind || ok.reason.find(v.reason) == std::string::npos) r.known.reset();
    }
    if (r.known) v.reason = fmt::format("known divergence {} ({}): {}", r.known->id, r.known->what, v.reason);
  }
  v.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

// Rows that are not comparable (a row without a key, a padding query) carry no model output, but the next layer reads
// them: its eager P·V multiplies a padding row by 0, and 0 × NaN is NaN in every row. So they must be finite. What
// finite value they hold is the release's business: 0 (pad_input's zero fill, FlashAttention's empty row), eager's
// value (eager itself, SDPA with _unmask_unattended: for a row without a key, finfo.min on every logit makes it the
// mean of V over every column), or attention over keys eager does not allow (hf-main's flash path unpads the keys
// before it applies a window, so a padding query under a window of 1 attends to the last valid key): the counts say
// which. Returns the reason of the first non-finite row, or empty.
std::string judge_uncomparable_rows(IntegrationResult& r, const ModelCase& m, const ModelTensors& t,
                                    const hf::EagerResult& eager, const hf::ExactAttention& exact,
                                    const std::vector<double>& out) {
  const std::int64_t H = m.heads, Hk = m.kv_heads, D = m.head_dim, Lk = m.kv_len();
  std::string first;
  std::int64_t bad = 0;
  for (std::int64_t b = 0; b < m.batch; ++b)
    for (std::int64_t i = 0; i < m.q_len; ++i) {
      const hf::RowFlag flag = eager.mask.row(b, i);
      if (flag == hf::RowFlag::kComparable) continue;
      const std::size_t row = static_cast<std::size_t>((b * m.q_len + i) * H * D);
      bool zero = true;
      std::int64_t nonfinite = 0;
      double err = 0, bound = 0;
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          const std::size_t at = row + static_cast<std::size_t>(h * D + d);
          double x = exact.out[at];
          if (flag == hf::RowFlag::kNoKey) {
            x = 0;
            for (std::int64_t j = 0; j < Lk; ++j)
              x += t.v.data[static_cast<std::size_t>(((b * Lk + j) * Hk + h / m.group()) * D + d)];
            x /= static_cast<double>(std::max<std::int64_t>(Lk, 1));
          }
          const double f = out[at];
          nonfinite += std::isfinite(f) ? 0 : 1;
          zero = zero && f == 0.0;
          err = std::max(err, std::fabs(f - x));
          bound = std::max(bound, kIntegrationK * std::fabs(eager.out.data[at] - x) +
                                      tolerance::max_floor(rounding_floor(m.dtype, x), exact.noise[at]));
        }
      if (nonfinite > 0) {
        if (bad++ == 0)
          first = fmt::format("(b{}, i{}) [{}] holds {} NaN/Inf element{}", b, i, hf::to_string(flag), nonfinite,
                              nonfinite > 1 ? "s" : "");
      } else {
        ++(zero ? r.uncomparable_zero : err <= bound ? r.uncomparable_eager : r.uncomparable_other);
      }
    }
  if (bad == 0) return {};
  return fmt::format("{} row{} without a model output (no key, or a padding query) that the next layer reads hold{} "
                     "NaN/Inf, which eager's P·V spreads to every row (first {})",
                     bad, bad > 1 ? "s" : "", bad > 1 ? "" : "s", first);
}

// The integration rule on a path's output `out` ([B * Lq, Hq, D]); `row_source` (the flash plan's, or null when
// the path writes every row) marks rows the path never wrote or zero-filled.
void judge_output(IntegrationResult& r, hf::Profile profile, const ModelCase& m, const ModelTensors& t,
                  const std::vector<double>& out, const std::vector<std::int64_t>* row_source) {
  Verdict& v = r.verdict;
  const hf::EagerResult eager = hf::eager_attention(m, t, profile);
  const hf::ExactAttention exact = hf::exact_attention(m, t, eager.mask);
  const std::int64_t H = m.heads, D = m.head_dim;
  Comparison cmp;
  double worst = -1, floor = 0;
  std::int64_t first_bad_row = -1;
  for (std::int64_t b = 0; b < m.batch; ++b)
    for (std::int64_t i = 0; i < m.q_len; ++i) {
      const std::size_t row = static_cast<std::size_t>(b * m.q_len + i);
      if (eager.mask.row(b, i) != hf::RowFlag::kComparable) {
        ++r.rows_skipped;
        continue;
      }
      const std::int64_t src = row_source ? (*row_source)[row] : 0;
      if (src == hf::kUnwritten || src == hf::kZeroRow) {
        ++(src == hf::kUnwritten ? r.rows_unwritten : r.rows_zeroed);
        if (first_bad_row < 0) first_bad_row = static_cast<std::int64_t>(row);
        continue;
      }
      ++r.rows_compared;
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          const std::size_t at = (row * static_cast<std::size_t>(H) + static_cast<std::size_t>(h)) * static_cast<std::size_t>(D) +
                                 static_cast<std::size_t>(d);
          const double f = out[at], e = eager.out.data[at], x = exact.out[at];
          ++cmp.compared;
          double err = std::fabs(f - x);
          if (!std::isfinite(f)) {
            ++cmp.nonfinite;
            err = kInf;
          }
          cmp.base_max = std::max(cmp.base_max, std::fabs(e - x));
          r.eager_flash_max = std::max(r.eager_flash_max, std::fabs(f - e));
          // The conformance floor, fp32 noise term included: in fp32 eager can be as exact as the kernel,
          // so a multiple of eager's error alone is no bound.
          floor = std::max(floor, tolerance::max_floor(rounding_floor(m.dtype, x), exact.noise[at]));
          if (err > worst) {
            worst = err;
            cmp.worst = {b, h, i, d, f, x, e};
          }
        }
    }
  cmp.err_max = worst < 0 ? 0.0 : worst;
  cmp.floor = floor;
  cmp.bound = kIntegrationK * cmp.base_max + floor;
  cmp.err_mean = cmp.mean_bound = 0;  // the integration rule has no mean check
  v.cmp = cmp;
  const auto at_row = [&](std::int64_t row) { return fmt::format("(b{}, i{})", row / m.q_len, row % m.q_len); };
  if (r.rows_unwritten > 0)
    v.reason = fmt::format("{} comparable row{} never written by the flash path (undefined output; first {})", r.rows_unwritten,
                           r.rows_unwritten > 1 ? "s" : "", at_row(first_bad_row));
  else if (r.rows_zeroed > 0)
    v.reason = fmt::format("{} comparable row{} zero-filled by the flash path (first {})", r.rows_zeroed,
                           r.rows_zeroed > 1 ? "s" : "", at_row(first_bad_row));
  else if (cmp.nonfinite > 0)
    v.reason = fmt::format("{} NaN/Inf output element{} on comparable rows", cmp.nonfinite, cmp.nonfinite > 1 ? "s" : "");
  else if (!(cmp.err_max <= cmp.bound))
    v.reason = fmt::format("max error {:.3g} against the exact attention exceeds {:.3g} ({} x eager's {:.3g} + floor)",
                           cmp.err_max, cmp.bound, kIntegrationK, cmp.base_max);
  else
    v.reason = judge_uncomparable_rows(r, m, t, eager, exact, out);
  v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
}

}  // namespace

IntegrationResult check_integration(hf::Profile profile, Kernel& k, const ModelCase& m, const ModelTensors& t,
                                    hf::PathDefect defect) {
  const auto start = Clock::now();
  IntegrationResult r;
  Verdict& v = r.verdict;
  v.property = "integration";
  v.kernel = fmt::format("{}@{}", hf::to_string(profile), k.name());
  auto done = [&]() {
    return finish(std::move(r), profile, defect, start, [&] { return hf::known_divergence(m); },
                  [&] { return check_integration(profile, k, m, t).verdict; });
  };

  const hf::FlashPlan plan = hf::plan_flash_path(profile, m, defect);
  r.branch = plan.branch;
  const hf::FlashRun run = hf::run_flash_path(plan, m, t, k);
  if (run.kind != VerdictKind::kPass) {
    v.kind = run.kind;
    v.reason = run.kind == VerdictKind::kError && plan.branch == hf::FlashBranch::kError
                   ? std::string(kTransformersRaises) + run.reason
                   : run.reason;
    return done();
  }
  if (plan.out_len != m.q_len) {
    v.kind = VerdictKind::kError;
    v.reason = fmt::format("the flash path returns {} rows per sequence for a {}-token query: the model's reshape fails",
                           plan.out_len, m.q_len);
    return done();
  }
  judge_output(r, profile, m, t, run.out, &plan.row_source);
  return done();
}

IntegrationResult check_sdpa_integration(hf::Profile profile, Kernel& k, const ModelCase& m, const ModelTensors& t,
                                         hf::PathDefect defect) {
  const auto start = Clock::now();
  IntegrationResult r;
  Verdict& v = r.verdict;
  v.property = "integration-sdpa";
  const hf::SdpaPlan plan = hf::plan_sdpa_path(profile, m, defect);
  v.kernel = fmt::format("{}@sdpa-{}", hf::to_string(profile), k.on_device() ? "cuda" : "cpu");
  auto done = [&]() {
    return finish(std::move(r), profile, defect, start, [&] { return hf::known_sdpa_divergence(m); },
                  [&] { return check_sdpa_integration(profile, k, m, t).verdict; });
  };
  const hf::SdpaRun run = hf::run_sdpa_path(plan, m, t, k.on_device());
  if (run.kind != VerdictKind::kPass) {
    v.kind = run.kind;
    v.reason = plan.raises && run.kind == VerdictKind::kError ? std::string(kTransformersRaises) + run.reason : run.reason;
    return done();
  }
  judge_output(r, profile, m, t, std::vector<double>(run.out.begin(), run.out.end()), nullptr);
  return done();
}

namespace {

// dO [B, Lq, Hq, D]: the case's recipe on the comparable rows, zero elsewhere.
HostTensor model_dout(const ModelCase& m, const hf::EagerMask& mask) {
  HostTensor g({m.batch, m.q_len, m.heads, m.head_dim}, 0.0f);
  for (std::int64_t b = 0; b < m.batch; ++b)
    for (std::int64_t i = 0; i < m.q_len; ++i) {
      if (mask.row(b, i) != hf::RowFlag::kComparable) continue;
      for (std::int64_t h = 0; h < m.heads; ++h)
        for (std::int64_t d = 0; d < m.head_dim; ++d)
          g.data[static_cast<std::size_t>(((b * m.q_len + i) * m.heads + h) * m.head_dim + d)] = round_to_float(
              m.dtype, dout_value(DoutRecipe{}, m.data.seed, static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(i),
                                  static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(d), static_cast<std::uint32_t>(m.head_dim)));
    }
  return g;
}

// One span of rows per batch row: a worst element is then (batch row, head, position, channel).
std::vector<RowSpan> batch_rows(std::int64_t batch, std::int64_t len) {
  std::vector<RowSpan> rows;
  for (std::int64_t b = 0; b < batch; ++b) rows.push_back({b * len, (b + 1) * len});
  return rows;
}

}  // namespace

bool training_call(const ModelCase& m) { return m.past == 0 && !m.use_cache && !m.static_cache_len && !m.via_generate; }

IntegrationResult check_integration_backward(hf::Profile profile, Kernel& k, const ModelCase& m, hf::HfPath path,
                                             hf::PathDefect defect) {
  const auto start = Clock::now();
  const ModelTensors t = materialize(m);
  IntegrationResult r = path == hf::HfPath::kSdpa ? check_sdpa_integration(profile, k, m, t, defect)
                                                  : check_integration(profile, k, m, t, defect);
  Verdict& v = r.verdict;
  v.property += "-backward";
  if (v.kind != VerdictKind::kPass) {
    v.reason = "forward: " + v.reason;
    return r;
  }
  if (!training_call(m)) {
    v.kind = VerdictKind::kUnsupported;
    v.reason = "the backward is judged on training calls (no past, no cache, not from generate)";
    return r;
  }
  const hf::EagerMask mask = hf::eager_mask(m, profile);
  const HostTensor dout = model_dout(m, mask);
  std::optional<GradientResult> got;
  if (path == hf::HfPath::kSdpa) {
    const hf::SdpaRun run = hf::run_sdpa_path(hf::plan_sdpa_path(profile, m, defect), m, t, k.on_device(), &dout);
    got = run.grads;
    if (run.kind != VerdictKind::kPass) v.reason = run.reason;
  } else {
    const hf::FlashRun run = hf::run_flash_path(hf::plan_flash_path(profile, m, defect), m, t, k, &dout);
    got = run.grads;
    if (run.kind != VerdictKind::kPass) {
      v.kind = run.kind;
      v.reason = "backward: " + run.reason;
      return r;
    }
  }
  if (!got) {
    v.kind = VerdictKind::kError;
    v.reason = "backward: " + (v.reason.empty() ? std::string("the path returned no gradients") : v.reason);
    return r;
  }
  const GradientResult eager = hf::eager_gradients(m, t, dout, profile);
  const GradientResult exact = hf::exact_gradients(m, t, mask, dout);
  const bool softcap = m.softcap.has_value();
  const std::vector<RowSpan> q_rows = batch_rows(m.batch, m.q_len), k_rows = batch_rows(m.batch, m.kv_len());
  GradientComparisons cmp;
  cmp.dq = compare_gradient(m.dtype, softcap, {"dq", q_rows, m.heads, m.head_dim}, got->dq, exact.dq, eager.dq, exact.dq_noise,
                            exact.dq_terms, kIntegrationK, 0);
  cmp.dk = compare_gradient(m.dtype, softcap, {"dk", k_rows, m.kv_heads, m.head_dim}, got->dk, exact.dk, eager.dk,
                            exact.dk_noise, exact.dk_terms, kIntegrationK, 0);
  cmp.dv = compare_gradient(m.dtype, softcap, {"dv", k_rows, m.kv_heads, m.head_dim}, got->dv, exact.dv, eager.dv,
                            exact.dv_noise, exact.dv_terms, kIntegrationK, 0);
  v.cmp = cmp.decisive();
  v.reason = failure_reason(cmp);
  if (!v.reason.empty()) v.reason = fmt::format("backward: {} (baseline: eager's autograd)", v.reason);
  v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
  // A documented divergence of the path shows in its gradients too (S1's dropped softcap loses tanh's
  // derivative): the same id, counted, not a new finding.
  return finish(
      std::move(r), profile, defect, start,
      [&] { return path == hf::HfPath::kSdpa ? hf::known_sdpa_divergence(m) : hf::known_divergence(m); },
      [&] { return check_integration_backward(profile, k, m, path).verdict; });
}

}  // namespace flashcheck
