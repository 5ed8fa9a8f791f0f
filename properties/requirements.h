// What a property needs from its cases beyond the kernel's contract, and whether a kernel can meet it.
// The generators (search/generators.h) honour the requirements; the properties declare them.
#pragma once

#include <string>

#include "kernels/contract.h"

namespace flashcheck {

struct CaseRequirements {
  bool gqa = false;         // heads > kv_heads
  bool batch2 = false;      // at least two sequences
  bool chunkable = false;   // kv cache prefill (new_len == q_len >= 2), causal, bottom-right
  bool packed_kv = false;   // K/V in packed storage (the property pages them itself)
  bool no_cache = false;    // no appended tokens
  bool seqused = false;     // the kernel must support seqused_k (the property adds it)
  bool leftpad = false;     // the kernel must support leftpad_k (the property adds it)
  bool backward = false;    // backward cases (KernelCase::dout): the kernel's backward contract applies
  bool fp32 = false;        // the kernel must take fp32 (the property runs its cases in fp32)
  bool training = false;    // model level: training calls only (no past, no cache, not from generate)
};

// The contract backward cases are drawn from: the forward contract less what the backward lacks (its `without`
// features, its dtypes), with packed K/V and no cache (no backward API takes them).
Contract backward_view(const Contract& k);

// Why the kernel can never meet the requirements (the property is then unsupported for it), or "".
std::string requirements_unmet(const Contract& k, const CaseRequirements& req);

// The contract a property with these requirements draws its cases from (backward_view for backward properties).
Contract generation_contract(const Contract& k, const CaseRequirements& req);

}  // namespace flashcheck
