#include "search/generators.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/geometry.h"
#include "core/recipe.h"
#include "search/picks.h"

namespace flashcheck {
namespace {

using detail::pick;
using detail::pick_index;
using detail::pick_weighted;
using detail::toggle;

bool supported(Support s) { return s != Support::kNo; }

// Head dims ordered from simplest to hardest: an index shrinks towards 64. Odd sizes only where allowed.
const std::vector<std::int64_t> kHeadDims{64, 32, 128, 16, 8, 40, 80, 96, 59, 111, 160, 192, 256, 1, 3};

std::vector<std::int64_t> head_dims_for(const Contract& k) {
  if (!k.head_dims.empty()) return k.head_dims;
  std::vector<std::int64_t> v;
  for (std::int64_t d : kHeadDims)
    if (d <= k.max_head_dim && d % k.head_dim_multiple == 0) v.push_back(d);
  return v;
}

// Page sizes, simplest first; 1 and non-powers of two on purpose.
const std::vector<std::int64_t> kPageSizes{16, 1, 3, 7, 2, 5, 64, 256};

// Lengths at tile boundaries (16, 32, 64, 128 and their neighbours) and = 1 mod 32.
const std::vector<std::int64_t> kEdgeLengths{1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 97, 127, 128, 129, 161, 193};

// A sequence length: uniform up to the cap (size-scaled, shrinking towards 1), an edge value, or zero.
std::int64_t pick_length(std::int64_t cap, bool allow_zero) {
  std::vector<std::int64_t> edges;
  for (std::int64_t e : kEdgeLengths)
    if (e <= cap) edges.push_back(e);
  switch (pick_weighted({5, 4, allow_zero ? 1u : 0u})) {
    case 0: return *rc::gen::inRange<std::int64_t>(1, cap + 1);
    case 1: return pick(edges);
    default: return 0;
  }
}

rc::Gen<KernelCase> raw_case_gen(const Contract& k, const CaseRequirements& req, const GenLimits& lim) {
  return rc::gen::exec([k, req, lim]() {
    KernelCase c;
    // A feature the run requires (`fuzz --require`, GenLimits::require) is turned on instead of drawn, where the
    // contract allows it; the run discards the cases that still lack one.
    const auto want = [&lim](const char* feature) {
      return std::find(lim.require.begin(), lim.require.end(), feature) != lim.require.end();
    };
    // --- structural picks: feature toggles (swarm testing), each off when the contract excludes it ---
    const bool can_br = supported(k.bottom_right), can_tl = supported(k.top_left);
    const bool chunk = req.chunkable;
    const bool causal = chunk || ((can_br || can_tl) && (want("causal") || want("causal-bottom-right") ||
                                                         want("causal-top-left") || toggle(1, 1)));
    bool top_left = !can_br || (can_tl && (want("causal-top-left") || (!want("causal-bottom-right") && toggle(1, 2))));
    if (chunk) top_left = false;
    const bool window = supported(k.window) && (can_br || can_tl) && (want("window") || toggle(1, 2));
    const bool softcap = supported(k.softcap) && (want("softcap") || toggle(1, 3));
    const bool gqa = req.gqa || (supported(k.gqa) && (lim.gqa_group > 0 || want("gqa") || want("mqa") || toggle(1, 1)));
    const bool varlen = supported(k.varlen) && toggle(2, 1);
    const bool seqused = !chunk && supported(k.seqused_k) && (want("seqused-k") || toggle(1, 2));
    const bool leftpad = supported(k.leftpad) && (want("leftpad") || toggle(1, 2));
    const bool paged = !req.packed_kv && supported(k.paged) && (want("paged") || want("page-size-1") || toggle(1, 2));
    const bool cache = chunk || (!req.no_cache && supported(k.kv_cache) && (want("kv-cache") || toggle(1, 2)));
    const bool zeros = !chunk && supported(k.zero_length) && (want("zero-length") || toggle(1, 2));
    const bool dv_differs = supported(k.dv_differs) && (want("dv!=d") || toggle(1, 3));

    c.dtype = pick(k.dtypes);
    const std::vector<std::int64_t> dims = head_dims_for(k);
    c.head_dim = pick(dims);
    c.v_head_dim = dv_differs ? pick(dims) : c.head_dim;

    // Heads: Hk in {1, 2, 4, 8}, group in {1, 2, 3, 4, 7, 8}, H = Hk * group <= max_heads (MQA: Hk 1).
    static const std::vector<std::int64_t> kGroups{2, 4, 8, 3, 7};
    const std::int64_t group = gqa ? (lim.gqa_group > 0 ? lim.gqa_group : pick(kGroups)) : 1;
    std::vector<std::int64_t> kv_choices;
    for (std::int64_t hk : {1, 2, 4, 8})
      if (hk * group <= lim.max_heads && (!want("mqa") || hk == 1) && (!want("gqa") || hk > 1 || group * 2 > lim.max_heads))
        kv_choices.push_back(hk);
    if (kv_choices.empty()) kv_choices.push_back(1);  // a required group wider than --max-heads: the CLI refuses it first
    c.kv_heads = pick(kv_choices);
    c.heads = c.kv_heads * group;

    std::vector<KvStrides> strides;
    for (KvStrides s : k.kv_strides)
      if (s != KvStrides::kExpanded || c.kv_heads == 1) strides.push_back(s);
    c.kv_strides = pick(strides);
    for (KvStrides s : strides)
      if ((s == KvStrides::kGapped && want("kv-gapped")) || (s == KvStrides::kExpanded && want("kv-expanded"))) c.kv_strides = s;

    c.causal = causal;
    c.alignment = top_left ? Alignment::kTopLeft : Alignment::kBottomRight;
    c.kv_cache = cache;
    if (paged) {
      std::vector<std::int64_t> sizes;
      for (std::int64_t p : kPageSizes)
        if (p % k.page_size_multiple == 0) sizes.push_back(p);
      if (sizes.empty()) sizes.push_back(k.page_size_multiple);
      c.kv_storage = KvStorage::kPaged;
      c.paging.page_size = want("page-size-1") && k.page_size_multiple == 1 ? 1 : pick(sizes);
      c.paging.extra_pages = *rc::gen::inRange<std::int64_t>(0, 4);
      c.paging.table_seed = *rc::gen::noShrink(rc::gen::resize(100, rc::gen::inRange<std::uint64_t>(0, 1u << 30)));
    }

    // --- the batch: a prefix-stable fixed-count container behind a shrinkable count ---
    const std::int64_t min_batch = (req.batch2 || want("batch>1")) ? std::min<std::int64_t>(2, lim.max_batch) : 1;
    const std::int64_t batch = *rc::gen::inRange<std::int64_t>(min_batch, lim.max_batch + 1);
    // Cap lengths so that the case's work stays inside the budget; the cap only grows when structural
    // picks shrink, so every shrink of them keeps the lengths legal.
    const double per_pair = static_cast<double>(batch * c.heads * (c.head_dim + c.v_head_dim));
    const auto cap = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::sqrt(lim.work_budget / per_pair)), 4, lim.max_len);
    for (std::int64_t b = 0; b < batch; ++b) {
      Sequence s;
      if (b > 0 && !varlen) {
        s = c.seqs.front();
        c.seqs.push_back(s);
        continue;
      }
      s.q_len = pick_length(cap, zeros);
      if (chunk && s.q_len < 2) s.q_len = 2;
      // Keys as slack over the queries: equal, more keys (kv cache, chunked prefill), or fewer (empty rows
      // under bottom-right causal), down to none when zero lengths are on.
      const std::size_t shape = pick_index(chunk ? 2 : 3);
      std::int64_t lk = s.q_len;
      if (shape == 1) lk = s.q_len + *rc::gen::inRange<std::int64_t>(1, cap + 1);
      if (shape == 2) lk = std::max<std::int64_t>(zeros ? 0 : 1, s.q_len - *rc::gen::inRange<std::int64_t>(1, cap + 1));
      if (!zeros && lk == 0) lk = 1;
      s.leftpad_k = leftpad ? *rc::gen::inRange<std::int64_t>(0, cap / 2 + 2) : 0;
      const std::int64_t kv_end = s.leftpad_k + lk;
      const std::int64_t unused = (seqused || cache) ? *rc::gen::inRange<std::int64_t>(0, cap / 2 + 2) : 0;
      s.k_len = kv_end + unused;
      if (cache) {
        s.new_len = chunk ? s.q_len : std::min(lk, *rc::gen::inRange<std::int64_t>(0, s.q_len + 1));
        s.cache_len = kv_end - s.new_len;
      } else if (seqused) {
        s.seqused_k = kv_end;
      }
      c.seqs.push_back(s);
    }

    // --- windows: (left, right) shapes as flash-attn takes them (-1 = unbounded), including ones wider than
    // every sequence ---
    if (window) {
      const std::int64_t w = *rc::gen::inRange<std::int64_t>(0, cap + 1);
      const std::int64_t w2 = *rc::gen::inRange<std::int64_t>(0, cap + 1);
      switch (pick_index(7)) {
        case 0: c.window = {0, 0}; break;
        case 1: c.window = {w, 0}; break;
        case 2: c.window = {0, w}; break;
        case 3: c.window = {-1, w}; break;
        case 4: c.window = {w, -1}; break;
        case 5: c.window = {w, w2}; break;
        default: c.window = {4 * cap + w, 0}; break;  // wider than any sequence
      }
    }

    // --- the data recipe last ---
    if (softcap) {
      static const std::vector<double> kCaps{30.0, 5.0, 10.0, 50.0};
      c.softcap = pick(kCaps);
      // Logits far past the cap: q scaled by a multiple of it, as flash-attn's softcap tests do.
      c.data.q_scale = c.softcap * static_cast<double>(*rc::gen::inRange(1, 9)) / 2.0;
    }
    static const Distribution kDists[] = {Distribution::kNormal, Distribution::kUniform, Distribution::kIntegers,
                                          Distribution::kLarge};
    c.data.dist = kDists[pick_weighted({6, 2, 1, 1})];
    // Inputs stay finite in the dtype (the `large` recipe at a softcap multiple passes 65504 in fp16): an infinite
    // input makes the truth and the bound infinite, and such a case judges nothing.
    while (!recipe_fits_dtype(c.data.dist, c.data.q_scale, c.dtype)) c.data.q_scale /= 2;
    c.data.v_onehot = want("onehot-v") || toggle(1, 7);
    c.data.seed = *rc::gen::noShrink(rc::gen::resize(100, rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << 40)));

