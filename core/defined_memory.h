// What memory a kernel defines for a case, stated once: the properties compare, rerun and poison-check only this,
// so that a kernel is never judged on memory its API leaves to it (issue: a determinism "failure" that was a slack
// row holding 0 in one run and NaN in the next).
//
//   query side (output, LSE, dQ): the packed rows of the sequences; the slack rows past them are the kernel's to
//     leave (core/kernel_case.h Slack). The LSE of a row that sees no key has no agreed value (flash-attn writes
//     +inf or -inf, SDPA's CPU flash 0) and is not defined either.
//   key side (dK, dV): the rows of each sequence's allocation in packed K/V; keys outside the sequence's range
//     (before leftpad_k, past seqused_k) are defined only when the backward contract promises zeros there.
#pragma once

#include <cstdint>
#include <vector>

#include "core/geometry.h"
#include "core/kernel_case.h"

namespace flashcheck {

// 1 for every packed query row (total_q of them) that sees no key: its output follows the empty-row
// convention, and its LSE is not defined.
std::vector<std::uint8_t> empty_query_rows(const KernelCase& c, const CaseGeometry& g);

// Rows [begin, end) of a packed tensor that one sequence owns.
struct RowSpan {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// The sequences' query rows (output, LSE, dQ), in batch order.
std::vector<RowSpan> query_rows(const CaseGeometry& g);

// Packed K/V rows whose gradient is defined, per sequence: the used keys [p0, kv_end) of its allocation, or the
// whole allocation when `whole_allocation` (a backward that writes zeros for the keys outside the sequence).
// Packed storage only: no backward API takes paged K/V.
std::vector<RowSpan> key_rows(const CaseGeometry& g, bool whole_allocation);

}  // namespace flashcheck
