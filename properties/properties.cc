#include <chrono>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <numeric>

#include "core/compare.h"
#include "core/defined_memory.h"
#include "core/geometry.h"
#include "properties/conformance.h"
#include "kernels/device_errors.h"
#if defined(FLASHCHECK_HAVE_CUDA)
#include "properties/conformance_device.h"
#endif
#include "properties/integration_property.h"
#include "properties/kernel_runs.h"
#include "properties/property.h"
#include "reference/host/attention.h"
#include "reference/host/baseline.h"

namespace flashcheck {
namespace {

using Clock = std::chrono::steady_clock;

using detail::in_contract;
using detail::make_verdict;
using detail::Run;
using detail::run_kernel;

// Base for the metamorphic properties: run the case and its transform, map the transform's output back
// to the case's rows, and compare within the tolerance bound of the case.
class Metamorphic : public Property {
 public:
  Verdict check(Kernel& k, const KernelCase& c) const override {
    const auto start = Clock::now();
    Verdict v = make_verdict(k, name());
    auto done = [&] {
      v.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return v;
    };
    if (!in_contract(k, c, v, "case")) return done();
    const CaseTensors t = materialize(c);
    Run base;
    if (!run_kernel(k, c, t, base, v)) return done();
    AttentionResult other;
    std::string skip;
    if (!transformed_output(k, c, t, other, v, skip)) return done();
    if (!skip.empty()) {
      v.kind = VerdictKind::kUnsupported;
      v.reason = skip;
      return done();
    }
    const EmptyRow conv = k.contract().empty_row;
    const AttentionResult truth = reference::host_attention(c, t, conv);
    const AttentionResult lowp = reference::low_precision_baseline(c, t, conv);
    const double bound = tolerance_bound(c, truth, lowp, conv);
    const Comparison cmp = compare_outputs(c, base.result, other, truth.empty, bound);
    v.cmp = cmp;
    const std::string why = failure_reason(cmp);
    v.kind = why.empty() ? VerdictKind::kPass : VerdictKind::kFail;
    if (!why.empty()) v.reason = fmt::format("{} differs from the original: {}", transform_name(), why);
    return done();
  }

 protected:
  virtual std::string_view transform_name() const = 0;
  // Runs the kernel on the transformed case(s) and writes the output laid out like `c`'s. Returns false
  // with `v` set when a run errs; sets `skip` when this case has nothing to transform.
  virtual bool transformed_output(Kernel& k, const KernelCase& c, const CaseTensors& t, AttentionResult& out,
                                  Verdict& v, std::string& skip) const = 0;

  // Runs the transformed case built from values of the original.
  static bool run_transformed(Kernel& k, const KernelCase& c2, const ValueSource& src, AttentionResult& out, Verdict& v) {
    if (!in_contract(k, c2, v, "transformed case")) return false;
    const CaseTensors t2 = materialize(c2, src);
    Run r;
    if (!run_kernel(k, c2, t2, r, v)) return false;
    out = std::move(r.result);
    return true;
  }
};

class Conformance : public Property {
 public:
  std::string_view name() const override { return "conformance"; }
  std::string_view description() const override { return "kernel ~ fp64 reference under the tolerance rule"; }
  Verdict check(Kernel& k, const KernelCase& c) const override {
#if defined(FLASHCHECK_HAVE_CUDA)
    // GPU kernels: generate, run, reference and compare on the device (fast at realistic sizes).
    if (k.on_device()) {
      const auto start = Clock::now();
      const ContractCheck cc = k.check(c);
      if (!cc.supported) {
        Verdict v = make_verdict(k, name());
        v.kind = VerdictKind::kUnsupported;
        v.reason = cc.reason;
        return v;
      }
      Verdict v = check_conformance_device(k, c, nullptr);
      v.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return v;
    }
#endif
    return check_conformance(k, c, materialize(c));
  }
};

// The first defined element (core/defined_memory.h) that differs bitwise between two runs' buffers, described; ""
// when none does. Output rows of empty rows under the NaN convention only need to be NaN in both.
std::string first_run_difference(const KernelCase& c, const OutputBuffer& a, const OutputBuffer& b) {
  const CaseGeometry g = geometry(c);
  const std::vector<std::uint8_t> empty = empty_query_rows(c, g);
  const std::int64_t H = c.heads, dv = c.v_head_dim;
  const auto same = [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0 || (std::isnan(x) && std::isnan(y)); };
  const std::vector<RowSpan> rows = query_rows(g);
  for (std::size_t s = 0; s < rows.size(); ++s)
    for (std::int64_t row = rows[s].begin; row < rows[s].end; ++row)
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t x = 0; x < dv; ++x) {
          const std::int64_t at = (row * H + h) * dv + x;
          const float va = a.out()[at], vb = b.out()[at];
          const bool ok = std::memcmp(&va, &vb, sizeof va) == 0 || (empty[static_cast<std::size_t>(row)] && same(va, vb));
          if (!ok)
            return fmt::format("output element (b{}, h{}, i{}, d{}) differs between two runs: {} then {}", s, h,
                               row - rows[s].begin, x, va, vb);
        }
        if (a.lse_written && b.lse_written && !empty[static_cast<std::size_t>(row)]) {
          const float la = a.lse()[row * H + h], lb = b.lse()[row * H + h];
          if (std::memcmp(&la, &lb, sizeof la) != 0)
            return fmt::format("LSE of (b{}, h{}, i{}) differs between two runs: {} then {}", s, h, row - rows[s].begin,
                               la, lb);
        }
      }
  if (a.lse_written != b.lse_written) return "one run wrote the LSE and the other did not";
  return "";
}