    // --- slack last (so that the picks above draw what they drew before it existed): NaN-poisoned rows past
    // the last sequence in packed Q/output and K/V, where the kernel's API takes longer buffers ---
    if (supported(k.slack) && (want("slack") || toggle(1, 1))) {
      static const std::vector<std::int64_t> kSlackRows{1, 3, 16, 2, 64, 7};
      if (c.layout == QLayout::kVarlen && toggle(1, 1)) c.slack.q_rows = pick(kSlackRows);
      if (c.kv_storage == KvStorage::kPacked) c.slack.kv_rows = pick(kSlackRows);
    }
    // A kernel that needs finite unused slots gets zeros there: its contract says why, and campaigns look for
    // other bugs than the one it names.
    if (!k.finite_unused_slots.empty()) c.data.poison = false;
    // --- the upstream gradient of a backward case, after everything the forward draws ---
    if (req.backward) {
      static const DoutKind kKinds[] = {DoutKind::kNormal, DoutKind::kZeroRows, DoutKind::kOneHot};
      static const std::vector<double> kScales{1.0, 1.0 / 64, 8.0};
      c.dout = DoutRecipe{kKinds[pick_weighted({6, 2, 2})], pick(kScales)};
      if (want("dout-zero-rows")) c.dout->kind = DoutKind::kZeroRows;
      if (want("dout-onehot")) c.dout->kind = DoutKind::kOneHot;
    }
    return c;
  });
}

}  // namespace

