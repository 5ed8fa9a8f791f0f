#include "oracles/hf_sdpa_path.h"

#include <ATen/Context.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <exception>
#include <fmt/format.h>

#include "kernels/torch/torch_tensors.h"
#include "oracles/hf_masks.h"
#include "oracles/model_autograd.h"

namespace flashcheck::hf {
namespace {

// What sdpa_attention_forward raises for a softcap from v5.21.0 on.
constexpr const char* kSoftcapError = "`sdpa` attention does not support `softcap`";

// The 2D mask as masking_utils.prepare_padding_mask hands it to the skip test: padded with False up to the
// key length (a StaticCache's unfilled slots). Whether it is all true, and whether it is true exactly on the
// first q_len columns (the "empty cache" clause of #47094).
struct Padding {
  bool present = false, all_true = true, query_prefix_only = true;
};

Padding padding_of(const ModelCase& m) {
  Padding p;
  if (!m.attention_mask) return p;
  p.present = true;
  const std::int64_t kv = m.kv_len();
  for (std::int64_t b = 0; b < m.batch; ++b)
    for (std::int64_t j = 0; j < kv; ++j) {
      const bool valid = m.key_valid(b, j);
      p.all_true = p.all_true && valid;
      p.query_prefix_only = p.query_prefix_only && valid == (j < m.q_len);
    }
  return p;
}

// sdpa_mask's "skip" (masking_utils._ignore_causal_mask_sdpa, _ignore_bidirectional_mask_sdpa, and the
// conditions create_causal_mask puts on allow_is_causal_skip).
bool mask_skipped(const ProfileSwitches& s, const ModelCase& m, bool packed_segments, std::string& why) {
  const std::int64_t q = m.q_len, kv = m.kv_len();
  const Padding pad = padding_of(m);
  const bool padding_ok = pad.all_true || !s.sdpa_skip_checks_padding;
  const bool window_reached = m.sliding_window && kv >= *m.sliding_window && s.sdpa_skip_checks_window;
  if (!m.causal) {
    why = "bidirectional: skipped without padding and with the keys inside the window";
    return padding_ok && !window_reached;
  }
  if (packed_segments) {
    why = "packed sequences: the mask separates them";
    return false;
  }
  if (s.sdpa_mask_for_one_sequence && s.eager_packed_segments && !m.attention_mask && !m.use_cache && !m.static_cache_len) {
    why = "position_ids without a 2D mask or cache: find_packed_sequence_indices answers even for one sequence";
    return false;
  }
  if (m.static_cache_len && (!s.sdpa_static_prefill_skip || q == 1)) {
    why = s.sdpa_static_prefill_skip ? "a static cache while decoding never skips" : "a static cache never skips";
    return false;
  }
  if (window_reached) {
    why = "the keys reach the sliding window";
    return false;
  }
  const bool aligned = q == 1 || kv == q || !s.sdpa_skip_checks_alignment;
  if (aligned && padding_ok) {
    why = "one query or as many queries as keys, no padding: is_causal stands in";
    return true;
  }
  if (s.sdpa_static_prefill_skip && m.past == 0 && (!pad.present || pad.query_prefix_only)) {
    why = "an empty cache with padding only after the query (#47094): is_causal on the first q_len keys";
    return true;
  }
  why = aligned ? "padding in the 2D mask" : "several queries over a cache: is_causal would be top-left";
  return false;
}

// transformers' repeat_kv: [B, Hkv, L, D] -> [B, Hkv * n_rep, L, D] by expand and reshape.
at::Tensor repeat_kv(const at::Tensor& x, std::int64_t n_rep) {
  const auto s = x.sizes();
  return x.unsqueeze(2).expand({s[0], s[1], n_rep, s[2], s[3]}).reshape({s[0], s[1] * n_rep, s[2], s[3]});
}

}  // namespace

std::string_view to_string(SdpaGqa g) {
  switch (g) {
    case SdpaGqa::kNone: return "none";
    case SdpaGqa::kRepeatKv: return "repeat_kv";
    case SdpaGqa::kEnableGqa: return "enable_gqa";
    case SdpaGqa::kPackQuery: return "pack_gqa";
  }
  return "?";
}

SdpaPlan plan_sdpa_path(Profile p, const ModelCase& m, PathDefect defect) {
  return plan_sdpa_with_switches(p, with_defect(profile_spec(p).switches, defect), m);
}

SdpaPlan plan_sdpa_with_switches(Profile p, const ProfileSwitches& s, const ModelCase& m) {
  SdpaPlan plan;
  plan.profile = p;
  plan.keys = m.kv_len();
  if (s.fastchat_monkey_patch) {
    plan.raises = true;
    plan.error = "FastChat's patch replaces the attention with flash-attn: there is no SDPA path";
    return plan;
  }
  if (m.softcap) {
    if (s.sdpa_softcap_raises) {
      plan.raises = true;
      plan.error = kSoftcapError;
      plan.note = "a softcap raises (v5.21+)";
      return plan;
    }
    plan.softcap_dropped = true;  // swallowed by **kwargs
  }
  const bool segments = eager_mask(m, p).segments;
  plan.mask_skipped = mask_skipped(s, m, segments, plan.note);
  plan.is_causal = m.q_len > 1 && plan.mask_skipped && m.causal;
  if (s.sdpa_static_prefill_skip && plan.is_causal && plan.keys > m.q_len) plan.keys = m.q_len;
  if (m.group() > 1) {
    if (s.sdpa_enable_gqa && plan.mask_skipped) plan.gqa = SdpaGqa::kEnableGqa;
    else if (s.sdpa_pack_gqa_decode && m.q_len == 1) plan.gqa = SdpaGqa::kPackQuery;
    else plan.gqa = SdpaGqa::kRepeatKv;
  }
  return plan;
}

SdpaRun run_sdpa_path(const SdpaPlan& plan, const ModelCase& m, const ModelTensors& t, bool on_device, const HostTensor* dout) {
  SdpaRun run;
  if (plan.raises) {
    run.kind = profile_spec(plan.profile).switches.fastchat_monkey_patch ? VerdictKind::kUnsupported : VerdictKind::kError;
    run.reason = plan.error;
    return run;
  }
  try {
    const std::int64_t B = m.batch, Lq = m.q_len, H = m.heads, Hk = m.kv_heads, D = m.head_dim;
    // The model's query is a transposed view of the projection; keys and values come out of the cache
    // contiguous in [B, Hkv, L, D] (their strides do not change SDPA's result on the CPU).
    const detail::Leaves x = detail::model_leaves(m, t, dout != nullptr);
    at::Tensor q = x.q.transpose(1, 2);
    at::Tensor k = x.k.transpose(1, 2).contiguous();
    at::Tensor v = x.v.transpose(1, 2).contiguous();
    std::optional<at::Tensor> mask;
    if (!plan.mask_skipped) {
      const EagerMask e = eager_mask(m, plan.profile);
      std::vector<float> allowed(e.allowed.begin(), e.allowed.end());
      mask = torch_bridge::from_values(allowed, {B, 1, Lq, m.kv_len()}, DType::kF32).to(at::kBool);
    }
    if (on_device && at::hasCUDA()) {
      q = q.to(at::kCUDA);
      k = k.to(at::kCUDA);
      v = v.to(at::kCUDA);
      if (mask) mask = mask->to(at::kCUDA);
    }
    if (plan.keys < m.kv_len()) {
      k = k.narrow(2, 0, plan.keys);
      v = v.narrow(2, 0, plan.keys);
    }
    if (plan.gqa == SdpaGqa::kRepeatKv) {
      k = repeat_kv(k, m.group());
      v = repeat_kv(v, m.group());
    } else if (plan.gqa == SdpaGqa::kPackQuery) {
      q = q.reshape({B, Hk, m.group(), D});  // one query: the group's heads become its rows
    }
    at::Tensor out = at::scaled_dot_product_attention(q, k, v, mask, 0.0, plan.is_causal, m.softmax_scale(),
                                                      plan.gqa == SdpaGqa::kEnableGqa);
    out = out.reshape({B, H, Lq, D}).transpose(1, 2).contiguous();
    run.out = torch_bridge::to_values(out);
    if (dout) run.grads = detail::model_gradients(m, x, out, *dout);
  } catch (const std::exception& e) {
    run.kind = VerdictKind::kError;
    run.reason = fmt::format("torch's scaled_dot_product_attention raised: {}", e.what());
  }
  return run;
}

}  // namespace flashcheck::hf
