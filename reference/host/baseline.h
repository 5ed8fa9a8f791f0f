// The precision-emulating baseline: the naive algorithm computed the way an honest low-precision
// implementation would (flash-attn's `attention_ref(upcast=False, reorder_ops=True)`), so that
// |baseline - truth| measures how much error the dtype alone forces. The tolerance rule scales from it.
#pragma once

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "reference/host/attention.h"

namespace flashcheck::reference {

// In order, with rd() = rounding to the case's dtype and fp32 accumulation inside every product:
//   k' = rd(k * scale); s = rd(q . k'); softcap: s = rd(rd(tanh(rd(s / cap))) * cap);
//   P = rd(softmax_fp32(s)); out = rd(sum_j P_j v_j); lse = m + log(Z) in fp32.
// Empty rows follow the convention as in host_attention.
Result low_precision_baseline(const KernelCase& c, const CaseTensors& t, EmptyRow empty_row = EmptyRow::kZero);

}  // namespace flashcheck::reference
