#include "core/hf_profiles.h"

#include <fmt/format.h>

#include <array>
#include <string>

namespace flashcheck::hf {
namespace {

using enum PackedTrigger;

// Upstream numbers are huggingface/transformers PRs and issues unless marked FastChat (lm-sys/FastChat).
constexpr std::array<ProfileSpec, 10> kProfiles{{
    {.profile = Profile::kHfMain,
     .name = "hf-main",
     .releases = "transformers v5.15.0 - v5.24.0: v4.56.0's dispatch plus #46914 and the min() start rule of #47525; "
                 "SDPA as v5.15.0 - v5.20.x (v5.21.0 raises on a softcap, v5.23.0 packs GQA decoding queries)",
     .first_release = "5.15.0",
     .last_release = "5.24.0",
     .sdpa_first_release = "5.15.0",
     .sdpa_last_release = "5.20.2",
     .sources = "#40002 (_is_packed_sequence), #40163 (window (W - 1, W - 1)), #40424 (query_length no longer "
                "decides), #46914 (a static cache keeps its all-true mask), #47525 (sequences start at the minimum)",
     .description = "current dispatch: varlen from position_ids only for a packed batch-1 row, sequences starting "
                    "at min(position_ids)",
     .switches = {.keep_short_all_true_mask = true,
                  .packed_trigger = kPackedSequence,
                  .sequences_start_at_min = true,
                  .sdpa_static_prefill_skip = true},
     .documented_divergences = true,
     .model_coverage_required = true},
    {.profile = Profile::kHf455,
     .name = "hf-4.55",
     .releases = "transformers v4.54.0 - v4.55.0",
     .first_release = "4.54.0",
     .last_release = "4.55.0",
     .sources = "#39474 (any position_ids take varlen; generate passes cu_seqlens), #39341 (max_seqlen from the "
                "cu_seqlens steps), #39814 (no 0 in position_ids raises), #39408 (window (W, W))",
     .description = "any position_ids take the varlen path (batch rows past the first go unwritten); generate's own "
                    "cu_seqlens are short one key per earlier row; window (W, W)",
     .switches = {.window_size_w_w = true,
                  .generate_kwargs = GenerateKwargs::kShortByOne,
                  .packed_trigger = kAnyPositionIds,
                  .sdpa_mask_for_one_sequence = true}},
    {.profile = Profile::kHf453,
     .name = "hf-4.53",
     .releases = "transformers v4.53.0 (eager without packed-sequence masks)",
     .first_release = "4.53.0",
     .last_release = "4.53.0",
     .sources = "#32487 (varlen only for decreasing position_ids), #33932 (or caller max_length_q), #37332 (batch 1 "
                "only), #31629 (max_seqlen = max(position_ids) + 1), #39408 (window (W, W))",
     .description = "varlen only for batch 1 with decreasing position_ids or caller kwargs; max_seqlen from the "
                    "largest position; window (W, W)",
     .switches = {.window_size_w_w = true,
                  .packed_trigger = kBatch1Decreasing,
                  .max_seqlen_from_max_position = true,
                  .eager_packed_segments = false,
                  .sdpa_enable_gqa = false}},
    {.profile = Profile::kHf202508,
     .name = "hf-2025-08",
     .releases = "transformers main between #40002/#40163 and #40424 (August 2025)",
     .sources = "#39843 and #40002 (query_length picks decoding-mode cu_seqlens), #40399 (Ulysses sequence "
                "parallelism broken by it), #40424 (reverted)",
     .description = "a caller's query_length unequal to the key length turns packed cu_seqlens into decoding-mode "
                    "ones from the last positions",
     .switches = {.packed_trigger = kPackedSequence, .query_length_selects_decoding = true, .sdpa_mask_for_one_sequence = true}},
    {.profile = Profile::kFastchat2023,
     .name = "fastchat-2023",
     .releases = "FastChat fastchat/train/llama2_flash_attn_monkey_patch.py after FastChat #2263 and #2503 "
                 "(transformers 4.31 - 4.33)",
     .sources = "FastChat #2263 (GQA, past kv from the cache), #2503 (bottom-right causal, HF cache layout), "
                "FastChat #2229 and #2316 (the GQA crash it fixed)",
     .description = "FastChat's Llama-2 monkey patch: cached columns assumed valid, dense when the new chunk has no "
                    "padding, no window or softcap",
     .switches = {.fastchat_monkey_patch = true, .packed_trigger = kNever}},
    {.profile = Profile::kHf513,
     .name = "hf-5.13",
     .releases = "transformers v5.13.0 - v5.14.1: #46914 without #47525; SDPA as v5.14.x (#47094; v5.13.x builds "
                 "the mask a static-cache prefill skips, same attention)",
     .first_release = "5.13.0",
     .last_release = "5.14.1",
     .sdpa_first_release = "5.14.0",
     .sdpa_last_release = "5.14.1",
     .sources = "#46914 (a static cache keeps its all-true mask), #40002 (_is_packed_sequence); #47525 (start at the "
                "minimum) came in v5.15.0",
     .description = "hf-main but packed sequences start only where position_ids are 0: a packing that restarts at 2 "
                    "raises (#39814's symptom)",
     .switches = {.keep_short_all_true_mask = true, .packed_trigger = kPackedSequence, .sdpa_static_prefill_skip = true}},
    {.profile = Profile::kHf456,
     .name = "hf-4.56",
     .releases = "transformers v4.56.0 - v5.12.1; SDPA as v4.56 - v4.57 (v5.0.0 skips the mask for one sequence "
                 "without a 2D mask or cache, same attention)",
     .first_release = "4.56.0",
     .last_release = "5.12.1",
     .sdpa_first_release = "4.56.0",
     .sdpa_last_release = "4.57.6",
     .sources = "#40002 (_is_packed_sequence), #40163 (window (W - 1, W - 1)), #40424 (query_length no longer decides); "
                "#46914 came in v5.13.0",
     .description = "hf-5.13 but an all-true mask is dropped even for a static cache: the dense kernel attends its "
                    "unfilled slots (F13)",
     .switches = {.packed_trigger = kPackedSequence, .sdpa_mask_for_one_sequence = true}},
    {.profile = Profile::kHf4554,
     .name = "hf-4.55.4",
     .releases = "transformers v4.55.3 - v4.55.4 (the v4.55 patch branch after #40161)",
     .first_release = "4.55.3",
     .last_release = "4.55.4",
     .sources = "#40002 (_is_packed_sequence), #39843 (query_length picks decoding-mode cu_seqlens), #40161 (generate "
                "no longer passes kwargs), #39408 (window (W, W); #40163 is v4.56)",
     .description = "hf-2025-08 with the window passed as (W, W)",
     .switches = {.window_size_w_w = true,
                  .packed_trigger = kPackedSequence,
                  .query_length_selects_decoding = true,
                  .sdpa_mask_for_one_sequence = true}},
    {.profile = Profile::kHf4552,
     .name = "hf-4.55.2",
     // 4.55.1 is left out: its generate() with flash attention raises NameError (prepare_fa_kwargs_from_position_ids
     // used without its import), which no profile models (tools/hf_crosscheck under 4.55.1: 21 of 182 differ).
     .releases = "transformers v4.55.2",
     .first_release = "4.55.2",
     .last_release = "4.55.2",
     .sources = "#40002, #40029 (generate computes decoding-mode cu_seqlens kwargs), #39843, #39408",
     .description = "hf-4.55.4 plus generate()'s own cu_seqlens kwargs (decoding mode, cumsum(last + 1))",
     .switches = {.window_size_w_w = true,
                  .generate_kwargs = GenerateKwargs::kDecodingMode,
                  .packed_trigger = kPackedSequence,
                  .query_length_selects_decoding = true,
                  .sdpa_mask_for_one_sequence = true}},
    {.profile = Profile::kHf4533,
     .name = "hf-4.53.3",
     // Named for the release it was first written against; 4.53.1 and 4.53.2 already behave so (tools/hf_crosscheck
     // under each: 182 of 182 agree with this profile, 144 of 182 with hf-4.53).
     .releases = "transformers v4.53.1 - v4.53.3",
     .first_release = "4.53.1",
     .last_release = "4.53.3",
     .sources = "#39121 (the four varlen kwargs suffice at any batch), #39194 (eager masks separate packed sequences), "
                "#32487, #37332, #31629",
     .description = "hf-4.53 with eager's packed-sequence masks and caller kwargs honoured at any batch size",
     .switches = {.window_size_w_w = true,
                  .caller_kwargs_any_batch = true,
                  .packed_trigger = kBatch1Decreasing,
                  .max_seqlen_from_max_position = true,
                  .sdpa_enable_gqa = false,
                  .sdpa_mask_for_one_sequence = true}},
}};

constexpr bool rows_in_profile_order() {
  for (std::size_t i = 0; i < kProfiles.size(); ++i)
    if (static_cast<std::size_t>(kProfiles[i].profile) != i) return false;
  return true;
}
static_assert(rows_in_profile_order(), "profile_spec indexes the table by Profile");
static_assert(kProfiles.size() == static_cast<std::size_t>(Profile::kHf4533) + 1, "a row per Profile");

}  // namespace

std::span<const ProfileSpec> profile_table() { return kProfiles; }

const ProfileSpec& profile_spec(Profile p) { return kProfiles[static_cast<std::size_t>(p)]; }

std::string_view to_string(Profile p) { return profile_spec(p).name; }

std::optional<Profile> parse_profile(std::string_view name) {
  for (const ProfileSpec& row : kProfiles)
    if (row.name == name) return row.profile;
  return std::nullopt;
}

const std::vector<Profile>& all_profiles() {
  static const std::vector<Profile> all = [] {
    std::vector<Profile> v;
    for (const ProfileSpec& row : kProfiles) v.push_back(row.profile);
    return v;
  }();
  return all;
}

namespace {

// "4.55.0" -> {4, 55, 0}; anything unparsable compares as empty.
std::vector<int> version_parts(std::string_view v) {
  std::vector<int> parts;
  int x = 0;
  bool digit = false;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      x = x * 10 + (c - '0');
      digit = true;
    } else if (c == '.' && digit) {
      parts.push_back(x);
      x = 0;
      digit = false;
    } else {
      break;  // a suffix such as ".dev0" or "rc1" ends the numeric part
    }
  }
  if (digit) parts.push_back(x);
  return parts;
}

}  // namespace

