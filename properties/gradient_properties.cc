// The gradient properties: what must hold of a kernel's backward (dQ, dK, dV for a backward case's upstream
// gradient dO). Each needs a kernel whose contract has a backward; on any other kernel it is not applicable.
//   grad-conformance        dQ, dK, dV ~ the fp64 reference under the gradient rule (core/compare.h)
//   grad-determinism        two backward runs give bitwise equal gradients (contracts that promise it)
//   grad-gqa                dK/dV of a grouped KV head == the sum of the repeated heads' gradients
//   grad-varlen-padded      tightly packed K/V == the keys padded to the longest allocation with seqused_k
//   grad-batch-permutation  reversing the batch reverses the gradients
//   grad-masked-zero        keys no row sees, keys outside a sequence, rows without keys and rows of zero dO
//                           get exactly zero gradient
//   grad-robustness         every defined gradient element written, nothing outside (poison, canaries)
//   grad-fd                 the kernel's backward agrees with a finite difference of its own forward (fp32)
//   grad-race               16 runs of one case: the same bits, or within the rule of the first (GPU kernels)
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <optional>
#include <string_view>

#include "core/compare.h"
#include "core/defined_memory.h"
#include "core/geometry.h"
#include "core/recipe.h"
#include "core/tolerance.h"
#include "properties/kernel_runs.h"
#include "properties/property.h"
#include "properties/stage_profile.h"
#include "reference/host/attention.h"
#include "reference/host/gradients.h"
#if defined(FLASHCHECK_HAVE_CUDA)
#include "properties/grad_conformance_device.h"
#include "reference/device/gradients.h"
#endif

namespace flashcheck {
namespace {

using Clock = std::chrono::steady_clock;
using detail::BackwardRun;
using detail::in_contract;
using detail::make_verdict;
using detail::run_backward;

// The fp64 reference gradients of a case and the low-precision baseline: on the GPU for a kernel that runs there
// (seconds at realistic sizes where the host takes minutes; the device-gradient-reference property checks the two
// agree), on the host otherwise or when FLASHCHECK_GRAD_REFERENCE=host asks for it.
struct ReferenceGradients {
  GradientResult truth, lowp;
};
// FLASHCHECK_GRAD_REFERENCE=host: the fp64 gradients and their baseline from the host's reference, for every kernel
// (the switch for comparing the two references); it implies the host path below.
bool host_reference_asked() {
  const char* where = std::getenv("FLASHCHECK_GRAD_REFERENCE");
  return where && std::string_view(where) == "host";
}

// FLASHCHECK_GRAD_PATH=host: grad-conformance of a CUDA kernel through the host's tensors, with the device reference
// (the switch for comparing the two paths, and the way back if the device path misbehaves).
bool host_path_asked() {
  const char* path = std::getenv("FLASHCHECK_GRAD_PATH");
  return host_reference_asked() || (path && std::string_view(path) == "host");
}

ReferenceGradients reference_gradients(const Kernel& k, const KernelCase& c, const CaseTensors& t) {
#if defined(FLASHCHECK_HAVE_CUDA)
  if (k.device() == "cuda" && !host_reference_asked()) {
    device::DeviceGradients g = device::device_gradients_and_baseline(c, t);
    return {std::move(g.truth), std::move(g.baseline)};
  }
#else
  (void)k;
#endif
  return {reference::host_gradients(c, t), reference::low_precision_gradients(c, t)};
}

// The rule's bounds for a case: each gradient's max bound (k_max * baseline error + floor).
GradientComparisons rule_bounds(const Kernel& k, const KernelCase& c, const CaseTensors& t) {
  const ReferenceGradients ref = reference_gradients(k, c, t);
  return compare_gradients(c, ref.lowp, ref.truth, ref.lowp, k.contract().backward.zeroes_unused_keys);
}

// Judges a backward run against the fp64 gradients: the conformance verdict of the gradients.
void judge_gradients(const Kernel& k, const KernelCase& c, const ReferenceGradients& ref, const BackwardRun& run, Verdict& v) {
  const GradientComparisons cmp = compare_gradients(c, run.result, ref.truth, ref.lowp, k.contract().backward.zeroes_unused_keys);
  v.cmp = cmp.decisive();
  v.reason = failure_reason(cmp);
  if (const std::int64_t damage = run.grads.canary_damage(); damage > 0 && v.reason.empty())
    v.reason = fmt::format("{} canary element{} around dQ/dK/dV overwritten", damage, damage > 1 ? "s" : "");
  v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
}
void judge_gradients(const Kernel& k, const KernelCase& c, const CaseTensors& t, const BackwardRun& run, Verdict& v) {
  judge_gradients(k, c, reference_gradients(k, c, t), run, v);
}

// Base: the backward requirements, timing, the contract check.
class GradientProperty : public Property {
 public:
  CaseRequirements requirements() const override { return {.backward = true}; }
  std::string unsupported_reason(const Kernel& k) const override { return requirements_unmet(k.contract(), requirements()); }
  Verdict check(Kernel& k, const KernelCase& c) const override {
    const auto start = Clock::now();
    Verdict v = make_verdict(k, name());
    if (!c.backward()) {
      v.kind = VerdictKind::kError;
      v.reason = fmt::format("harness error: {} needs a backward case (a \"dout\" recipe)", name());
    } else if (in_contract(k, c, v, "case")) {
      judge_case(k, c, v);
    }
    v.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return v;
  }

