// The HF SDPA path: what transformers' SDPA integration (src/transformers/integrations/sdpa_attention.py,
// sdpa_attention_forward, under the mask of masking_utils.sdpa_mask) does with a ModelCase, version by version.
// The mask is the eager one (oracles/hf_masks.h: both come from sdpa_mask) unless sdpa_mask "skips" it, returning
// None so that SDPA's own is_causal (top-left) stands in; then is_causal = q_len > 1 and the layer is causal,
// a static-cache prefill slices K/V to the query (#47094), grouped K/V go to SDPA with enable_gqa, and a softcap
// is dropped (or raises, v5.21+). run_sdpa_path calls at::scaled_dot_product_attention exactly so, so its dispatch
// and rounding are the release's own; tools/hf_crosscheck/crosscheck.py checks both against the real release.
// The versions differ only through their row of core/hf_profiles.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/hf_profiles.h"
#include "core/model_case.h"
#include "core/model_tensors.h"
#include "core/verdict.h"
#include "oracles/hf_path_defects.h"

namespace flashcheck::hf {

// How GQA reaches SDPA.
enum class SdpaGqa : std::uint8_t {
  kNone,       // one query head per K/V head
  kRepeatKv,   // K/V repeated to the query heads (repeat_kv)
  kEnableGqa,  // SDPA broadcasts K/V itself (enable_gqa=True)
  kPackQuery,  // the group's query heads become query rows over the K/V heads (pack_gqa)
};
std::string_view to_string(SdpaGqa g);

struct SdpaPlan {
  Profile profile = Profile::kHfMain;
  bool raises = false;        // transformers raises: `error`
  std::string error;
  bool mask_skipped = false;  // sdpa_mask returned None (the is_causal shortcut)
  bool is_causal = false;     // SDPA's is_causal argument
  std::int64_t keys = 0;      // K/V rows SDPA receives (the static-cache prefill slices them to q_len)
  SdpaGqa gqa = SdpaGqa::kNone;
  bool softcap_dropped = false;  // the case has a softcap that SDPA never applies
  std::string note;              // how the path decided, for reports
};

SdpaPlan plan_sdpa_path(Profile p, const ModelCase& m, PathDefect defect = PathDefect::kNone);
// The plan under arbitrary switches, labelled `p`: plan_sdpa_path is this with p's row (and its defect).
SdpaPlan plan_sdpa_with_switches(Profile p, const ProfileSwitches& s, const ModelCase& m);

struct SdpaRun {
  VerdictKind kind = VerdictKind::kPass;  // kPass: ran; kError: raised; kUnsupported: the profile has no SDPA path
  std::string reason;
  std::vector<float> out;  // [B, Lq, Hq, D], values exact in the case's dtype
  std::optional<GradientResult> grads;  // with a dout: dq [B * Lq, Hq, D], dk and dv [B * Lk, Hkv, D]
};

// Runs the plan with at::scaled_dot_product_attention on the case's tensors (on CUDA when `on_device` and a
// GPU is present, else on the CPU), returning the output as transformers does ([B, Lq, Hq, D]); with `dout`
// ([B, Lq, Hq, D]) also the gradients of <dout, out> through torch's autograd of the same call (training).
SdpaRun run_sdpa_path(const SdpaPlan& plan, const ModelCase& m, const ModelTensors& t, bool on_device = false,
                      const HostTensor* dout = nullptr);

}  // namespace flashcheck::hf
