// The HF flash-path profiles as data: one row per transformers release range (or downstream patch) whose
// flash-attention dispatch the harness replays. The row names the profile, says what it models and why
// (the upstream PRs and issues that define it), and lists the behavioural switches that
// oracles/hf_flash_path.cc reads. Core owns the table so that fixtures can validate profile names without
// depending on the oracles; the oracles own what the switches mean.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashcheck::hf {

// Also the index of the profile's row in profile_table().
enum class Profile : std::uint8_t {
  kHfMain, kHf455, kHf453, kHf202508, kFastchat2023, kHf513, kHf456, kHf4554, kHf4552, kHf4533
};

// What generate() adds to the flash kwargs itself (GenerationMixin.prepare_inputs_for_generation).
enum class GenerateKwargs : std::uint8_t {
  kNone,         // nothing (before #39474, and since #40161)
  kShortByOne,   // #39474: cu_k = cumsum(last) + 1, short by one key per earlier row
  kDecodingMode, // #40029 after #40002: prepare_fa_kwargs_from_position_ids(is_packed_sequence=False), cumsum(last + 1)
};

// What sends a call without a 2D mask into the padding-free varlen branch on the strength of its
// position_ids (caller-provided cu_seqlens kwargs take that branch regardless, except under kBatch1Decreasing).
enum class PackedTrigger : std::uint8_t {
  kPackedSequence,    // _is_packed_sequence (#40002): batch 1 and position_ids not one arange from their minimum
  kAnyPositionIds,    // #39474: any position_ids, and the model always passes its default arange
  kBatch1Decreasing,  // #32487 + #37332: batch 1, more than one query, position_ids decrease somewhere; caller
                      // kwargs count only with batch 1 and are dropped otherwise
  kNever,             // position_ids never select it
};

// How one profile's flash path behaves. Every field changes some plan (oracles/hf_path_switches_test.cc).
struct ProfileSwitches {
  // The whole call is FastChat's Llama-2 monkey patch instead of transformers' dispatch; the other switches
  // then do not apply.
  bool fastchat_monkey_patch = false;
  // An all-true 2D mask shorter than the cache's kv_length still reaches the path, so K/V are trimmed to it
  // (#46914); without the switch every all-true mask is dropped and a static cache's unfilled slots are
  // attended (F13).
  bool keep_short_all_true_mask = false;
  // The sliding window is passed as (W, W), admitting W + 1 keys, instead of (W - 1, W - 1) (#39408, fixed
  // by #40163).
  bool window_size_w_w = false;
  // generate() computes cu_seqlens kwargs itself (#39474 with cu_k = cumsum(last) + 1, short by one key per
  // earlier row; #40029 with the decoding-mode formula), until #40161 removed it.
  GenerateKwargs generate_kwargs = GenerateKwargs::kNone;
  // The caller's four varlen kwargs take the varlen branch at any batch size (#39121), also under kBatch1Decreasing.
  bool caller_kwargs_any_batch = false;
  PackedTrigger packed_trigger = PackedTrigger::kPackedSequence;
  // In the packed branch, a caller's query_length unequal to the key length selects "decoding mode"
  // cu_seqlens from each row's last position (#39843, #40002; removed by #40424; broke Ulysses SP, #40399).
  bool query_length_selects_decoding = false;
  // Packed sequences start where position_ids equal their minimum (#47525) rather than where they are 0.
  bool sequences_start_at_min = false;
  // The packed branch's max_seqlen is max(position_ids) + 1 (#31629, until #39341) rather than the longest
  // cu_seqlens step; with no sequence start FlashAttention then rejects the empty batch itself instead of
  // torch's .max() raising on the empty diff (#39814).
  bool max_seqlen_from_max_position = false;
  // Eager's masks separate packed sequences (masking_utils.find_packed_sequence_indices, #39194, v4.53.3 and
  // v4.54+); before that eager attends across them, so the eager oracle (oracles/hf_masks) follows this switch.
  bool eager_packed_segments = true;

