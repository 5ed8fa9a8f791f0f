// The backward references: gradients of attention w.r.t. q, k and v for a backward case's upstream gradient dO.
//
// host_gradients: exact, in fp64, for every switch the forward reference takes from the case (both causal
// alignments, windows, softcap and its derivative, GQA/MQA with dK/dV summed over each group, seqused_k, leftpad,
// varlen, slack, dv != d), each value with its fp32 rounding sensitivity (core/tolerance.h). A row that sees no key
// contributes nothing and gets dQ = 0; keys no row sees, allocated keys outside a sequence and slack rows get 0.
//
// low_precision_gradients: the baseline the rule scales from, autograd through the baseline's naive math in the
// case's dtype as flash-attention's tests build dq_pt/dk_pt/dv_pt (attention_ref(upcast=False, reorder_ops=True)):
//   forward as reference/host/baseline.h (k' = rd(k scale), s = rd(q.k'), softcap u = rd(s / cap), t = rd(tanh u),
//   l = rd(t cap), P = rd(softmax_fp32(l))), then with fp32 accumulation inside every product and sum:
//   dV = rd(P^T dO) per query head, dP = rd(dO V^T), dl = rd(P (dP - sum_j P_j dP_j)), softcap: dt = rd(dl cap),
//   du = rd(dt (1 - t^2)), ds = rd(du / cap); dQ = rd(ds K'), dK = rd(rd(ds^T Q) scale) per query head, and
//   dK/dV of a KV head rd(sum over its group) (the backward of repeating KV heads).
#pragma once

#include "core/case_tensors.h"
#include "core/kernel_case.h"

namespace flashcheck::reference {

// Both need a validated backward case (c.dout set) and its tensors (t.dout filled).
GradientResult host_gradients(const KernelCase& c, const CaseTensors& t);
GradientResult low_precision_gradients(const KernelCase& c, const CaseTensors& t);

}  // namespace flashcheck::reference
