// RapidCheck generators of KernelCases inside a kernel's contract, shrink-friendly in the ways
// research/anchors.md §1.4 lists: structural picks first (feature toggles, dtype, head dims, heads), the
// batch as a prefix-stable container, lengths as slack over other lengths so that every shrink stays
// valid, edge values (tile boundaries, zero lengths, decode, q_len > k_len) mixed in on purpose, and the
// data recipe last. Only properties/*.cc include RapidCheck.
#pragma once

#include <cstdint>
#include <rapidcheck.h>
#include <vector>

#include "core/kernel_case.h"
#include "kernels/contract.h"

namespace flashcheck {

// What a property needs from its cases beyond the kernel's contract.
struct CaseRequirements {
  bool gqa = false;         // heads > kv_heads
  bool batch2 = false;      // at least two sequences
  bool chunkable = false;   // kv cache prefill (new_len == q_len >= 2), causal, bottom-right
  bool packed_kv = false;   // K/V in packed storage (the property pages them itself)
  bool no_cache = false;    // no appended tokens
  bool seqused = false;     // the kernel must support seqused_k (the property adds it)
  bool leftpad = false;     // the kernel must support leftpad_k (the property adds it)
};

struct GenLimits {
  std::int64_t max_len = 192;   // longest sequence drawn uniformly, before the work budget caps it
  std::int64_t max_batch = 4;
  std::int64_t max_heads = 16;
  double work_budget = 3e6;     // sum over sequences of Lq * Lk * H * (d + dv): keeps a case in milliseconds
};

// Why the kernel can never meet the requirements (the property is then unsupported for it), or "".
std::string requirements_unmet(const Contract& k, const CaseRequirements& req);

// Domain shrinks, tried after RapidCheck's own: one sequence fewer, one head, no grouping, no window, no
// softcap, not causal, no cache/paging/leftpad/seqused_k, contiguous K/V, shorter sequences, a smaller head
// dim, plain data. Every candidate is valid; the property rejects those outside the kernel's contract.
std::vector<KernelCase> simpler_cases(const KernelCase& c);

// The "standard varlen mix" the throughput figures use (issue 5 of the project): batch 1-4; per
// sequence q_len 1-512 and k_len = q_len + 0-256; H = Hk * g with Hk in {1, 2, 4, 8} and g in
// {1, 2, 3, 4, 8}; d 64 or 128; bf16; causal 60 %; a sliding window (W, 0) on 20 % of the cases.
rc::Gen<KernelCase> standard_mix_gen();

rc::Gen<KernelCase> kernel_case_gen(const Contract& k, const CaseRequirements& req = {}, const GenLimits& lim = {});

}  // namespace flashcheck
