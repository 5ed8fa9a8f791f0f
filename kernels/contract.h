// What a kernel promises: the features it computes natively, the ones its adapter translates (with how),
// the ones it does not support, and the conventions it follows. The harness never runs a case outside
// the contract: such a case is `unsupported`, with the reason.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/kernel_case.h"

namespace flashcheck {

enum class Support : std::uint8_t { kNo, kNative, kTranslated };

// The backward a kernel provides: dQ, dK and dV of its output for an upstream gradient dO (backward cases,
// KernelCase::dout). Its cases are the forward contract's, less what `without` names.
struct BackwardContract {
  bool available = false;
  bool deterministic = true;        // reruns give bitwise equal gradients (FA2's deterministic=True)
  bool zeroes_unused_keys = true;   // writes 0 into the dK/dV rows of a sequence's allocation outside its keys
                                    // (before leftpad_k, past seqused_k); else those rows are not defined
  bool writes_into_buffer = false;  // writes the harness's gradient buffers directly (canaries are meaningful)
  // Forward features (the names of `flashcheck list --json`'s "features") the backward lacks.
  std::vector<std::string> without;
  std::vector<DType> dtypes;        // empty: the forward's
  std::vector<std::string> notes;
  // Contract::coverage_exempt for the gradient properties: features the backward's own known-defect exclusions
  // leave (nearly) out of reach.
  std::vector<std::pair<std::string, std::string>> coverage_exempt;
};

struct Contract {
  std::string summary;  // one line: what the kernel is

  // Alignment of the causal diagonal and of windows; used only by cases that are causal or windowed.
  Support bottom_right = Support::kNo;
  Support top_left = Support::kNo;
  Support window = Support::kNo;   // a window other than (-1, -1)
  Support softcap = Support::kNo;
  Support gqa = Support::kNo;      // heads != kv_heads, query head h reads KV head h / (H / Hk)
  Support varlen = Support::kNo;   // sequences of different lengths in one batch
  Support seqused_k = Support::kNo;
  Support leftpad = Support::kNo;
  Support paged = Support::kNo;
  Support kv_cache = Support::kNo;
  Support zero_length = Support::kNo;  // q_len == 0 or no key (Lk == 0) in some sequence
  Support dv_differs = Support::kNo;   // v_head_dim != head_dim
  Support slack = Support::kNo;        // packed buffers longer than the sequences (KernelCase::slack)

  std::vector<DType> dtypes;
  std::int64_t max_head_dim = 256;
  std::int64_t head_dim_multiple = 1;
  // When not empty, the only head dims (of q/k and of v) the kernel takes, e.g. a kernel compiled for 64, 128
  // and 256; the two rules above still apply.
  std::vector<std::int64_t> head_dims;
  std::int64_t page_size_multiple = 1;
  std::vector<QLayout> layouts{QLayout::kVarlen};
  std::vector<KvStrides> kv_strides{KvStrides::kContiguous};

  EmptyRow empty_row = EmptyRow::kZero;
  bool returns_lse = false;
  bool deterministic = true;        // reruns are bitwise equal
  bool writes_into_buffer = false;  // writes the harness's output buffer directly (canaries are meaningful)

  // Not empty when the kernel needs finite values in the input slots no sequence uses (slack rows, keys past
  // seqused_k, unused pages): why (a documented precondition, or a known defect and its fixture). Cases generated
  // for it hold zeros there instead of NaN, and a case that puts NaN there is outside the contract.
  std::string finite_unused_slots;

  // Coverage features (search/coverage.h) the contract admits but that known-defect exclusions leave
  // (nearly) out of reach, so a run is not failed for missing them; each entry says why.
  std::vector<std::pair<std::string, std::string>> coverage_exempt;

  // How each translated feature is translated, and any other caveat worth printing with `list`.
  std::vector<std::string> notes;

  BackwardContract backward;
};

// The names of the features a contract lists (Contract's Support fields), in `list`'s order.
const std::vector<std::string>& contract_feature_names();
// Whether the case uses the feature of that name (contract_feature_names()).
bool case_uses_feature(const KernelCase& c, std::string_view feature);

// The contract restricted to `dtypes` and `head_dims` (each: empty keeps all): a run narrowed by
// `fuzz --dtype/--head-dim` to the configurations a user cares about, or that a JIT-compiled kernel can
// afford to compile. The caller checks that something is left
// (search/case_gen.h narrowing_unmet).
Contract narrowed(const Contract& k, const std::vector<DType>& dtypes, const std::vector<std::int64_t>& head_dims);

struct ContractCheck {
  bool supported = true;
  std::string reason;                     // why not, when unsupported
  std::vector<std::string> translations;  // translated features the case uses
};

ContractCheck check_contract(const Contract& k, const KernelCase& c);

// A backward case (c.dout set): the forward contract, then the backward's. A forward case passes unchanged.
ContractCheck check_backward_contract(const Contract& k, const KernelCase& c);

// Whether the case's input buffers hold slots that no sequence uses (where data.poison puts NaN): rows of Q
// past the sequences, K/V rows outside every sequence's keys (slack, past seqused_k, before leftpad, unused
// pages, cache positions the kernel appends to).
bool has_unused_input_slots(const KernelCase& c);

}  // namespace flashcheck
