#include "core/geometry.h"

#include <algorithm>
#include <numeric>

#include "core/rng.h"

namespace flashcheck {

CaseGeometry geometry(const KernelCase& c) {
  CaseGeometry g;
  g.seqs.reserve(c.seqs.size());
  std::int64_t q = 0, k = 0, n = 0, pages = 0;
  for (const Sequence& s : c.seqs) {
    SeqGeometry sg;
    sg.q_start = q;
    sg.lq = s.q_len;
    sg.k_start = k;
    sg.k_alloc = s.k_len;
    sg.new_start = n;
    if (c.kv_cache) sg.kv_end = s.cache_len + s.new_len;
    else sg.kv_end = s.seqused_k ? *s.seqused_k : s.k_len;
    sg.p0 = s.leftpad_k;
    sg.lk = sg.kv_end - sg.p0;
    q += s.q_len;
    k += s.k_len;
    if (c.kv_cache) n += s.new_len;
    if (c.kv_storage == KvStorage::kPaged) pages += (s.k_len + c.paging.page_size - 1) / c.paging.page_size;
    g.max_q = std::max(g.max_q, s.q_len);
    g.max_k = std::max(g.max_k, s.k_len);
    g.seqs.push_back(sg);
  }
  g.total_q = q;
  g.q_rows = q + c.slack.q_rows;
  g.total_new = n;
  if (c.kv_storage == KvStorage::kPaged) {
    g.num_pages = pages + c.paging.extra_pages;
    g.kv_rows = g.num_pages * c.paging.page_size;
  } else {
    g.kv_rows = k + c.slack.kv_rows;
  }
  return g;
}

MaskRule mask_rule(const KernelCase& c) {
  MaskRule m{c.window.left, c.window.right};
  if (c.causal) m.right = 0;
  return m;
}

bool has_empty_rows(const KernelCase& c) {
  const CaseGeometry g = geometry(c);
  const MaskRule rule = mask_rule(c);
  for (const SeqGeometry& s : g.seqs) {
    const std::int64_t off = diagonal_offset(c.alignment, s.lq, s.lk);
    for (std::int64_t i = 0; i < s.lq; ++i)
      if (visible_keys(i, s.lk, off, rule).empty()) return true;
  }
  return false;
}

std::vector<std::vector<std::int32_t>> block_table(const KernelCase& c) {
  if (c.kv_storage != KvStorage::kPaged) return {};
  if (!c.paging.block_table.empty()) return c.paging.block_table;
  const CaseGeometry g = geometry(c);
  // Fisher-Yates over the whole pool with counter-based draws, so the table is the same everywhere.
  std::vector<std::int32_t> perm(static_cast<std::size_t>(g.num_pages));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t i = g.num_pages - 1; i > 0; --i) {
    const Philox4 r = element_bits(c.paging.table_seed, TensorId::kBlockTable, 0, static_cast<std::uint32_t>(i), 0, 0);
    const std::uint64_t wide = (static_cast<std::uint64_t>(r.w[0]) << 32) | r.w[1];
    const auto j = static_cast<std::int64_t>(wide % static_cast<std::uint64_t>(i + 1));
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(j)]);
  }
  std::vector<std::vector<std::int32_t>> table(c.seqs.size());
  std::size_t next = 0;
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const std::int64_t need = (c.seqs[b].k_len + c.paging.page_size - 1) / c.paging.page_size;
    for (std::int64_t i = 0; i < need; ++i) table[b].push_back(perm[next++]);
  }
  return table;
}

}  // namespace flashcheck