class Determinism : public Property {
 public:
  std::string_view name() const override { return "determinism"; }
  std::string_view description() const override { return "two runs give bitwise equal output and LSE"; }
  std::string unsupported_reason(const Kernel& k) const override {
    return k.contract().deterministic ? "" : "the contract does not promise bitwise reproducible runs";
  }
  Verdict check(Kernel& k, const KernelCase& c) const override {
    const auto start = Clock::now();
    Verdict v = make_verdict(k, name());
    if (in_contract(k, c, v, "case")) {
      const CaseTensors t = materialize(c);
      Run a, b;
      if (run_kernel(k, c, t, a, v) && run_kernel(k, c, t, b, v)) {
        v.reason = first_run_difference(c, a.buffer, b.buffer);
        if (!v.reason.empty()) v.kind = VerdictKind::kFail;
      }
    }
    v.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return v;
  }
};

class GqaRepeat : public Metamorphic {
 public:
  std::string_view name() const override { return "gqa-repeat"; }
  std::string_view description() const override { return "grouped KV heads == the same KV heads repeated explicitly"; }
  CaseRequirements requirements() const override { return {.gqa = true}; }
  std::string unsupported_reason(const Kernel& k) const override { return requirements_unmet(k.contract(), requirements()); }

 protected:
  std::string_view transform_name() const override { return "with KV heads repeated"; }
  bool transformed_output(Kernel& k, const KernelCase& c, const CaseTensors& t, AttentionResult& out, Verdict& v,
                          std::string& skip) const override {
    if (c.heads == c.kv_heads) {
      skip = "no grouped heads in this case";
      return true;
    }
    KernelCase c2 = c;
    c2.kv_heads = c.heads;
    if (c2.kv_strides == KvStrides::kExpanded) c2.kv_strides = KvStrides::kContiguous;
    const ValueSource src = logical_values(c, t);
    const std::int64_t group = c.group();
    return run_transformed(k, c2,
                           [&](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h, std::int64_t ch) {
                             return src(id, b, p, query_side(id) ? h : h / group, ch);
                           },
                           out, v);
  }
};

class VarlenPadded : public Metamorphic {
 public:
  std::string_view name() const override { return "varlen-padded"; }
  std::string_view description() const override {
    return "tightly packed K/V == every sequence padded to the longest allocation with seqused_k";
  }
  CaseRequirements requirements() const override { return {.no_cache = true, .seqused = true}; }
  std::string unsupported_reason(const Kernel& k) const override { return requirements_unmet(k.contract(), requirements()); }

