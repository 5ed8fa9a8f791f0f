// Per-sequence lengths, offsets and the visibility rule: flash-attn's bottom-right causal diagonal
// (flash-attention 2.1 release notes; flash-attention#466) with windows and left padding.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kernel_case.h"

namespace flashcheck {

struct SeqGeometry {
  std::int64_t q_start = 0;    // first row of this sequence in packed Q / O
  std::int64_t lq = 0;         // valid query rows
  std::int64_t k_start = 0;    // first row of this sequence's allocation in packed K/V (packed storage)
  std::int64_t k_alloc = 0;    // allocated logical key positions (k_len)
  std::int64_t new_start = 0;  // first row in packed K_new/V_new (kv_cache)
  std::int64_t kv_end = 0;     // one past the last used logical key position
  std::int64_t p0 = 0;         // leftpad: logical key j is position p0 + j
  std::int64_t lk = 0;         // visible-range length: kv_end - p0
};

struct CaseGeometry {
  std::vector<SeqGeometry> seqs;
  std::int64_t total_q = 0;    // valid rows of packed Q and the output (the sequences')
  std::int64_t q_rows = 0;     // rows of Q and output storage: total_q, then slack.q_rows rows past the end
  std::int64_t kv_rows = 0;    // rows of K/V storage: packed total plus slack.kv_rows, or num_pages * page_size when paged
  std::int64_t num_pages = 0;  // paged storage only
  std::int64_t total_new = 0;  // rows of packed K_new/V_new
  std::int64_t max_q = 0;
  std::int64_t max_k = 0;      // longest allocation (k_len)
};

// Requires a case that passed validate().
CaseGeometry geometry(const KernelCase& c);

// The mask window after folding in causal: causal forces the right bound to 0 (window (L, 0)).
struct MaskRule {
  std::int64_t left = -1;
  std::int64_t right = -1;
};
MaskRule mask_rule(const KernelCase& c);

// Offset of the causal/window diagonal for one sequence: Lk - Lq (bottom-right) or 0 (top-left).
inline std::int64_t diagonal_offset(Alignment a, std::int64_t lq, std::int64_t lk) {
  return a == Alignment::kBottomRight ? lk - lq : 0;
}

// Visible keys of query row i form one interval [lo, hi); empty when hi <= lo.
struct KeyRange {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  bool empty() const { return hi <= lo; }
};
inline KeyRange visible_keys(std::int64_t i, std::int64_t lk, std::int64_t off, MaskRule m) {
  KeyRange r{0, lk};
  if (m.left >= 0 && i + off - m.left > r.lo) r.lo = i + off - m.left;
  if (m.right >= 0 && i + off + m.right + 1 < r.hi) r.hi = i + off + m.right + 1;
  return r;
}

// Whether some query row of the case sees no key (an empty row: flash-attn writes 0 there, its LSE -inf).
bool has_empty_rows(const KernelCase& c);

// Block table of a paged case: the explicit one, or pages assigned by a permutation of the pool drawn
// from paging.table_seed. Row b covers ceil(k_len / page_size) pages. Empty for packed storage.
std::vector<std::vector<std::int32_t>> block_table(const KernelCase& c);

}  // namespace flashcheck
