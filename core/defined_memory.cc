#include "core/defined_memory.h"

#include <algorithm>

namespace flashcheck {

std::vector<std::uint8_t> empty_query_rows(const KernelCase& c, const CaseGeometry& g) {
  std::vector<std::uint8_t> empty(static_cast<std::size_t>(g.total_q), 0);
  const MaskRule rule = mask_rule(c);
  for (const SeqGeometry& s : g.seqs) {
    const std::int64_t off = diagonal_offset(c.alignment, s.lq, s.lk);
    for (std::int64_t i = 0; i < s.lq; ++i)
      empty[static_cast<std::size_t>(s.q_start + i)] = visible_keys(i, std::max<std::int64_t>(s.lk, 0), off, rule).empty();
  }
  return empty;
}

std::vector<RowSpan> query_rows(const CaseGeometry& g) {
  std::vector<RowSpan> rows;
  rows.reserve(g.seqs.size());
  for (const SeqGeometry& s : g.seqs) rows.push_back({s.q_start, s.q_start + s.lq});
  return rows;
}

std::vector<RowSpan> key_rows(const CaseGeometry& g, bool whole_allocation) {
  std::vector<RowSpan> rows;
  rows.reserve(g.seqs.size());
  for (const SeqGeometry& s : g.seqs) {
    if (whole_allocation) rows.push_back({s.k_start, s.k_start + s.k_alloc});
    else rows.push_back({s.k_start + s.p0, s.k_start + std::max(s.p0, s.kv_end)});
  }
  return rows;
}

}  // namespace flashcheck