 protected:
  virtual void judge_case(Kernel& k, const KernelCase& c, Verdict& v) const = 0;
  static bool zeroes(const Kernel& k) { return k.contract().backward.zeroes_unused_keys; }
};

class GradConformance : public GradientProperty {
 public:
  std::string_view name() const override { return "grad-conformance"; }
  std::string_view description() const override { return "dQ, dK, dV ~ fp64 reference gradients under the tolerance rule"; }

 protected:
  // Staged for `bench --pass backward` (properties/stage_profile.h); the kernel's stage holds its forward, which a flash
  // backward needs (its output and LSE), and the copies of its gradients to the host.
  void judge_case(Kernel& k, const KernelCase& c, Verdict& v) const override {
#if defined(FLASHCHECK_HAVE_CUDA)
    // The device path: nothing but the statistics crosses to the host (properties/grad_conformance_device.h).
    if (k.has_device_backward() && !host_path_asked()) return check_grad_conformance_device(k, c, v);
#endif
    if (stage_profile().on) ++stage_profile().cases;
    std::optional<CaseTensors> t;
    {
      const ScopedStage s("inputs");
      t.emplace(materialize(c));
    }
    BackwardRun run;
    {
      const ScopedStage s("kernel");
      if (!run_backward(k, c, *t, run, v)) return;
    }
    std::optional<ReferenceGradients> ref;
    {
      const ScopedStage s("reference+baseline");
      ref.emplace(reference_gradients(k, c, *t));
    }
    const ScopedStage s("compare");
    judge_gradients(k, c, *ref, run, v);
  }
};

// The first defined gradient element (core/defined_memory.h) for which `differs(a, b)`, described; "" if none.
std::string first_gradient_difference(const KernelCase& c, const GradientResult& a, const GradientResult& b,
                                      bool zero_unused_keys, const char* what,
                                      const std::function<bool(double, double)>& differs) {
  const CaseGeometry g = geometry(c);
  const std::vector<RowSpan> keys = key_rows(g, zero_unused_keys);
  struct Part {
    const char* name;
    const std::vector<double>& x;
    const std::vector<double>& y;
    const std::vector<RowSpan>& rows;
    std::int64_t heads, dim;
  };
  const std::vector<RowSpan> queries = query_rows(g);
  const Part parts[] = {{"dq", a.dq, b.dq, queries, c.heads, c.head_dim},
                        {"dk", a.dk, b.dk, keys, c.kv_heads, c.head_dim},
                        {"dv", a.dv, b.dv, keys, c.kv_heads, c.v_head_dim}};
  for (const Part& p : parts)
    for (std::size_t s = 0; s < p.rows.size(); ++s)
      for (std::int64_t row = p.rows[s].begin; row < p.rows[s].end; ++row)
        for (std::int64_t h = 0; h < p.heads; ++h)
          for (std::int64_t x = 0; x < p.dim; ++x) {
            const std::size_t at = static_cast<std::size_t>((row * p.heads + h) * p.dim + x);
            if (differs(p.x[at], p.y[at]))
              return fmt::format("{} element (b{}, h{}, row {}, d{}) {}: {} then {}", p.name, s, h, row - p.rows[s].begin,
                                 x, what, p.x[at], p.y[at]);
          }
  return "";
}

class GradDeterminism : public GradientProperty {
 public:
  std::string_view name() const override { return "grad-determinism"; }
  std::string_view description() const override { return "two backward runs give bitwise equal dQ, dK, dV"; }
  std::string unsupported_reason(const Kernel& k) const override {
    if (std::string why = GradientProperty::unsupported_reason(k); !why.empty()) return why;
    return k.contract().backward.deterministic ? "" : "the backward contract does not promise bitwise reproducible gradients";
  }

