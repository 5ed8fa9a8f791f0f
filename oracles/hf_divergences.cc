#include "oracles/hf_divergences.h"

#include <algorithm>

namespace flashcheck::hf {
namespace {

using Row = std::vector<std::int64_t>;

// Segment ids by the eager rule: a new sequence wherever the step is not exactly +1.
Row eager_segments(const Row& pos) {
  Row seg(pos.size(), 0);
  for (std::size_t i = 1; i < pos.size(); ++i) seg[i] = seg[i - 1] + (pos[i] - pos[i - 1] != 1 ? 1 : 0);
  return seg;
}

// Segment ids by hf-main's flash rule: a sequence starts where the position equals the minimum; tokens
// before the first start get -1 (no sequence).
Row flash_segments(const Row& pos) {
  const std::int64_t mn = *std::min_element(pos.begin(), pos.end());
  Row seg(pos.size(), -1);
  std::int64_t s = -1;
  for (std::size_t i = 0; i < pos.size(); ++i) {
    if (pos[i] == mn) ++s;
    seg[i] = s;
  }
  return seg;
}

bool has_boundary(const Row& pos) {
  for (std::size_t i = 1; i < pos.size(); ++i)
    if (pos[i] - pos[i - 1] != 1) return true;
  return false;
}

bool flash_packed(const ModelCase& m, const Row& pos) {
  if (m.batch != 1) return false;
  const std::int64_t mn = *std::min_element(pos.begin(), pos.end());
  for (std::size_t i = 0; i < pos.size(); ++i)
    if (pos[i] != static_cast<std::int64_t>(i) + mn) return true;
  return false;
}

bool mask_has_hole(const ModelCase& m) {
  if (!m.attention_mask) return false;
  for (const auto& row : *m.attention_mask) {
    const auto first = std::find_if(row.begin(), row.end(), [](std::int64_t x) { return x != 0; });
    const auto last = std::find_if(row.rbegin(), row.rend(), [](std::int64_t x) { return x != 0; });
    if (first == row.end()) continue;
    for (auto it = first; it != last.base(); ++it)
      if (*it == 0) return true;
  }
  return false;
}

bool mask_all_ones(const ModelCase& m) {
  if (!m.attention_mask) return false;
  for (const auto& row : *m.attention_mask)
    for (std::int64_t x : row)
      if (x == 0) return false;
  return true;
}

}  // namespace

std::optional<Divergence> known_divergence(const ModelCase& m) {
  if (m.query_length && *m.query_length != m.q_len)
    return Divergence{"F8", "the caller's query_length differs from the query's length (sequence-parallel patches)"};
  const bool no_flash_mask = !m.attention_mask || (mask_all_ones(m) && !m.static_cache_len);  // flash_attention_mask drops it
  if (m.position_ids_3d && no_flash_mask)
    return Divergence{"F21", "3-D M-RoPE position_ids read as packed: cu_seqlens cover three times the tokens"};
  if (m.static_cache_len && *m.static_cache_len > m.filled_kv() && !m.attention_mask)
    return Divergence{"F13", "static cache without a 2D mask: the dense kernel attends unfilled slots"};
  if (m.sliding_window && mask_has_hole(m))
    return Divergence{"F15", "sliding window over a mask with holes: eager counts hole columns, flash does not"};
  if (m.sliding_window && !m.causal)
    return Divergence{"bidirectional-window", "bidirectional window: eager allows |i-j| <= W, flash (W-1, W-1)"};
  if (m.attention_mask && !mask_all_ones(m)) return std::nullopt;  // the mask branch decides: no known issue
  const auto pos = m.effective_position_ids();
  if (m.batch == 1) {
    const Row& p = pos.front();
    if (!flash_packed(m, p)) return std::nullopt;
    if (m.past > 0)
      return Divergence{"F4", "non-contiguous position_ids with a cache: the packed path drops the cached keys"};
    if (p.front() != *std::min_element(p.begin(), p.end()))
      return Divergence{"F17", "first segment does not start at min(position_ids): its tokens are never written"};
    if (m.use_cache || m.attention_mask || !m.causal)
      return Divergence{"F19", "packed position_ids where eager builds no segments (a cache object, an all-ones mask or a "
                               "bidirectional layer): flash is block-diagonal, eager is not"};
    if (eager_segments(p) != flash_segments(p))
      return Divergence{"F16", "gaps or repeats in packed position_ids: eager starts a sequence at each, flash only at min"};
    return std::nullopt;
  }
  if (m.causal && !m.use_cache && !m.attention_mask && m.position_ids)
    for (const Row& p : pos)
      if (has_boundary(p))
        return Divergence{"F20", "batch > 1 with packed position_ids per row: flash is dense, eager block-diagonal"};
  return std::nullopt;
}

std::optional<Divergence> known_sdpa_divergence(const ModelCase& m) {
  if (m.softcap)
    return Divergence{"S1", "SDPA has no softcap: sdpa_attention_forward swallows the softcap kwarg and the logits go uncapped "
                            "(Gemma2 offers SDPA until v5.20; v5.21 raises instead)"};
  return std::nullopt;
}

std::optional<std::string> upstream_symptom(std::string_view error, const ModelCase& m) {
  // #39814's scenario: each row's positions one contiguous run that does not start at 0 (a decode step past a cache,
  // a manual loop), so that no position is 0 and no decrease marks a packed boundary.
  const auto contiguous_without_zero = [](const ModelCase& c) {
    if (c.position_ids_3d) return false;
    for (const Row& p : c.effective_position_ids()) {
      if (p.empty() || p.front() == 0) return false;
      for (std::size_t i = 1; i < p.size(); ++i)
        if (p[i] != p[i - 1] + 1) return false;
    }
    return true;
  };
  struct Symptom {
    std::string_view text, report;
    bool (*scenario)(const ModelCase&);
  };
  static constexpr Symptom kSymptoms[] = {
      {"max(): Expected reduction dim to be specified for input.numel() == 0",
       "transformers#39814: position_ids without a 0 (decoding from a cache, a manual loop) take the varlen path and "
       "cu_seqlens.diff() is empty",
       +contiguous_without_zero},
      {"illegal memory access: cu_seqlens reach",
       "transformers#44643 when position_ids are 3-D (M-RoPE): cu_seqlens cover three times the tokens",
       [](const ModelCase& c) { return c.position_ids_3d; }},
  };
  for (const Symptom& s : kSymptoms)
    if (error.find(s.text) != std::string_view::npos && s.scenario(m)) return std::string(s.report);
  return std::nullopt;
}

}  // namespace flashcheck::hf
