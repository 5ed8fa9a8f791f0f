#include "search/model_generators.h"

#include <algorithm>
#include <numeric>

#include "search/picks.h"

namespace flashcheck {
namespace {

using detail::pick;
using detail::pick_index;
using detail::pick_weighted;
using detail::toggle;
using Rows = std::vector<std::vector<std::int64_t>>;

std::int64_t upto(std::int64_t lo, std::int64_t hi) { return *rc::gen::inRange<std::int64_t>(lo, hi + 1); }

enum MaskKind : std::size_t { kNoMask, kOnes, kLeft, kRight, kRandom, kHoles, kEmptyRow };

Rows make_mask(MaskKind kind, std::int64_t B, std::int64_t cols, std::int64_t past) {
  Rows m(static_cast<std::size_t>(B), std::vector<std::int64_t>(static_cast<std::size_t>(cols), 1));
  for (auto& row : m) {
    switch (kind) {
      case kLeft: {
        const std::int64_t pad = upto(0, cols - 1);
        std::fill_n(row.begin(), pad, 0);
        break;
      }
      case kRight: {  // zeros after the prompt: the prompt is the past when there is one (then a hole)
        const std::int64_t prompt = past > 0 ? past : cols;
        const std::int64_t pad = upto(0, prompt - 1);
        std::fill(row.begin() + (prompt - pad), row.begin() + prompt, 0);
        break;
      }
      case kRandom:
        for (auto& x : row) x = toggle(1, 3) ? 0 : 1;
        break;
      case kHoles: {
        const std::int64_t from = upto(0, cols - 1), len = upto(1, std::max<std::int64_t>(1, cols / 2));
        std::fill(row.begin() + from, row.begin() + std::min(cols, from + len), 0);
        break;
      }
      default: break;
    }
  }
  if (kind == kEmptyRow) std::fill(m.back().begin(), m.back().end(), 0);
  return m;
}

enum PosKind : std::size_t { kDefault, kStandard, kOffset, kPacked, kGaps, kRepeats, kNoZero, kRestartAt2, kFirstNotMin };

// One row of position_ids of length n for a sequence with `past` cached tokens.
std::vector<std::int64_t> make_positions(PosKind kind, std::int64_t n, std::int64_t past) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), past);
  switch (kind) {
    case kOffset: {
      const std::int64_t s = upto(1, 20);
      for (auto& x : p) x += s;
      break;
    }
    case kPacked:
    case kRestartAt2: {
      const std::int64_t start = kind == kRestartAt2 ? 2 : 0;
      std::int64_t next = start;
      for (auto& x : p) {
        if (next > start && toggle(1, 3)) next = start;
        x = next++;
      }
      break;
    }
    case kGaps:
      for (std::size_t i = 1; i < p.size(); ++i) p[i] = p[i - 1] + (toggle(1, 2) ? 2 : 1);
      break;
    case kRepeats:
      for (std::size_t i = 1; i < p.size(); ++i) p[i] = p[i - 1] + (toggle(1, 2) ? 0 : 1);
      break;
    case kNoZero: {
      const std::int64_t s = upto(1, 9);
      for (std::size_t i = 0; i < p.size(); ++i) p[i] = s + static_cast<std::int64_t>(i) * upto(1, 2);
      break;
    }
    case kFirstNotMin: {
      const std::int64_t split = upto(0, n - 1);
      for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i < split ? split + 2 + i : i - split;
      break;
    }
    default: break;
  }
  return p;
}

}  // namespace