 protected:
  void judge_case(Kernel& k, const KernelCase& c, Verdict& v) const override {
    const CaseTensors t = materialize(c);
    BackwardRun a, b;
    if (!run_backward(k, c, t, a, v) || !run_backward(k, c, t, b, v)) return;
    v.reason = first_gradient_difference(c, a.result, b.result, zeroes(k), "differs between two runs", [](double x, double y) {
      return std::memcmp(&x, &y, sizeof x) != 0;
    });
    v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
  }
};

// Base of the metamorphic gradient properties: the case's gradients against those of a transformed case mapped
// back to the case's layout, within the case's rule bounds.
class GradMetamorphic : public GradientProperty {
 protected:
  void judge_case(Kernel& k, const KernelCase& c, Verdict& v) const override {
    const CaseTensors t = materialize(c);
    std::string skip;
    KernelCase c2 = c;
    ValueSource src2;
    const ValueSource src = logical_values(c, t);
    transform(c, src, c2, src2, skip);
    if (!skip.empty()) {
      v.kind = VerdictKind::kUnsupported;
      v.reason = skip;
      return;
    }
    if (!in_contract(k, c2, v, "transformed case")) return;
    BackwardRun base, other;
    if (!run_backward(k, c, t, base, v)) return;
    const CaseTensors t2 = materialize(c2, src2);
    if (!run_backward(k, c2, t2, other, v)) return;
    const GradientResult mapped = map_back(c, c2, other.result);
    const GradientComparisons bounds = rule_bounds(k, c, t);
    const GradientComparisons cmp = compare_gradient_pair(c, base.result, mapped, bounds, zeroes(k));
    v.cmp = cmp.decisive();
    const std::string why = failure_reason(cmp);
    v.kind = why.empty() ? VerdictKind::kPass : VerdictKind::kFail;
    if (!why.empty()) v.reason = fmt::format("{} differs from the original: {}", transform_name(), why);
  }
  virtual std::string_view transform_name() const = 0;
  // The transformed case and where its values come from; `skip` when the case has nothing to transform.
  virtual void transform(const KernelCase& c, const ValueSource& src, KernelCase& c2, ValueSource& src2,
                         std::string& skip) const = 0;
  // The transformed case's gradients in the original case's layout.
  virtual GradientResult map_back(const KernelCase& c, const KernelCase& c2, const GradientResult& g2) const = 0;

  // Copies the gradient rows of sequence b2 of c2 to sequence b of c: its query rows and its whole key allocation
  // (the transforms keep every allocated position of c at the same position of c2).
  static void copy_sequence(const KernelCase& c, const CaseGeometry& g, std::size_t b, const KernelCase& c2,
                            const CaseGeometry& g2, std::size_t b2, const GradientResult& from, GradientResult& to) {
    const std::int64_t qw = c.heads * c.head_dim, kw = c.kv_heads * c.head_dim, vw = c.kv_heads * c.v_head_dim;
    (void)c2;
    std::copy_n(from.dq.begin() + g2.seqs[b2].q_start * qw, g.seqs[b].lq * qw, to.dq.begin() + g.seqs[b].q_start * qw);
    std::copy_n(from.dk.begin() + g2.seqs[b2].k_start * kw, g.seqs[b].k_alloc * kw, to.dk.begin() + g.seqs[b].k_start * kw);
    std::copy_n(from.dv.begin() + g2.seqs[b2].k_start * vw, g.seqs[b].k_alloc * vw, to.dv.begin() + g.seqs[b].k_start * vw);
  }
  static GradientResult sized_like(const KernelCase& c) {
    const CaseGeometry g = geometry(c);
    GradientResult r;
    r.dq.assign(static_cast<std::size_t>(g.q_rows * c.heads * c.head_dim), 0.0);
    r.dk.assign(static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.head_dim), 0.0);
    r.dv.assign(static_cast<std::size_t>(g.kv_rows * c.kv_heads * c.v_head_dim), 0.0);
    return r;
  }
};

class GradGqa : public GradMetamorphic {
 public:
  std::string_view name() const override { return "grad-gqa"; }
  std::string_view description() const override {
    return "dK/dV of a grouped KV head == the sum of the gradients of its heads repeated explicitly";
  }
  CaseRequirements requirements() const override { return {.gqa = true, .backward = true}; }

 protected:
  std::string_view transform_name() const override { return "with KV heads repeated (dK/dV summed over each group)"; }
  void transform(const KernelCase& c, const ValueSource& src, KernelCase& c2, ValueSource& src2, std::string& skip) const override {
    if (c.heads == c.kv_heads) {
      skip = "no grouped heads in this case";
      return;
    }
    c2.kv_heads = c.heads;
    if (c2.kv_strides == KvStrides::kExpanded) c2.kv_strides = KvStrides::kContiguous;
    const std::int64_t group = c.group();
    src2 = [src, group](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h, std::int64_t ch) {
      return src(id, b, p, query_side(id) ? h : h / group, ch);
    };
  }
  GradientResult map_back(const KernelCase& c, const KernelCase& c2, const GradientResult& g2) const override {
    GradientResult r = sized_like(c);
    r.dq = g2.dq;
    const std::int64_t H = c.heads, Hk = c.kv_heads, group = c.group(), d = c.head_dim, dv = c.v_head_dim;
    const std::int64_t rows = geometry(c2).kv_rows;
    for (std::int64_t row = 0; row < rows; ++row)
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t x = 0; x < d; ++x)
          r.dk[static_cast<std::size_t>((row * Hk + h / group) * d + x)] += g2.dk[static_cast<std::size_t>((row * H + h) * d + x)];
        for (std::int64_t x = 0; x < dv; ++x)
          r.dv[static_cast<std::size_t>((row * Hk + h / group) * dv + x)] += g2.dv[static_cast<std::size_t>((row * H + h) * dv + x)];
      }
    // The sum as the dtype holds it, as the grouped kernel's own dK/dV is (past its range: the same infinity).
    for (std::vector<double>* v : {&r.dk, &r.dv})
      for (double& x : *v) x = round_to(c.dtype, x);
    return r;
  }
};

