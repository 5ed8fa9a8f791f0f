#include "oracles/hf_path_defects.h"

namespace flashcheck::hf {

const std::vector<PathDefectInfo>& path_defects() {
  static const std::vector<PathDefectInfo> all{
      {PathDefect::kAnyPositionIds, "mutant-hf-any-position-ids",
       "any position_ids (the model's default arange too) take the varlen path", "transformers v4.54.0-v4.55.0 (F5, #39814)"},
      {PathDefect::kStartAtZero, "mutant-hf-start-at-zero",
       "packed sequences start where position_ids == 0, and 0 is not prepended", "transformers before #47525 (F4, F18)"},
      {PathDefect::kWindowWW, "mutant-hf-window-w-w", "sliding window passed as (W, W): W + 1 keys",
       "transformers <= v4.55 (#39408, F9)"},
      {PathDefect::kCallerQueryLength, "mutant-hf-caller-query-length",
       "a query_length that differs from the key length selects decoding-mode cu_seqlens", "#39843, #40399 (F8)"},
      {PathDefect::kSdpaWindowLost, "mutant-hf-sdpa-window-lost",
       "SDPA: the is_causal shortcut skips the mask although the keys reach the sliding window",
       "transformers v4.36-v4.39 (#28980, fixed by #30127)", HfPath::kSdpa},
      {PathDefect::kSdpaMisaligned, "mutant-hf-sdpa-misaligned-causal",
       "SDPA: the is_causal shortcut (top-left) for several queries over a cache",
       "transformers v4.40 speculative decoding (fixed by #30311)", HfPath::kSdpa},
      {PathDefect::kSdpaIgnoresPadding, "mutant-hf-sdpa-shortcut-ignores-padding",
       "SDPA: the is_causal shortcut skips the mask although the 2D mask has padding",
       "the causal-shortcut class of #30127 and #30311, on padding", HfPath::kSdpa},
  };
  return all;
}

ProfileSwitches with_defect(ProfileSwitches s, PathDefect defect) {
  switch (defect) {
    case PathDefect::kNone: break;
    case PathDefect::kAnyPositionIds: s.packed_trigger = PackedTrigger::kAnyPositionIds; break;
    case PathDefect::kStartAtZero: s.sequences_start_at_min = false; break;
    case PathDefect::kWindowWW: s.window_size_w_w = true; break;
    case PathDefect::kCallerQueryLength: s.query_length_selects_decoding = true; break;
    case PathDefect::kSdpaWindowLost: s.sdpa_skip_checks_window = false; break;
    case PathDefect::kSdpaMisaligned: s.sdpa_skip_checks_alignment = false; break;
    case PathDefect::kSdpaIgnoresPadding: s.sdpa_skip_checks_padding = false; break;
  }
  return s;
}

std::string_view to_string(HfPath p) { return p == HfPath::kSdpa ? "sdpa" : "flash"; }

}  // namespace flashcheck::hf