std::optional<Profile> profile_for_release(std::string_view version) {
  const std::vector<int> v = version_parts(version);
  if (v.empty()) return std::nullopt;
  for (const ProfileSpec& row : kProfiles)
    if (!row.first_release.empty() && version_parts(row.first_release) <= v && v <= version_parts(row.last_release))
      return row.profile;
  return std::nullopt;
}

ProfileChoice profile_choice_for_release(std::string_view version) {
  if (const std::optional<Profile> p = profile_for_release(version))
    return {p, false,
            fmt::format("{} claims {} - {}", profile_spec(*p).name, profile_spec(*p).first_release,
                        profile_spec(*p).last_release)};
  const std::vector<int> v = version_parts(version);
  const ProfileSpec* newest = nullptr;
  for (const ProfileSpec& row : kProfiles)
    if (!row.last_release.empty() && (!newest || version_parts(newest->last_release) < version_parts(row.last_release)))
      newest = &row;
  if (!v.empty() && newest && version_parts(newest->last_release) < v)
    return {newest->profile, true,
            fmt::format("assumed: {} is newer than every profile's range; {} has the newest ({} - {})", version,
                        newest->name, newest->first_release, newest->last_release)};
  return {std::nullopt, false, fmt::format("none: no profile's release range holds {}", version)};
}

std::pair<std::string_view, std::string_view> sdpa_release_range(const ProfileSpec& p) {
  if (p.sdpa_first_release.empty()) return {p.first_release, p.last_release};
  return {p.sdpa_first_release, p.sdpa_last_release};
}

std::string_view profile_name_list() {
  static const std::string list = [] {
    std::string s;
    for (std::size_t i = 0; i < kProfiles.size(); ++i) {
      if (i > 0) s += i + 1 == kProfiles.size() ? " or " : ", ";
      s += kProfiles[i].name;
    }
    return s;
  }();
  return list;
}

}  // namespace flashcheck::hf