class GradVarlenPadded : public GradMetamorphic {
 public:
  std::string_view name() const override { return "grad-varlen-padded"; }
  std::string_view description() const override {
    return "gradients with tightly packed K/V == with every sequence padded to the longest allocation (seqused_k)";
  }
  CaseRequirements requirements() const override { return {.seqused = true, .backward = true}; }

 protected:
  std::string_view transform_name() const override { return "padded to the longest sequence"; }
  void transform(const KernelCase& c, const ValueSource& src, KernelCase& c2, ValueSource& src2, std::string&) const override {
    const CaseGeometry g = geometry(c);
    for (std::size_t b = 0; b < c2.seqs.size(); ++b) {
      c2.seqs[b].seqused_k = g.seqs[b].kv_end;
      c2.seqs[b].k_len = g.max_k + 1;  // one more than any sequence: every one gets padding
    }
    src2 = src;
  }
  GradientResult map_back(const KernelCase& c, const KernelCase& c2, const GradientResult& g2) const override {
    GradientResult r = sized_like(c);
    const CaseGeometry g = geometry(c), gg = geometry(c2);
    for (std::size_t b = 0; b < c.seqs.size(); ++b) copy_sequence(c, g, b, c2, gg, b, g2, r);
    return r;
  }
};

class GradBatchPermutation : public GradMetamorphic {
 public:
  std::string_view name() const override { return "grad-batch-permutation"; }
  std::string_view description() const override { return "reversing the batch reverses the gradients, nothing else"; }
  CaseRequirements requirements() const override { return {.batch2 = true, .backward = true}; }

 protected:
  std::string_view transform_name() const override { return "with the batch reversed"; }
  void transform(const KernelCase& c, const ValueSource& src, KernelCase& c2, ValueSource& src2, std::string& skip) const override {
    const auto B = static_cast<std::int64_t>(c.seqs.size());
    if (B < 2) {
      skip = "a batch of one has nothing to permute";
      return;
    }
    std::reverse(c2.seqs.begin(), c2.seqs.end());
    src2 = [src, B](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h, std::int64_t ch) {
      return src(id, B - 1 - b, p, h, ch);
    };
  }
  GradientResult map_back(const KernelCase& c, const KernelCase& c2, const GradientResult& g2) const override {
    GradientResult r = sized_like(c);
    const CaseGeometry g = geometry(c), gg = geometry(c2);
    const std::size_t B = c.seqs.size();
    for (std::size_t b = 0; b < B; ++b) copy_sequence(c, g, b, c2, gg, B - 1 - b, g2, r);
    return r;
  }
};

class GradMaskedZero : public GradientProperty {
 public:
  std::string_view name() const override { return "grad-masked-zero"; }
  std::string_view description() const override {
    return "keys no row sees, keys outside a sequence, rows without keys and rows of zero dO get exactly zero gradient";
  }

 protected:
  void judge_case(Kernel& k, const KernelCase& c, Verdict& v) const override {
    const CaseTensors t = materialize(c);
    BackwardRun run;
    if (!run_backward(k, c, t, run, v)) return;
    v.reason = first_nonzero(c, t, run.result, zeroes(k));
    v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
  }

