// Naive attention in float64: softmax(scale * q.k^T) V over the keys each query may see, as
// flash-attention's `attention_ref` computes it in its tests (tests/test_flash_attn.py) and with the
// masking its API documents (flash_attn_interface.py: bottom-right causal alignment, window_size), with
// every library convention as a switch taken from the case (alignment, window, softcap, scale, paging,
// cache, leftpad, seqused_k) or passed in (the empty-row convention). The per-row arithmetic is
// reference/host/exact_row.h, shared with the model-level oracle; no attention math is borrowed from
// LibTorch. Each value carries its fp32 rounding sensitivity (core/tolerance.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/case_tensors.h"
#include "core/kernel_case.h"

namespace flashcheck::reference {

// Results are AttentionResult (core/case_tensors.h): lse is -inf on empty rows, `empty` marks them.
using Result = AttentionResult;

// Exact attention of a validated case. Empty rows follow `empty_row`: zero -> 0; nan -> NaN; uniform ->
// the mean of V over the sequence's keys [p0, kv_end) ignoring the mask (0 when there are none).
Result host_attention(const KernelCase& c, const CaseTensors& t, EmptyRow empty_row = EmptyRow::kZero);

}  // namespace flashcheck::reference