 protected:
  std::string_view transform_name() const override { return "padded to the longest sequence"; }
  bool transformed_output(Kernel& k, const KernelCase& c, const CaseTensors& t, AttentionResult& out, Verdict& v,
                          std::string&) const override {
    KernelCase c2 = c;
    const CaseGeometry g = geometry(c);
    for (std::size_t b = 0; b < c2.seqs.size(); ++b) {
      c2.seqs[b].seqused_k = g.seqs[b].kv_end;
      c2.seqs[b].k_len = g.max_k + 1;  // one more than any sequence: every one gets padding
    }
    c2.paging.block_table.clear();
    return run_transformed(k, c2, logical_values(c, t), out, v);
  }
};

class PagedContiguous : public Metamorphic {
 public:
  std::string_view name() const override { return "paged-contiguous"; }
  std::string_view description() const override { return "K/V in permuted pages == the same K/V packed contiguously"; }
  CaseRequirements requirements() const override { return {.packed_kv = true}; }
  std::string unsupported_reason(const Kernel& k) const override {
    return k.contract().paged == Support::kNo ? "the contract has no paged KV" : "";
  }

 protected:
  std::string_view transform_name() const override { return "in pages"; }
  bool transformed_output(Kernel& k, const KernelCase& c, const CaseTensors& t, AttentionResult& out, Verdict& v,
                          std::string&) const override {
    KernelCase c2 = c;
    c2.kv_storage = KvStorage::kPaged;
    c2.slack.kv_rows = 0;  // the pool's extra pages are a paged buffer's slack
    // Page size from the case's seed: small and odd sizes make sequences cross many page boundaries.
    static const std::int64_t kSizes[] = {1, 2, 3, 5, 16};
    const std::int64_t mult = k.contract().page_size_multiple;
    c2.paging.page_size = mult > 1 ? mult : kSizes[c.data.seed % 5];
    c2.paging.extra_pages = 2;
    c2.paging.table_seed = c.data.seed ^ 0x9E3779B97F4A7C15ull;
    c2.paging.block_table.clear();
    return run_transformed(k, c2, logical_values(c, t), out, v);
  }
};

class BatchPermutation : public Metamorphic {
 public:
  std::string_view name() const override { return "batch-permutation"; }
  std::string_view description() const override { return "reversing the batch reverses the outputs, nothing else"; }
  CaseRequirements requirements() const override { return {.batch2 = true}; }

 protected:
  std::string_view transform_name() const override { return "with the batch reversed"; }
  bool transformed_output(Kernel& k, const KernelCase& c, const CaseTensors& t, AttentionResult& out, Verdict& v,
                          std::string& skip) const override {
    const std::size_t B = c.seqs.size();
    if (B < 2) {
      skip = "a batch of one has nothing to permute";
      return true;
    }
    KernelCase c2 = c;
    std::reverse(c2.seqs.begin(), c2.seqs.end());
    if (!c2.paging.block_table.empty()) std::reverse(c2.paging.block_table.begin(), c2.paging.block_table.end());
    const ValueSource src = logical_values(c, t);
    AttentionResult r2;
    if (!run_transformed(k, c2,
                         [&](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h, std::int64_t ch) {
                           return src(id, static_cast<std::int64_t>(B) - 1 - b, p, h, ch);
                         },
                         r2, v))
      return false;
    // Rows of sequence b of the original sit at sequence B - 1 - b of the reversed run.
    const CaseGeometry g = geometry(c), g2 = geometry(c2);
    const std::int64_t row_elems = c.heads * c.v_head_dim;
    out.out.assign(r2.out.size(), 0.0);
    for (std::size_t b = 0; b < B; ++b) {
      const auto from = r2.out.begin() + g2.seqs[B - 1 - b].q_start * row_elems;
      std::copy(from, from + g.seqs[b].lq * row_elems, out.out.begin() + g.seqs[b].q_start * row_elems);
    }
    return true;
  }
};

class PaddingInvariance : public Metamorphic {
 public:
  std::string_view name() const override { return "padding-invariance"; }
  std::string_view description() const override {
    return "adding left padding (leftpad_k) and right padding (seqused_k) around the keys changes no valid row";
  }
  CaseRequirements requirements() const override { return {.no_cache = true, .seqused = true, .leftpad = true}; }
  std::string unsupported_reason(const Kernel& k) const override { return requirements_unmet(k.contract(), requirements()); }