 private:
  static std::string first_nonzero(const KernelCase& c, const CaseTensors& t, const GradientResult& r, bool zero_unused) {
    const CaseGeometry g = geometry(c);
    const std::vector<std::uint8_t> empty = empty_query_rows(c, g);
    const MaskRule rule = mask_rule(c);
    const std::int64_t H = c.heads, Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim;
    const auto nonzero = [](const double* x, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i)
        if (!(x[i] == 0.0)) return i;  // NaN is not zero
      return std::int64_t{-1};
    };
    for (std::size_t b = 0; b < g.seqs.size(); ++b) {
      const SeqGeometry& s = g.seqs[b];
      // Query rows: without a visible key, or (per head) with dO all zero.
      for (std::int64_t i = 0; i < s.lq; ++i)
        for (std::int64_t h = 0; h < H; ++h) {
          const std::int64_t row = s.q_start + i;
          const float* go = t.dout.data.data() + (row * H + h) * dv;
          const bool zero_dout = std::all_of(go, go + dv, [](float x) { return x == 0.0f; });
          if (!empty[static_cast<std::size_t>(row)] && !zero_dout) continue;
          if (const std::int64_t x = nonzero(r.dq.data() + (row * H + h) * d, d); x >= 0)
            return fmt::format("dq element (b{}, h{}, i{}, d{}) is {}, not 0: the row {}", b, h, i, x,
                               r.dq[static_cast<std::size_t>((row * H + h) * d + x)],
                               empty[static_cast<std::size_t>(row)] ? "sees no key" : "has a zero upstream gradient");
        }
      // Key positions of the allocation: which ones some row sees.
      std::vector<std::uint8_t> seen(static_cast<std::size_t>(s.k_alloc), 0);
      const std::int64_t off = diagonal_offset(c.alignment, s.lq, s.lk);
      for (std::int64_t i = 0; i < s.lq; ++i) {
        const KeyRange kr = visible_keys(i, std::max<std::int64_t>(s.lk, 0), off, rule);
        for (std::int64_t j = kr.lo; j < kr.hi; ++j) seen[static_cast<std::size_t>(s.p0 + j)] = 1;
      }
      for (std::int64_t pos = 0; pos < s.k_alloc; ++pos) {
        if (seen[static_cast<std::size_t>(pos)]) continue;
        const bool used = pos >= s.p0 && pos < s.kv_end;
        if (!used && !zero_unused) continue;  // not defined memory for this kernel
        const std::int64_t row = s.k_start + pos;
        const char* why = used ? "no query row sees this key" : "the key is outside the sequence";
        if (const std::int64_t x = nonzero(r.dk.data() + row * Hk * d, Hk * d); x >= 0)
          return fmt::format("dk element (b{}, h{}, key {}, d{}) is {}, not 0: {}", b, x / d, pos, x % d,
                             r.dk[static_cast<std::size_t>(row * Hk * d + x)], why);
        if (const std::int64_t x = nonzero(r.dv.data() + row * Hk * dv, Hk * dv); x >= 0)
          return fmt::format("dv element (b{}, h{}, key {}, d{}) is {}, not 0: {}", b, x / dv, pos, x % dv,
                             r.dv[static_cast<std::size_t>(row * Hk * dv + x)], why);
      }
    }
    return "";
  }
};

class GradRobustness : public GradientProperty {
 public:
  std::string_view name() const override { return "grad-robustness"; }
  std::string_view description() const override {
    return "every defined dQ/dK/dV element written, nothing written outside them, poison in unused input slots ignored";
  }
  std::string unsupported_reason(const Kernel& k) const override {
    if (std::string why = GradientProperty::unsupported_reason(k); !why.empty()) return why;
    return k.contract().backward.writes_into_buffer
               ? ""
               : "the adapter copies gradients into the harness buffers, so canaries cannot see the kernel's own writes";
  }

 protected:
  void judge_case(Kernel& k, const KernelCase& c, Verdict& v) const override {
    KernelCase poisoned = c;
    poisoned.data.poison = true;  // NaN in every input slot the kernel must not read
    if (!in_contract(k, poisoned, v, "poisoned case")) return;
    const CaseTensors t = materialize(poisoned);
    BackwardRun run;
    if (!run_backward(k, poisoned, t, run, v)) return;
    if (const std::int64_t damage = run.grads.canary_damage(); damage > 0) {
      v.kind = VerdictKind::kFail;
      v.reason = fmt::format("{} canary element{} around dQ/dK/dV overwritten (out-of-bounds write)", damage,
                             damage > 1 ? "s" : "");
      return;
    }
    const GradientResult as_float = run.grads.to_result();
    const std::string unwritten = first_gradient_difference(
        poisoned, as_float, as_float, zeroes(k), "was never written",
        [](double x, double) { return std::isnan(x) && PoisonedArray::unwritten(static_cast<float>(x)); });
    if (!unwritten.empty()) {
      v.kind = VerdictKind::kFail;
      v.reason = unwritten;
      return;
    }
    judge_gradients(k, poisoned, t, run, v);  // written where it must be: the values must still conform
  }
};

// Central differences of the kernel's own fp32 forward along a random direction u of the inputs, against what its
// backward predicts: <dO, F(x + h u) - F(x - h u)> ~ <dQ, D_q> + <dK, D_k> + <dV, D_v>, D the perturbation the fp32
// inputs realize. No reference gradient enters the verdict (only the fp64 forward and the gradients' rounding
// sensitivities), so a backward that agrees with a wrong reference still disagrees with its own forward. The bound:
// twice the kernel forward's rounding (the fp32 noise floor of every output element), its gradients' rounding
// along D, and the truncation of the central difference, estimated by Richardson from the fp64 forward at h and 2h.
class GradFiniteDifference : public GradientProperty {
 public:
  std::string_view name() const override { return "grad-fd"; }
  std::string_view description() const override {
    return "<dO, F(x+hu) - F(x-hu)> of the kernel's fp32 forward == the directional derivative its backward gives";
  }
  CaseRequirements requirements() const override { return {.backward = true, .fp32 = true}; }