  // The SDPA path (integrations/sdpa_attention.py, with masking_utils.sdpa_mask's "skip": no mask, SDPA's
  // is_causal instead; oracles/hf_sdpa_path.h). The shortcut's conditions on the window and the padding are
  // switches too, so that the mutation self-test can lose them as older releases did.
  // A StaticCache may take the shortcut except when decoding (#47094, v5.14.0): an empty cache skips the mask
  // when padding only follows the query, and SDPA then slices K/V to the query length. Before, a static cache
  // never skipped.
  bool sdpa_static_prefill_skip = false;
  // Without a mask, grouped K/V go to SDPA with enable_gqa=True (v4.54+) instead of through repeat_kv.
  bool sdpa_enable_gqa = true;
  // A window that the key length reaches forbids the shortcut (its loss, #28980, was fixed by #30127).
  bool sdpa_skip_checks_window = true;
  // Several queries over a cache forbid the shortcut: SDPA's is_causal is top-left aligned (its loss broke
  // speculative decoding; fixed by #30311).
  bool sdpa_skip_checks_alignment = true;
  // Padding in the 2D mask forbids the shortcut (fast_all(padding_mask)).
  bool sdpa_skip_checks_padding = true;
  // Without a 2D mask and a cache, the position_ids every model passes make find_packed_sequence_indices return a
  // tensor even for one sequence (v4.53.3 - v4.57; v5.0.0 returns None then), which forbids the shortcut: a full
  // causal mask is built instead of is_causal (the same attention).
  bool sdpa_mask_for_one_sequence = false;
  // A softcap makes sdpa_attention_forward raise ValueError (v5.21.0, with Gemma2's _supports_sdpa = False);
  // before, the softcap kwarg was swallowed by **kwargs and the logits went uncapped.
  bool sdpa_softcap_raises = false;
  // A single decoding query with a mask runs on the K/V heads with the group as query rows (pack_gqa, v5.23.0)
  // instead of repeat_kv.
  bool sdpa_pack_gqa_decode = false;

  bool operator==(const ProfileSwitches&) const = default;
};

struct ProfileSpec {
  Profile profile;
  std::string_view name;         // the key fixtures and the CLI use: "hf-main"
  std::string_view releases;     // which code it replays
  // The PyPI releases it models exactly, inclusive ("" for both: no release, e.g. a main-branch state).
  // tools/hf_crosscheck/matrix.sh checks every profile against a release of its range.
  std::string_view first_release, last_release;
  // The releases whose SDPA path it models exactly, where SDPA changed inside the range ("" for both: the whole range).
  // The cross-check compares SDPA only there; the flash path and eager hold on the whole range.
  std::string_view sdpa_first_release, sdpa_last_release;
  std::string_view sources;      // the upstream PRs and issues that define its behaviour
  std::string_view description;  // one line: how it differs
  ProfileSwitches switches;
  // The integration property recognizes oracles/hf_divergences.h's documented divergences on this profile
  // (they are written against it) and reports a case matching one as known, not as a finding.
  bool documented_divergences = false;
  // A long model fuzz run on this profile must reach every model-case feature (a coverage gap is a failure).
  bool model_coverage_required = false;
};

// Rows in Profile order.
std::span<const ProfileSpec> profile_table();
const ProfileSpec& profile_spec(Profile p);

std::string_view to_string(Profile p);
std::optional<Profile> parse_profile(std::string_view name);
const std::vector<Profile>& all_profiles();
// "hf-main, hf-4.55, ... or fastchat-2023", for messages about an unknown name.
std::string_view profile_name_list();

// The profile whose release range holds `version` ("4.55.0"), or nullopt.
std::optional<Profile> profile_for_release(std::string_view version);

// The profile to judge an installed release by, and why. The one whose range holds it (claimed); for a release newer
// than every range, the profile of the newest range (assumed: hf-live then checks the assumption against the
// release); none for a release older than every range or between two.
struct ProfileChoice {
  std::optional<Profile> profile;
  bool assumed = false;
  std::string why;
};
ProfileChoice profile_choice_for_release(std::string_view version);

// The releases whose SDPA path `p` models, first and last: its SDPA range, else its whole range.
std::pair<std::string_view, std::string_view> sdpa_release_range(const ProfileSpec& p);

}  // namespace flashcheck::hf
