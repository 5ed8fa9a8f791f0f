#include "oracles/hf_masks.h"

namespace flashcheck::hf {

std::string_view to_string(RowFlag f) {
  switch (f) {
    case RowFlag::kComparable: return "comparable";
    case RowFlag::kNoKey: return "no-key";
    case RowFlag::kPaddedQuery: return "padded-query";
  }
  return "?";
}

EagerMask eager_mask(const ModelCase& m, Profile p) {
  EagerMask e;
  const std::int64_t B = m.batch, Lq = m.q_len, Lk = m.kv_len(), P = m.past;
  e.batch = B;
  e.q_len = Lq;
  e.kv_len = Lk;
  e.allowed.assign(static_cast<std::size_t>(B * Lq * Lk), 0);
  e.rows.assign(static_cast<std::size_t>(B * Lq), RowFlag::kComparable);

  // A3: packed segments, only for causal layers without a 2D mask and without a cache object (the masking
  // utils' gate; bidirectional masks never look at position_ids), and only where eager knows packing at all.
  std::vector<std::vector<std::int64_t>> seg;
  if (profile_spec(p).switches.eager_packed_segments && m.causal && !m.attention_mask && !m.use_cache && m.position_ids) {
    const auto pos = m.effective_position_ids();
    seg.assign(static_cast<std::size_t>(B), std::vector<std::int64_t>(static_cast<std::size_t>(Lq), 0));
    for (std::int64_t b = 0; b < B; ++b) {
      const auto& p = pos[pos.size() == 1 ? 0 : static_cast<std::size_t>(b)];
      for (std::int64_t i = 1; i < Lq; ++i) {
        const bool boundary = p[static_cast<std::size_t>(i)] - p[static_cast<std::size_t>(i - 1)] != 1;
        seg[b][i] = seg[b][i - 1] + (boundary ? 1 : 0);
        e.segments = e.segments || boundary;
      }
    }
    if (!e.segments) seg.clear();
  }

  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Lq; ++i) {
      const std::int64_t qa = P + i;
      bool any = false;
      for (std::int64_t j = 0; j < Lk; ++j) {
        bool ok = m.key_valid(b, j);  // beyond the 2D mask (static-cache slots) counts as invalid
        if (m.causal) ok = ok && j <= qa;
        if (m.sliding_window) {
          const std::int64_t w = *m.sliding_window;
          ok = ok && (m.causal ? j > qa - w : (j - qa <= w && qa - j <= w));
        }
        if (!seg.empty()) ok = ok && j < Lq && seg[b][i] == seg[b][j];
        e.allowed[static_cast<std::size_t>((b * Lq + i) * Lk + j)] = ok ? 1 : 0;
        any = any || ok;
      }
      RowFlag& f = e.rows[static_cast<std::size_t>(b * Lq + i)];
      if (!any) f = RowFlag::kNoKey;
      else if (!m.key_valid(b, qa)) f = RowFlag::kPaddedQuery;
    }
  return e;
}

}  // namespace flashcheck::hf