std::vector<KernelCase> simpler_cases(const KernelCase& c) {
  std::vector<KernelCase> out;
  auto add = [&](KernelCase x) {
    x.paging.block_table.clear();
    if (validate(x).empty() && !(x == c)) out.push_back(std::move(x));
  };
  const CaseGeometry g = geometry(c);
  // Structure first: fewer sequences, fewer heads.
  if (c.seqs.size() > 1)
    for (std::size_t b = 0; b < c.seqs.size(); ++b) {
      KernelCase x = c;
      x.seqs.erase(x.seqs.begin() + static_cast<std::ptrdiff_t>(b));
      add(x);
    }
  if (c.heads > 1) {
    KernelCase one = c;
    one.heads = one.kv_heads = 1;
    one.kv_strides = c.kv_strides == KvStrides::kExpanded ? KvStrides::kContiguous : c.kv_strides;
    add(one);
  }
  if (c.kv_heads > 1) {
    KernelCase mqa = c;  // keep the grouping, one KV head
    mqa.heads = c.group() > 1 ? c.group() : 1;
    mqa.kv_heads = 1;
    add(mqa);
    KernelCase pair = c;  // the smallest grouping that still maps heads to different KV heads
    pair.kv_heads = 2;
    pair.heads = 2 * std::min<std::int64_t>(c.group(), 2);
    add(pair);
  }
  if (c.heads != c.kv_heads) {
    KernelCase x = c;
    x.heads = x.kv_heads;
    add(x);
  }
  // Features off.
  auto with = [&](auto edit) {
    KernelCase x = c;
    edit(x);
    add(x);
  };
  if (c.window != Window{}) with([](KernelCase& x) { x.window = {}; });
  if (c.softcap > 0) with([](KernelCase& x) {
      x.softcap = 0;
      x.data.q_scale = 1;
    });
  if (c.causal) with([](KernelCase& x) { x.causal = false; });
  if (c.kv_storage == KvStorage::kPaged) with([](KernelCase& x) { x.kv_storage = KvStorage::kPacked; });
  if (c.kv_strides != KvStrides::kContiguous) with([](KernelCase& x) { x.kv_strides = KvStrides::kContiguous; });
  if (c.v_head_dim != c.head_dim) with([](KernelCase& x) { x.v_head_dim = x.head_dim; });
  if (c.kv_cache) with([&](KernelCase& x) {  // the same keys, all already in the cache
      x.kv_cache = false;
      for (std::size_t b = 0; b < x.seqs.size(); ++b) {
        x.seqs[b].k_len = g.seqs[b].kv_end;
        x.seqs[b].cache_len = x.seqs[b].new_len = 0;
      }
    });
  with([](KernelCase& x) {
    for (Sequence& s : x.seqs) {
      if (s.seqused_k) s.k_len = *s.seqused_k;
      s.seqused_k.reset();
    }
  });
  with([](KernelCase& x) {
    for (Sequence& s : x.seqs) {
      if (x.kv_cache) s.cache_len -= s.leftpad_k;
      s.k_len -= s.leftpad_k;
      if (s.seqused_k) *s.seqused_k -= s.leftpad_k;
      s.leftpad_k = 0;
    }
  });
  // Shorter sequences: halve, then one less, for queries and (non-cache, plain) keys.
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const Sequence& s = c.seqs[b];
    for (std::int64_t q : {s.q_len / 2, s.q_len - 1})
      if (q >= 0 && q < s.q_len) with([&](KernelCase& x) {
          x.seqs[b].q_len = q;
          if (x.kv_cache && x.seqs[b].new_len > q) {
            x.seqs[b].cache_len += x.seqs[b].new_len - q;  // keep the keys, append fewer of them
            x.seqs[b].new_len = q;
          }
        });
    if (!c.kv_cache && !s.seqused_k && s.leftpad_k == 0)
      for (std::int64_t k : {s.k_len / 2, s.k_len - 1})
        if (k >= 0 && k < s.k_len) with([&](KernelCase& x) { x.seqs[b].k_len = k; });
  }
  // Smaller head dims, plainer data.
  for (std::int64_t d : {8, 16, 32, 64})
    if (d < c.head_dim) with([&](KernelCase& x) {
        x.v_head_dim = x.v_head_dim == x.head_dim ? d : std::min(x.v_head_dim, d);
        x.head_dim = d;
      });
  if (c.slack != Slack{}) with([](KernelCase& x) { x.slack = {}; });
  if (c.data.dist != Distribution::kNormal) with([](KernelCase& x) { x.data.dist = Distribution::kNormal; });
  if (c.data.v_onehot) with([](KernelCase& x) { x.data.v_onehot = false; });
  if (c.dout && !(*c.dout == DoutRecipe{})) with([](KernelCase& x) { x.dout = DoutRecipe{}; });
  return out;
}

