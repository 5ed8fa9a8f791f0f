// The HF flash path (research/hf.md §6 B): how transformers' flash-attention integration turns a
// ModelCase into one kernel call, version by version, and what it makes of the kernel's output. A plan is
// pure bookkeeping (branch, cu_seqlens, which rows go where); run_flash_path executes it on any Kernel
// whose contract fits, so the integration property can compare the result with the eager oracle.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model_case.h"
#include "core/model_tensors.h"
#include "core/verdict.h"
#include "kernels/kernel.h"

namespace flashcheck::hf {

// Versions of the integration, each replaying that version's dispatch:
//   hf-main        transformers 5.x as of 5.17.0 (v4.56 semantics plus the min() start rule of #47525)
//   hf-4.55        v4.54.0 - v4.55.0: any position_ids take the varlen path; window (W, W)
//   hf-4.53        v4.45 - v4.53: varlen only for batch 1 with non-monotonic position_ids; window (W, W)
//   hf-2025-08     main between #40002/#40163 and #40424: a caller's query_length picks "decoding" cu_seqlens
//   fastchat-2023  FastChat's Llama-2 flash monkey patch after PR #2263 (GQA, past kv) and #2503
enum class Profile : std::uint8_t { kHfMain, kHf455, kHf453, kHf202508, kFastchat2023 };
std::string_view to_string(Profile p);
std::optional<Profile> parse_profile(std::string_view s);
const std::vector<Profile>& all_profiles();

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

// Deliberate integration bugs, each one change to hf-main, for the mutation self-test (docs/MUTANTS.md).
enum class PathDefect : std::uint8_t {
  kNone,
  kAnyPositionIds,     // every position_ids tensor takes the varlen path, not only packed ones (v4.54)
  kStartAtZero,        // sequences start where position == 0, not at min(position_ids) (before #47525)
  kWindowWW,           // window (W, W) instead of (W - 1, W - 1): W + 1 keys (#39408)
  kCallerQueryLength,  // a query_length unequal to the key length means decoding (#39843, #40399)
};
struct PathDefectInfo {
  PathDefect defect;
  std::string_view name, description, imitates;
};
const std::vector<PathDefectInfo>& path_defects();

FlashPlan plan_flash_path(Profile p, const ModelCase& m, PathDefect defect = PathDefect::kNone);

struct FlashRun {
  VerdictKind kind = VerdictKind::kPass;  // kPass: ran; kError: raised; kUnsupported: the kernel cannot take the call
  std::string reason;
  std::vector<double> out;  // [B * out_len, Hq, D]; NaN on unwritten rows
};

// Executes the plan's call on `k` with the case's tensors and assembles the output as transformers would.
FlashRun run_flash_path(const FlashPlan& plan, const ModelCase& m, const ModelTensors& t, Kernel& k);

// The KernelCase of the plan's call (seqs from the cu_seqlens), as the kernel receives it.
KernelCase call_case(const FlashPlan& plan, const ModelCase& m);

}  // namespace flashcheck::hf
