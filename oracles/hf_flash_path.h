// The HF flash path: how transformers' flash-attention integration (src/transformers/modeling_flash_attention_utils.py
// and integrations/flash_attention.py) turns a ModelCase into one kernel call, version by version, and what
// it makes of the kernel's output. A plan is pure bookkeeping (branch, cu_seqlens, which rows go where);
// run_flash_path executes it on any Kernel whose contract fits, so the integration property can compare the
// result with the eager oracle. The versions differ only through their row of core/hf_profiles.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/hf_profiles.h"  // Profile, to_string(Profile), parse_profile, all_profiles
#include "core/model_case.h"
#include "core/model_tensors.h"
#include "core/verdict.h"
#include "kernels/kernel.h"
#include "oracles/hf_path_defects.h"

namespace flashcheck::hf {

enum class FlashBranch : std::uint8_t { kMask, kVarlenKwargs, kPacked, kDense, kError };
std::string_view to_string(FlashBranch b);

// Where a row of the path's final output comes from.
inline constexpr std::int64_t kZeroRow = -1;    // zero-filled by re-padding
inline constexpr std::int64_t kUnwritten = -2;  // never written: undefined memory on a GPU

struct FlashCall {
  bool varlen = true;
  // varlen: the packed rows handed to the kernel, as indices into q flattened to [B * Lq] and k, v
  // flattened to [B * Lk]; the kernel reads rows [cu[0], cu[last]) of them.
  std::vector<std::int64_t> q_rows, k_rows;
  std::vector<std::int64_t> cu_q, cu_k;
  std::int64_t max_q = 0, max_k = 0;
  bool causal = true;                                          // flash-attn >= 2.1: bottom-right
  std::optional<std::pair<std::int64_t, std::int64_t>> window;  // flash-attn's inclusive (left, right)
  std::optional<double> softcap;
  double scale = 1.0;
};

struct FlashPlan {
  Profile profile = Profile::kHfMain;
  FlashBranch branch = FlashBranch::kDense;
  std::string error;          // branch == kError: the exception transformers (or the kernel) raises
  FlashCall call;
  std::int64_t out_len = 0;   // rows per batch row of the output ([B, out_len, Hq, D])
  // [B * out_len]: the call's output row (r >= 0; dense: b * Lq + i), kZeroRow or kUnwritten.
  std::vector<std::int64_t> row_source;
  std::string note;           // how the path decided, for reports
};

FlashPlan plan_flash_path(Profile p, const ModelCase& m, PathDefect defect = PathDefect::kNone);
// The plan under arbitrary switches, labelled `p`: plan_flash_path is this with p's row (and its defect).
FlashPlan plan_with_switches(Profile p, const ProfileSwitches& s, const ModelCase& m);

struct FlashRun {
  VerdictKind kind = VerdictKind::kPass;  // kPass: ran; kError: raised; kUnsupported: the kernel cannot take the call
  std::string reason;
  std::vector<double> out;  // [B * out_len, Hq, D]; NaN on unwritten rows
  std::optional<GradientResult> grads;  // with a dout: dq [B * Lq, Hq, D], dk and dv [B * Lk, Hkv, D]
};

// Executes the plan's call on `k` with the case's tensors and assembles the output as transformers would. With
// `dout` ([B, out_len, Hq, D]) also the training step's gradients: the re-padding's backward gathers dO into the
// call's rows (rows zero-filled or never written get none), the kernel's backward computes the call's dQ, dK, dV,
// and the unpadding's backward (index_first_axis) scatters them back to the layer's q, k, v.
FlashRun run_flash_path(const FlashPlan& plan, const ModelCase& m, const ModelTensors& t, Kernel& k,
                        const HostTensor* dout = nullptr);

// The KernelCase of the plan's call (seqs from the cu_seqlens), as the kernel receives it.
KernelCase call_case(const FlashPlan& plan, const ModelCase& m);

}  // namespace flashcheck::hf