rc::Gen<ModelCase> model_case_gen(const ModelGenLimits& lim) {
  return rc::gen::exec([lim]() {
    // Every pick is drawn whatever the toggles say, in a fixed order, so that shrinking one choice (a
    // feature off) does not shift the random stream of the others.
    ModelCase m;
    static const std::vector<DType> kDtypes{DType::kBF16, DType::kF16, DType::kF32};
    m.dtype = pick(kDtypes);
    const bool batched = toggle(3, 2);
    const std::int64_t batch = upto(2, std::max<std::int64_t>(2, lim.max_batch));
    m.batch = batched ? batch : 1;
    const bool decode = pick_weighted({2, 3}) == 0;
    const std::int64_t q_len = upto(1, lim.max_q_len);
    m.q_len = decode && !lim.training ? 1 : q_len;
    const bool has_past = toggle(1, 1);
    const std::int64_t past = upto(1, lim.max_past);
    m.past = has_past && !lim.training ? past : 0;
    const bool cache_object = toggle(1, 3);
    m.use_cache = !lim.training && (m.past > 0 || cache_object);
    static const std::vector<std::int64_t> kGroups{1, 2, 4, 8, 3};
    static const std::vector<std::int64_t> kKvHeads{1, 2, 4};
    const std::int64_t group = pick(kGroups);
    std::vector<std::int64_t> kv;
    for (std::int64_t h : kKvHeads)
      if (h * group <= lim.max_heads) kv.push_back(h);
    m.kv_heads = pick(kv);
    m.heads = m.kv_heads * group;
    static const std::vector<std::int64_t> kDims{16, 8, 32, 64};
    m.head_dim = pick(kDims);
    const bool bidirectional = toggle(1, 9);
    m.causal = !(bidirectional && !m.use_cache);  // encoder-style layers run without a cache

    const auto mask = static_cast<MaskKind>(pick_weighted({6, 2, 5, 2, 2, 2, 1}));
    if (mask != kNoMask) m.attention_mask = make_mask(mask, m.batch, m.past + m.q_len, m.past);

    const auto pos = static_cast<PosKind>(pick_weighted({8, 2, 1, 3, 1, 1, 2, 2, 1}));
    const bool per_row = toggle(2, 1);
    const bool three_d = toggle(1, 30);
    if (pos != kDefault) {
      const std::int64_t rows = m.batch > 1 && per_row ? m.batch : 1;
      Rows p;
      for (std::int64_t r = 0; r < rows; ++r) p.push_back(make_positions(pos, m.q_len, m.past));
      m.position_ids = std::move(p);
      m.position_ids_3d = three_d;
    }
    const bool window = toggle(1, 4);
    const std::int64_t w = upto(1, 8);
    if (window) m.sliding_window = w;
    const bool cap = toggle(1, 8);
    const double cap_value = pick(std::vector<double>{50.0, 20.0, 5.0});
    if (cap) m.softcap = cap_value;
    if (toggle(1, 20)) m.scale = 0.125;
    const bool caller_length = toggle(1, 20);
    const std::int64_t length = upto(1, m.q_len + 2);
    if (caller_length) m.query_length = length;
    const bool static_cache = toggle(1, 12);
    const std::int64_t slack = upto(1, 8);
    if (static_cache && m.use_cache) m.static_cache_len = m.past + m.q_len + slack;
    // A padding-free caller (DataCollatorWithFlattening) passes cu_seqlens that agree with its
    // position_ids: one row of packed sequences restarting at 0, no cache.
    const bool kwargs = toggle(1, 3);
    if (kwargs && pos == kPacked && m.batch == 1 && !m.use_cache && !m.position_ids_3d) {
      const auto& p = m.position_ids->front();
      VarlenKwargs k;
      for (std::size_t i = 0; i < p.size(); ++i)
        if (p[i] == 0) k.cu_seq_lens_q.push_back(static_cast<std::int64_t>(i));
      k.cu_seq_lens_q.push_back(static_cast<std::int64_t>(p.size()));
      k.cu_seq_lens_k = k.cu_seq_lens_q;
      for (std::size_t i = 1; i < k.cu_seq_lens_q.size(); ++i)
        k.max_length_q = std::max(k.max_length_q, k.cu_seq_lens_q[i] - k.cu_seq_lens_q[i - 1]);
      k.max_length_k = k.max_length_q;
      m.varlen_kwargs = std::move(k);
    }
    m.via_generate = toggle(1, 8) && !lim.training;
    static const std::vector<Distribution> kDists{Distribution::kNormal, Distribution::kUniform, Distribution::kIntegers};
    m.data.dist = pick(kDists);
    m.data.seed = *rc::gen::noShrink(rc::gen::inRange<std::uint64_t>(0, 1u << 30));
    // A decode step over a static cache in which a batch row has no valid key: every release hands that row's query
    // to the kernel with no key, and what the kernel writes there reaches the next layer (issue 29). Drawn last, so
    // that the picks above keep their streams.
    const bool keyless_decode = toggle(1, 3);
    if (keyless_decode && m.static_cache_len && m.q_len == 1) {
      if (!m.attention_mask) m.attention_mask = make_mask(kOnes, m.batch, m.past + 1, m.past);
      std::fill(m.attention_mask->back().begin(), m.attention_mask->back().end(), 0);
    }
    return m;
  });
}

}  // namespace flashcheck