 protected:
  std::string_view transform_name() const override { return "with extra padding"; }
  bool transformed_output(Kernel& k, const KernelCase& c, const CaseTensors& t, AttentionResult& out, Verdict& v,
                          std::string&) const override {
    KernelCase c2 = c;
    const CaseGeometry g = geometry(c);
    std::vector<std::int64_t> shift(c.seqs.size());
    for (std::size_t b = 0; b < c2.seqs.size(); ++b) {
      shift[b] = 1 + static_cast<std::int64_t>((c.data.seed >> (3 * b)) % 7);  // 1..7 extra slots on the left
      Sequence& s = c2.seqs[b];
      s.leftpad_k = g.seqs[b].p0 + shift[b];
      s.seqused_k = g.seqs[b].kv_end + shift[b];
      s.k_len = *s.seqused_k + 3;  // and three on the right
    }
    c2.paging.block_table.clear();
    const ValueSource src = logical_values(c, t);
    return run_transformed(k, c2,
                           [&](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h, std::int64_t ch) {
                             return src(id, b, query_side(id) ? p : p - shift[static_cast<std::size_t>(b)], h, ch);
                           },
                           out, v);
  }
};

class ChunkedPrefill : public Metamorphic {
 public:
  std::string_view name() const override { return "chunked-prefill"; }
  std::string_view description() const override {
    return "prefilling new tokens over a cache in two chunks == one prefill (bottom-right causal)";
  }
  CaseRequirements requirements() const override { return {.chunkable = true}; }
  std::string unsupported_reason(const Kernel& k) const override { return requirements_unmet(k.contract(), requirements()); }

 protected:
  std::string_view transform_name() const override { return "prefilled in two chunks"; }
  bool transformed_output(Kernel& k, const KernelCase& c, const CaseTensors& t, AttentionResult& out, Verdict& v,
                          std::string& skip) const override {
    if (!c.kv_cache || !c.causal || c.alignment != Alignment::kBottomRight) {
      skip = "not a bottom-right causal prefill over a cache";
      return true;
    }
    // Chunk A: the first s_b new tokens of each sequence; chunk B: the rest, over a cache that now holds
    // chunk A's keys. Queries are the new tokens, so row i of the prefill is row i - s_b of chunk B.
    std::vector<std::int64_t> split(c.seqs.size());
    KernelCase a = c, b2 = c;
    for (std::size_t b = 0; b < c.seqs.size(); ++b) {
      const Sequence& s = c.seqs[b];
      if (s.new_len != s.q_len) {
        skip = "queries are not the appended tokens";
        return true;
      }
      split[b] = s.q_len / 2;
      a.seqs[b].q_len = a.seqs[b].new_len = split[b];
      b2.seqs[b].q_len = b2.seqs[b].new_len = s.q_len - split[b];
      b2.seqs[b].cache_len = s.cache_len + split[b];
    }
    a.paging.block_table.clear();
    b2.paging.block_table.clear();
    const ValueSource src = logical_values(c, t);
    AttentionResult ra, rb;
    if (!run_transformed(k, a, src, ra, v)) return false;
    if (!run_transformed(k, b2,
                         [&](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h, std::int64_t ch) {
                           return src(id, b, query_side(id) ? p + split[static_cast<std::size_t>(b)] : p, h, ch);
                         },
                         rb, v))
      return false;
    const CaseGeometry g = geometry(c), ga = geometry(a), gb = geometry(b2);
    const std::int64_t row = c.heads * c.v_head_dim;
    out.out.assign(static_cast<std::size_t>(g.total_q * row), 0.0);
    for (std::size_t b = 0; b < c.seqs.size(); ++b) {
      const auto dst = out.out.begin() + g.seqs[b].q_start * row;
      std::copy(ra.out.begin() + ga.seqs[b].q_start * row, ra.out.begin() + (ga.seqs[b].q_start + split[b]) * row, dst);
      std::copy(rb.out.begin() + gb.seqs[b].q_start * row, rb.out.begin() + (gb.seqs[b].q_start + gb.seqs[b].lq) * row,
                dst + split[b] * row);
    }
    return true;
  }
};

