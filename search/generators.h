// RapidCheck generators of KernelCases inside a kernel's contract, shrink-friendly in the ways
// RapidCheck's own guidance and Hypothesis' experience suggest: structural picks first (feature toggles, dtype, head dims, heads), the
// batch as a prefix-stable container, lengths as slack over other lengths so that every shrink stays
// valid, edge values (tile boundaries, zero lengths, decode, q_len > k_len) mixed in on purpose, and the
// data recipe last. Only search/ includes RapidCheck.
#pragma once

#include <cstdint>
#include <rapidcheck.h>
#include <vector>

#include "core/kernel_case.h"
#include "kernels/contract.h"
#include "properties/requirements.h"
#include "search/limits.h"

namespace flashcheck {

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