rc::Gen<KernelCase> standard_mix_gen() {
  return rc::gen::exec([]() {
    KernelCase c;
    c.dtype = DType::kBF16;
    c.head_dim = c.v_head_dim = pick_index(2) == 0 ? 64 : 128;
    static const std::vector<std::int64_t> kKv{1, 2, 4, 8}, kGroup{1, 2, 3, 4, 8};
    c.kv_heads = pick(kKv);
    c.heads = c.kv_heads * pick(kGroup);
    c.causal = pick_index(10) < 6;
    if (pick_index(10) < 2) c.window = {static_cast<std::int64_t>(pick_index(256)), 0};
    const std::size_t batch = 1 + pick_index(4);
    for (std::size_t b = 0; b < batch; ++b) {
      const auto q = static_cast<std::int64_t>(1 + pick_index(512));
      c.seqs.push_back({.q_len = q, .k_len = q + static_cast<std::int64_t>(pick_index(257))});
    }
    c.data.seed = *rc::gen::noShrink(rc::gen::resize(100, rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << 40)));
    return c;
  });
}

rc::Gen<KernelCase> kernel_case_gen(const Contract& k, const CaseRequirements& req, const GenLimits& lim) {
  return rc::gen::shrink(raw_case_gen(k, req, lim),
                         [](const KernelCase& c) { return rc::seq::fromContainer(simpler_cases(c)); });
}

}  // namespace flashcheck
