// lse-merge: the keys of every sequence split into 2-4 chunks, each chunk run through the kernel on its own, the
// chunks' outputs merged with the LSEs the kernel returned, equal attention over all keys, and the merged LSE equals
// the whole one. This is how every consumer of a split computation uses the LSE (split-KV decoding, cascade and
// prefix sharing, ring attention, FlashInfer's merge_state, flash-attention's test_flash_attn_combine), so it ties
// the LSE to the output the way conformance alone does not.
//
// A chunk keeps the mask of the keys it holds: with bottom-right alignment a chunk that ends e keys before the end of
// its sequence sees query i's keys under the window (L - e, R + e) of the whole case's (L, R) (causal is (-1, 0)).
// The split points are counted from the end of each sequence so that one window serves the whole batch (a sequence
// shorter than an offset has no keys in the chunks before it); a case whose mask cannot be split that way (top-left
// alignment with q_len != k_len, a window of one key) is unsupported.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "core/compare.h"
#include "core/geometry.h"
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

// One chunk: for every sequence, its keys [a_b, b_b) counted from the sequence's first key, as a case of its own.
struct Chunk {
  KernelCase c;
  std::vector<std::int64_t> first;  // a_b per sequence
  std::int64_t end_offset = 0;      // e: the chunk ends e keys before the end of every sequence
};

// Split offsets counted from the end, drawn from the case's seed: 1-3 distinct values in [1, e_max], descending.
std::vector<std::int64_t> split_offsets(std::uint64_t seed, std::int64_t e_max) {
  const std::int64_t want = std::min<std::int64_t>(1 + static_cast<std::int64_t>(seed % 3), e_max);
  std::vector<std::int64_t> e;
  std::uint64_t x = seed ^ 0xD1B54A32D192ED03ull;
  while (static_cast<std::int64_t>(e.size()) < want) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const std::int64_t v = 1 + static_cast<std::int64_t>((x >> 33) % static_cast<std::uint64_t>(e_max));
    if (std::find(e.begin(), e.end(), v) == e.end()) e.push_back(v);
  }
  std::sort(e.rbegin(), e.rend());
  return e;
}

// The chunk cases, or "" with `skip` set when the case's mask cannot be split by end offsets.
// `empty_chunks`: whether a chunk may hold no key of a sequence (the kernel takes zero-length sequences).
std::vector<Chunk> make_chunks(const KernelCase& c, const CaseGeometry& g, bool empty_chunks, std::string& skip) {
  const MaskRule m = mask_rule(c);
  const bool masked = m.left >= 0 || m.right >= 0;
  if (masked && c.alignment == Alignment::kTopLeft)
    for (const SeqGeometry& s : g.seqs)
      if (s.lq != s.lk) {
        skip = "a top-left mask with q_len != k_len cannot be split into chunks by one window";
        return {};
      }
  std::int64_t max_lk = 0, min_lk = std::numeric_limits<std::int64_t>::max();
  for (const SeqGeometry& s : g.seqs) {
    max_lk = std::max(max_lk, s.lk);
    min_lk = std::min(min_lk, s.lk);
  }
  std::int64_t e_max = (empty_chunks ? max_lk : min_lk) - 1;
  if (m.left >= 0) e_max = std::min(e_max, m.left);  // a chunk's left window L - e must stay >= 0
  if (e_max < 1) {
    skip = m.left == 0 ? "a window of one key has nothing to split"
           : empty_chunks ? "no sequence has two keys"
                          : "a sequence has fewer than two keys (and the kernel takes no zero-length sequence)";
    return {};
  }
  std::vector<std::int64_t> ends = split_offsets(c.data.seed, e_max);  // e_1 > ... > e_{n-1}
  ends.push_back(0);
  std::vector<Chunk> chunks;
  for (std::size_t j = 0; j < ends.size(); ++j) {
    Chunk ch;
    ch.end_offset = ends[j];
    KernelCase& k = ch.c;
    k = c;
    k.kv_cache = false;
    k.kv_storage = KvStorage::kPacked;
    k.paging = Paging{};
    k.alignment = masked ? Alignment::kBottomRight : c.alignment;
    for (std::size_t b = 0; b < c.seqs.size(); ++b) {
      const std::int64_t lk = g.seqs[b].lk;
      // A sequence shorter than the offsets has fewer chunks: the others hold none of its keys. Clipping a chunk's
      // start leaves its window alone (the window depends only on where the chunk ends).
      const std::int64_t end = std::max<std::int64_t>(0, lk - ends[j]);
      const std::int64_t a = j == 0 ? 0 : std::min(end, std::max<std::int64_t>(0, lk - ends[j - 1]));
      ch.first.push_back(a);
      Sequence& s = k.seqs[b];
      s.k_len = end - a;
      s.seqused_k.reset();
      s.leftpad_k = 0;
      s.cache_len = s.new_len = 0;
    }
    const std::int64_t left = m.left < 0 ? -1 : m.left - ends[j];
    const std::int64_t right = m.right < 0 ? -1 : m.right + ends[j];
    k.causal = left < 0 && right == 0;  // the last chunk of a causal case is causal itself
    k.window = k.causal ? Window{} : Window{left, right};
    k.name = fmt::format("{} chunk {}", c.name, j);
    chunks.push_back(std::move(ch));
  }
  return chunks;
}