 protected:
  void judge_case(Kernel& k, const KernelCase& c_in, Verdict& v) const override {
    KernelCase c = c_in;
    c.dtype = DType::kF32;
    if (!in_contract(k, c, v, "fp32 case")) return;
    const CaseTensors t = materialize(c);
    BackwardRun run;
    if (!run_backward(k, c, t, run, v)) return;
    const CaseGeometry g = geometry(c);
    const GradientResult sens = reference::host_gradients(c, t);  // only its noise (sensitivities) is used
    const double lambda_u = tolerance::kNoiseLambda * tolerance::kUnitRoundoff32;
    const std::vector<RowSpan> queries = query_rows(g), keys = key_rows(g, false);
    // The inputs moved by +-step * max|x| * u (each tensor its own max), with the prediction along the realized move.
    struct Step {
      CaseTensors plus, minus;
      double predicted = 0, grad_rounding = 0;
    };
    const auto make_step = [&](double step) {
      Step st{t, t};
      const auto perturb = [&](TensorId id, HostTensor CaseTensors::*tensor, const std::vector<RowSpan>& rows,
                               std::int64_t heads, std::int64_t dim, const std::vector<double>& grad,
                               const std::vector<double>& noise) {
        const HostTensor& x = t.*tensor;
        float largest = 0;
        for (const RowSpan& r : rows)
          for (std::int64_t at = r.begin * heads * dim; at < r.end * heads * dim; ++at)
            largest = std::max(largest, std::fabs(x.data[static_cast<std::size_t>(at)]));
        const double h = step * std::max<double>(largest, 1e-3);
        for (std::size_t s = 0; s < rows.size(); ++s)
          for (std::int64_t row = rows[s].begin; row < rows[s].end; ++row)
            for (std::int64_t hd = 0; hd < heads; ++hd)
              for (std::int64_t ch = 0; ch < dim; ++ch) {
                const std::size_t at = static_cast<std::size_t>((row * heads + hd) * dim + ch);
                const Philox4 bits = element_bits(c.data.seed ^ 0xFDFDFDFDull, id, static_cast<std::uint32_t>(s),
                                                  static_cast<std::uint32_t>(row), static_cast<std::uint32_t>(hd),
                                                  static_cast<std::uint32_t>(ch));
                const double u = unit_uniform(bits.w[0]) * 2 - 1;  // uniform on [-1, 1)
                float& xp = (st.plus.*tensor).data[at];
                float& xm = (st.minus.*tensor).data[at];
                xp = static_cast<float>(x.data[at] + h * u);
                xm = static_cast<float>(x.data[at] - h * u);
                const double delta = static_cast<double>(xp) - static_cast<double>(xm);
                st.predicted += grad[at] * delta;
                st.grad_rounding += lambda_u * noise[at] * std::fabs(delta);
              }
      };
      perturb(TensorId::kQ, &CaseTensors::q, queries, c.heads, c.head_dim, run.result.dq, sens.dq_noise);
      perturb(TensorId::kK, &CaseTensors::k, keys, c.kv_heads, c.head_dim, run.result.dk, sens.dk_noise);
      perturb(TensorId::kV, &CaseTensors::v, keys, c.kv_heads, c.v_head_dim, run.result.dv, sens.dv_noise);
      return st;
    };
    const std::vector<std::uint8_t> empty = empty_query_rows(c, g);
    // <dO, a - b> over the defined, non-empty output rows, and the rounding of the kernel's outputs there.
    const auto contract_rows = [&](const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>* na,
                                   const std::vector<double>* nb, double* rounding) {
      double sum = 0;
      for (const RowSpan& r : queries)
        for (std::int64_t row = r.begin; row < r.end; ++row) {
          if (empty[static_cast<std::size_t>(row)]) continue;
          for (std::int64_t e = row * c.heads * c.v_head_dim; e < (row + 1) * c.heads * c.v_head_dim; ++e) {
            const std::size_t at = static_cast<std::size_t>(e);
            const double go = t.dout.data[at];
            sum += go * (a[at] - b[at]);
            if (rounding) *rounding += std::fabs(go) * lambda_u * ((*na)[at] + (*nb)[at]);
          }
        }
      return sum;
    };
    // The step: from tolerance::kFdFirstStep of each tensor's largest magnitude down, halved until the fp64
    // forward's Richardson estimate puts the truncation within its share of the difference twice running, at (2h, h)
    // and at (h, h/2), and no score moves by more than tolerance::kFdMaxScoreMove at either of the two smaller steps.
    // Saturated softcaps and sharp softmaxes need small steps; once, a step of 4 on 'large' inputs met
    // the first test by coincidence while a score crossed tanh's active zone inside it
    // (fixtures/found/harness-grad-fd-unresolved-step.json).
    struct Level {
      Step st;
      double fd = 0, rounding = 0, score_move = 0;
    };
    // The largest change of a visible score between the two perturbed inputs, in units where softmax (and tanh under
    // softcap) bend on a scale of 1.
    const MaskRule mask = mask_rule(c);
    const double score_unit = c.softcap > 0 ? std::min(1.0, c.softcap) : 1.0;
    const auto score_move = [&](const CaseTensors& a, const CaseTensors& b) {
      double most = 0;
      const std::int64_t d = c.head_dim, group = c.group();
      for (const SeqGeometry& sg : g.seqs)
        for (std::int64_t i = 0; i < sg.lq; ++i) {
          const KeyRange kr = visible_keys(i, sg.lk, diagonal_offset(c.alignment, sg.lq, sg.lk), mask);
          for (std::int64_t hd = 0; hd < c.heads; ++hd) {
            const auto qa = a.q.data.begin() + ((sg.q_start + i) * c.heads + hd) * d;
            const auto qb = b.q.data.begin() + ((sg.q_start + i) * c.heads + hd) * d;
            for (std::int64_t j = kr.lo; j < kr.hi; ++j) {
              const std::int64_t krow = sg.k_start + sg.p0 + j;
              const auto ka = a.k.data.begin() + (krow * c.kv_heads + hd / group) * d;
              const auto kb = b.k.data.begin() + (krow * c.kv_heads + hd / group) * d;
              double sa = 0, sb = 0;
              for (std::int64_t x = 0; x < d; ++x) {
                sa += static_cast<double>(qa[x]) * ka[x];
                sb += static_cast<double>(qb[x]) * kb[x];
              }
              most = std::max(most, std::fabs(sa - sb) * c.softmax_scale() / score_unit);
            }
          }
        }
      return most;
    };
    const auto level = [&](double h) {
      Level l{make_step(h)};
      const AttentionResult p = reference::host_attention(c, l.st.plus), m = reference::host_attention(c, l.st.minus);
      l.fd = contract_rows(p.out, m.out, &p.noise, &m.noise, &l.rounding);
      l.score_move = score_move(l.st.plus, l.st.minus);
      return l;
    };
    // Within its share of the difference, or at the fp64 forward's own rounding (the fp32 rounding scaled to fp64's
    // unit roundoff: a derivative near 0). The fp32 rounding itself would be too loose: on 'large' inputs it is the
    // size of the differences a step across tanh's active zone makes.
    const auto resolved = [](const Level& wide, const Level& narrow) {
      return narrow.score_move <= tolerance::kFdMaxScoreMove &&
             std::fabs(wide.fd / 2 - narrow.fd) <=
                 tolerance::kFdTruncationShare * std::fabs(narrow.fd) + narrow.rounding * tolerance::kUnitRoundoff64Over32;
    };
    double step = tolerance::kFdFirstStep;
    Level wide = level(2 * step), narrow = level(step), half = level(step / 2);
    for (int halvings = 0; !(resolved(wide, narrow) && resolved(narrow, half)); ++halvings) {
      if (halvings == tolerance::kFdMaxHalvings) {
        // The forward is not smooth at any step tried: no finite difference measures the derivative here.
        v.kind = VerdictKind::kUnsupported;
        // One reason for all such cases, so that reports count them together.
        v.reason = fmt::format("no step down to {:g} of each input's largest magnitude keeps every score's move within "
                               "{:g} and the forward smooth (Richardson): a finite difference cannot measure the "
                               "derivative here",
                               tolerance::kFdFirstStep / 2 / (1 << tolerance::kFdMaxHalvings), tolerance::kFdMaxScoreMove);
        return;
      }
      step /= 2;
      wide = std::move(narrow);
      narrow = std::move(half);
      half = level(step / 2);
    }
    const double fd1 = narrow.fd, fd2 = wide.fd, rounding = narrow.rounding;
    detail::Run fp, fm;
    if (!detail::run_kernel(k, c, narrow.st.plus, fp, v) || !detail::run_kernel(k, c, narrow.st.minus, fm, v)) return;
    const double fd = contract_rows(fp.result.out, fm.result.out, nullptr, nullptr, nullptr);
    const double predicted = narrow.st.predicted, grad_rounding = narrow.st.grad_rounding;
    // Richardson: D(h) = 2h D' + c h^3 + ..., so D(2h) / 2 - D(h) = 3 c h^3: three times D(h)'s truncation.
    const double truncation = std::fabs(fd2 / 2 - fd1);
    const double bound = tolerance::kFdSafety * (rounding + grad_rounding + truncation);
    const bool finite = std::isfinite(fd) && std::isfinite(predicted);
    Comparison cmp;
    cmp.tensor = "fd";
    cmp.err_max = finite ? std::fabs(fd - predicted) : std::numeric_limits<double>::infinity();
    cmp.base_max = std::fabs(fd1 - predicted);  // the fp64 forward's finite difference against the same prediction
    cmp.floor = tolerance::kFdSafety * (rounding + grad_rounding);
    cmp.bound = bound;
    cmp.compared = 1;
    cmp.nonfinite = finite ? 0 : 1;
    cmp.mean_bound = std::numeric_limits<double>::infinity();
    cmp.worst = {0, 0, 0, 0, predicted, fd, fd1};
    v.cmp = cmp;
    if (!finite) {
      v.kind = VerdictKind::kFail;
      v.reason = fmt::format("the directional derivative is not finite (backward {}, finite difference {})", predicted, fd);
    } else if (!(cmp.err_max <= bound)) {
      v.kind = VerdictKind::kFail;
      v.reason = fmt::format("the backward's directional derivative {:.6g} differs from the forward's finite difference "
                             "{:.6g} by {:.3g}, past the bound {:.3g} (the fp64 forward's difference: {:.6g})",
                             predicted, fd, cmp.err_max, bound, fd1);
    }
  }
};