class Robustness : public Property {
 public:
  std::string_view name() const override { return "robustness"; }
  std::string_view description() const override {
    return "every valid output element written, nothing written outside the output, poison in unused input slots ignored";
  }
  std::string unsupported_reason(const Kernel& k) const override {
    return k.contract().writes_into_buffer ? ""
                                           : "the adapter copies results into the harness buffer, so canaries cannot see the kernel's own writes";
  }
  Verdict check(Kernel& k, const KernelCase& c) const override {
    const auto start = Clock::now();
    Verdict v = make_verdict(k, name());
    auto done = [&] {
      v.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return v;
    };
    if (!in_contract(k, c, v, "case")) return done();
    KernelCase poisoned = c;
    poisoned.data.poison = true;  // NaN in every input slot the kernel must not read
    const CaseTensors t = materialize(poisoned);
    Run r;
    if (!run_kernel(k, poisoned, t, r, v)) return done();
    const std::int64_t damage = r.buffer.canary_damage();
    std::int64_t unwritten = 0, first = -1;
    // The sequences' rows only: slack rows past them are the kernel's to leave (core/kernel_case.h Slack).
    const std::int64_t valid = geometry(c).total_q * c.heads * c.v_head_dim;
    for (std::int64_t i = 0; i < valid; ++i)
      if (OutputBuffer::unwritten(r.buffer.out()[i])) {
        ++unwritten;
        if (first < 0) first = i;
      }
    if (damage > 0) {
      v.kind = VerdictKind::kFail;
      v.reason = fmt::format("{} canary element{} around the output overwritten (out-of-bounds write)", damage,
                             damage > 1 ? "s" : "");
    } else if (unwritten > 0) {
      const std::int64_t row = first / (c.heads * c.v_head_dim);
      v.kind = VerdictKind::kFail;
      v.reason = fmt::format("{} output element{} never written (first in packed row {}, head {})", unwritten,
                             unwritten > 1 ? "s" : "", row, (first / c.v_head_dim) % c.heads);
    } else {
      // Written everywhere and inside its bounds: the values must still conform (poison must not leak).
      Verdict conf = check_conformance(k, poisoned, t);
      conf.property = std::string(name());
      v = conf;
    }
    return done();
  }
};

}  // namespace

std::string Property::unsupported_reason(const Kernel&) const { return ""; }

Judgement Property::judge(Kernel& k, const AnyCase& c) const {
  if (const KernelCase* kc = std::get_if<KernelCase>(&c)) return {check(k, *kc), ""};
  Verdict v = make_verdict(k, name());
  v.kind = VerdictKind::kError;
  v.reason = fmt::format("harness error: {} is a kernel-level property and was given a model case", name());
  return {v, ""};
}

Verdict Property::check(Kernel& k, const KernelCase&) const {
  Verdict v = make_verdict(k, name());
  v.kind = VerdictKind::kError;
  v.reason = fmt::format("harness error: {} is a model-level property and was given a kernel case", name());
  return v;
}

const Property& lse_merge_property();  // properties/lse_merge.cc
#if defined(FLASHCHECK_HAVE_CUDA)
const Property& device_reference_property();           // properties/device_reference_property.cc
const Property& device_gradient_reference_property();  // the same file
#endif

const std::vector<const Property*>& all_properties() {
  static const Conformance conformance;
  static const Determinism determinism;
  static const GqaRepeat gqa;
  static const VarlenPadded varlen;
  static const PagedContiguous paged;
  static const BatchPermutation permutation;
  static const PaddingInvariance padding;
  static const ChunkedPrefill chunked;
  static const Robustness robustness;
  static const std::vector<const Property*> all = [&] {
    std::vector<const Property*> v{&conformance, &determinism, &gqa, &varlen, &paged, &permutation, &padding, &chunked, &robustness,
                                 &lse_merge_property()};
#if defined(FLASHCHECK_HAVE_CUDA)
    v.push_back(&device_reference_property());
    v.push_back(&device_gradient_reference_property());
#endif
    v.insert(v.end(), gradient_properties().begin(), gradient_properties().end());
    return v;
  }();
  return all;
}

bool is_gradient_property(const Property& p) { return p.requirements().backward; }

bool stays_on_the_host(const Kernel& k, const Property& p) { return k.device() == "cpu" && !p.uses_device(); }

const Property* find_property(std::string_view name) {
  for (const Property* p : all_properties())
    if (p->name() == name) return p;
  if (const auto kind = integration_kind(name)) return &integration_on_hf_main(*kind);
  return nullptr;
}

}  // namespace flashcheck