class LseMerge : public Property {
 public:
  std::string_view name() const override { return "lse-merge"; }
  std::string_view description() const override {
    return "the keys split into 2-4 chunks, run separately and merged by their LSEs == attention over all keys";
  }
  std::string unsupported_reason(const Kernel& k) const override {
    return k.contract().returns_lse ? "" : "the contract does not return the LSE";
  }

  Verdict check(Kernel& k, const KernelCase& c) const override {
    const auto start = Clock::now();
    Verdict v = make_verdict(k, name());
    auto done = [&] {
      v.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return v;
    };
    if (!in_contract(k, c, v, "case")) return done();
    const CaseGeometry g = geometry(c);
    std::string skip;
    const std::vector<Chunk> chunks = make_chunks(c, g, k.contract().zero_length != Support::kNo, skip);
    if (!skip.empty()) {
      v.kind = VerdictKind::kUnsupported;
      v.reason = skip;
      return done();
    }
    for (const Chunk& ch : chunks) {
      if (const std::vector<FieldError> bad = validate(ch.c); !bad.empty()) {
        v.kind = VerdictKind::kError;
        v.reason = fmt::format("harness error: chunk case invalid: {}: {}", bad[0].field, bad[0].reason);
        return done();
      }
      if (!in_contract(k, ch.c, v, "chunk case")) return done();
    }

    const CaseTensors t = materialize(c);
    const ValueSource src = logical_values(c, t);
    const EmptyRow conv = k.contract().empty_row;
    const std::int64_t H = c.heads, dv = c.v_head_dim, cells = g.total_q * H;

    // Each chunk is first a case of its own: it must conform (its LSE included) before its LSE can be trusted.
    std::vector<AttentionResult> outs, truths;
    double out_bound = 0, lse_bound = 0, base = 0, lse_base = 0;
    for (std::size_t j = 0; j < chunks.size(); ++j) {
      const Chunk& ch = chunks[j];
      const CaseTensors tj = materialize(ch.c, [&](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h,
                                                   std::int64_t x) {
        return query_side(id) ? src(id, b, p, h, x)
                              : src(id, b, g.seqs[static_cast<std::size_t>(b)].p0 + ch.first[static_cast<std::size_t>(b)] + p, h, x);
      });
      Run r;
      if (!run_kernel(k, ch.c, tj, r, v)) return done();
      if (!r.buffer.lse_written) {
        v.kind = VerdictKind::kError;
        v.reason = fmt::format("chunk {} returned no LSE although the contract promises it", j);
        return done();
      }
      AttentionResult truth = reference::host_attention(ch.c, tj, conv);
      const AttentionResult lowp = reference::low_precision_baseline(ch.c, tj, conv);
      const Comparison cj = compare(ch.c, r.result, truth, lowp, conv, tolerance_for(ch.c));
      if (const std::string why = failure_reason(cj); !why.empty()) {
        v.kind = VerdictKind::kFail;
        v.cmp = cj;
        v.reason = fmt::format("chunk {} of {} (keys up to {} before each sequence's end) on its own: {}", j,
                               chunks.size(), ch.end_offset, why);
        return done();
      }
      out_bound = std::max(out_bound, cj.bound);
      lse_bound = std::max(lse_bound, cj.lse_bound);
      base = std::max(base, cj.base_max);
      lse_base = std::max(lse_base, cj.lse_base);
      outs.push_back(std::move(r.result));
      truths.push_back(std::move(truth));
    }

    // Merge in fp64 by the kernel's LSEs over the chunks where the row sees a key (the others' rows are undefined).
    const AttentionResult whole = reference::host_attention(c, t, conv);
    Comparison cmp;
    cmp.tensor = "merged";
    cmp.lse_checked = true;
    cmp.base_max = base;
    cmp.lse_base = lse_base;
    cmp.lse_bound = lse_bound;
    double spread = 0;  // max over cells of max_j |out_j - merged|: how far an LSE error can move a merged value
    std::vector<double> merged(static_cast<std::size_t>(cells * dv), 0.0);
    std::vector<double> merged_lse(static_cast<std::size_t>(cells), -std::numeric_limits<double>::infinity());
    std::vector<std::uint8_t> seen(static_cast<std::size_t>(cells), 0);
    for (std::int64_t cell = 0; cell < cells; ++cell) {
      const auto u = static_cast<std::size_t>(cell);
      if (whole.empty[u]) continue;
      double top = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < outs.size(); ++j)
        if (!truths[j].empty[u]) top = std::max(top, outs[j].lse[u]);
      double sum = 0;
      for (std::size_t j = 0; j < outs.size(); ++j) {
        if (truths[j].empty[u]) continue;
        const double w = std::exp(outs[j].lse[u] - top);
        sum += w;
        for (std::int64_t x = 0; x < dv; ++x) merged[u * dv + x] += w * outs[j].out[u * dv + x];
      }
      for (std::int64_t x = 0; x < dv; ++x) merged[u * dv + x] /= sum;
      merged_lse[u] = top + std::log(sum);
      seen[u] = 1;
      for (std::size_t j = 0; j < outs.size(); ++j)
        if (!truths[j].empty[u])
          for (std::int64_t x = 0; x < dv; ++x)
            spread = std::max(spread, std::abs(outs[j].out[u * dv + x] - merged[u * dv + x]));
    }
    // Each chunk is within out_bound of its truth, and a weighted mean of values within a bound stays within it; an
    // LSE error of at most lse_bound in every chunk moves each weight by at most that (relative, first order), which
    // moves the merged value by at most 2 * lse_bound * spread.
    cmp.bound = out_bound + 2.0 * lse_bound * spread;
    const auto loc = [&](std::int64_t cell, std::int64_t x, double got, double want) {
      const std::int64_t row = cell / H;
      std::size_t b = 0;
      while (b + 1 < g.seqs.size() && row >= g.seqs[b + 1].q_start) ++b;
      return ElementLoc{static_cast<std::int64_t>(b), cell % H, row - g.seqs[b].q_start, x, got, want, 0.0};
    };
    double worst = -1, lse_worst = -1;
    for (std::int64_t cell = 0; cell < cells; ++cell) {
      const auto u = static_cast<std::size_t>(cell);
      if (!seen[u]) continue;
      for (std::int64_t x = 0; x < dv; ++x) {
        const double got = merged[u * dv + x], want = whole.out[u * dv + x];
        const double e = std::isnan(got) ? std::numeric_limits<double>::infinity() : std::abs(got - want);
        ++cmp.compared;
        if (!(e <= cmp.bound)) ++cmp.mismatches;
        if (e > worst) {
          worst = e;
          cmp.worst = loc(cell, x, got, want);
        }
      }
      const double le = std::isnan(merged_lse[u]) ? std::numeric_limits<double>::infinity()
                                                  : std::abs(merged_lse[u] - whole.lse[u]);
      if (le > lse_worst) {
        lse_worst = le;
        cmp.lse_worst = loc(cell, -1, merged_lse[u], whole.lse[u]);
      }
    }
    cmp.err_max = std::max(worst, 0.0);
    cmp.lse_err = std::max(lse_worst, 0.0);
    cmp.err_mean = cmp.base_mean = cmp.mean_bound = 0;  // the merge has no mean check: the chunks had theirs
    v.cmp = cmp;
    std::string why;
    if (!(cmp.err_max <= cmp.bound))
      why = fmt::format("merged output error {:.3g} exceeds the bound {:.3g} ({} elements over)", cmp.err_max, cmp.bound,
                        cmp.mismatches);
    else if (!(cmp.lse_err <= cmp.lse_bound))
      why = fmt::format("merged LSE error {:.3g} exceeds the bound {:.3g}", cmp.lse_err, cmp.lse_bound);
    if (!why.empty()) {
      v.kind = VerdictKind::kFail;
      std::string at;
      for (std::size_t j = 0; j + 1 < chunks.size(); ++j) at += (j ? "," : "") + std::to_string(chunks[j].end_offset);
      v.reason = fmt::format("{} chunks split {} keys before each sequence's end: {}", chunks.size(), at, why);
    }
    return done();
  }
};

}  // namespace

const Property& lse_merge_property() {
  static const LseMerge p;
  return p;
}

}  // namespace flashcheck