// One case's backward run kRaceRuns times: a deterministic contract promises the same bits every time (FA2's
// deterministic mode; flash-attention's tests/test_flash_attn.py test_flash_attn_race_condition reruns one case of
// batch 60, "sometimes we need large batch size for the race conditions to trigger", 250 times);
// any other backward must stay within the rule of its first run (atomics reorder sums by rounding; a lost or doubled
// update is far past that). GPU kernels only: that is where the races are, and grad-determinism reruns a CPU backward.
class GradRace : public GradientProperty {
 public:
  static constexpr int kRaceRuns = 16;
  std::string_view name() const override { return "grad-race"; }
  std::string_view description() const override {
    return "16 backward runs of one case: the same bits (deterministic contracts), else within the rule of the first";
  }
  std::string unsupported_reason(const Kernel& k) const override {
    if (std::string why = GradientProperty::unsupported_reason(k); !why.empty()) return why;
    return k.device() == "cuda" ? "" : kCpuKernel;
  }
  // Also when a fixture names it, on every kernel: on a CPU kernel unsupported at once, however large the case.
  Verdict check(Kernel& k, const KernelCase& c) const override {
    if (k.device() == "cuda") return GradientProperty::check(k, c);
    Verdict v = make_verdict(k, name());
    v.kind = VerdictKind::kUnsupported;
    v.reason = kCpuKernel;
    return v;
  }

