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
  }
  return s;
}

}  // namespace flashcheck::hf