 protected:
  static constexpr const char* kCpuKernel = "checks GPU kernels (grad-determinism reruns a CPU backward)";

  void judge_case(Kernel& k, const KernelCase& c, Verdict& v) const override {
    const CaseTensors t = materialize(c);
    BackwardRun first;
    if (!run_backward(k, c, t, first, v)) return;
    const bool bitwise = k.contract().backward.deterministic;
    // The rule's bounds where runs may differ; zero where the contract promises the same bits (the memcmp below
    // judges those, the comparison only shows the spread).
    const GradientComparisons bounds = bitwise ? GradientComparisons{} : rule_bounds(k, c, t);
    std::optional<Comparison> widest;  // the largest spread from run 1, shown on a pass
    for (int run = 2; run <= kRaceRuns; ++run) {
      BackwardRun again;
      if (!run_backward(k, c, t, again, v)) return;
      const GradientComparisons spread = compare_gradient_pair(c, first.result, again.result, bounds, zeroes(k));
      if (!widest || spread.decisive().err_max > widest->err_max) widest = spread.decisive();
      if (bitwise) {
        const std::string what = fmt::format("differs between run 1 and run {}", run);
        v.reason = first_gradient_difference(c, first.result, again.result, zeroes(k), what.c_str(), [](double x, double y) {
          return std::memcmp(&x, &y, sizeof x) != 0;
        });
      } else if (const std::string why = failure_reason(spread); !why.empty()) {
        v.cmp = spread.decisive();
        v.reason = fmt::format("run {} differs from run 1 beyond the rule: {}", run, why);
      }
      if (!v.reason.empty()) break;
    }
    if (v.reason.empty()) v.cmp = widest;
    v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
  }
};

}  // namespace

const std::vector<const Property*>& gradient_properties() {
  static const GradConformance conformance;
  static const GradDeterminism determinism;
  static const GradGqa gqa;
  static const GradVarlenPadded varlen;
  static const GradBatchPermutation permutation;
  static const GradMaskedZero zero;
  static const GradRobustness robustness;
  static const GradFiniteDifference fd;
  static const GradRace race;
  static const std::vector<const Property*> all{&conformance, &determinism, &gqa,        &varlen, &permutation,
                                                &zero,        &robustness,  &fd,         &race};
  return all;
}

}  // namespace flashcheck
