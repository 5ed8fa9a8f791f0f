// Each switch of a profile row (core/hf_profiles.h) is live: flipping it alone changes the plan of a case
// built to reach it. A switch no case can tell apart would be dead data in the table.
#include <gtest/gtest.h>

#include "oracles/hf_flash_path.h"
#include "oracles/model_case_for_tests.h"

namespace flashcheck::hf {
namespace {

using V = std::vector<std::int64_t>;
using W = std::optional<std::pair<std::int64_t, std::int64_t>>;

ModelCase base(std::int64_t batch, std::int64_t q_len, std::int64_t past = 0) {
  const ModelCase defaults;
  return testing::small_model_case(defaults.dtype, defaults.data.seed, batch, q_len, past);
}

const ProfileSwitches kMain = profile_spec(Profile::kHfMain).switches;

FlashPlan plan(const ProfileSwitches& s, const ModelCase& m) { return plan_with_switches(Profile::kHfMain, s, m); }

TEST(ProfileSwitch, FastchatMonkeyPatchAssumesCachedColumnsValid) {
  ModelCase m = base(2, 2, 2);
  m.attention_mask = {{0, 1, 1, 1}, {1, 1, 1, 0}};
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).call.cu_k, (V{0, 3, 6}));
  s.fastchat_monkey_patch = true;
  EXPECT_EQ(plan(s, m).call.cu_k, (V{0, 4, 7}));
}

TEST(ProfileSwitch, KeepShortAllTrueMaskTrimsAStaticCache) {
  ModelCase m = base(1, 2, 2);
  m.use_cache = true;
  m.static_cache_len = 8;
  m.attention_mask = {{1, 1, 1, 1}};
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kMask);
  s.keep_short_all_true_mask = false;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kDense);
}

TEST(ProfileSwitch, WindowSizeWW) {
  ModelCase m = base(1, 6);
  m.sliding_window = 4;
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).call.window, (W{{3, 3}}));
  s.window_size_w_w = true;
  EXPECT_EQ(plan(s, m).call.window, (W{{4, 4}}));
}

TEST(ProfileSwitch, GeneratePassesVarlenKwargs) {
  ModelCase m = base(2, 3);
  m.via_generate = true;
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kDense);
  s.generate_kwargs = GenerateKwargs::kShortByOne;
  const FlashPlan p = plan(s, m);
  EXPECT_EQ(p.branch, FlashBranch::kVarlenKwargs);
  EXPECT_EQ(p.call.cu_k, (V{0, 3, 5}));
}

TEST(ProfileSwitch, PackedTriggerAnyPositionIdsTakesABatchsDefaultArange) {
  const ModelCase m = base(2, 3);
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kDense);
  s.packed_trigger = PackedTrigger::kAnyPositionIds;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kPacked);
}

TEST(ProfileSwitch, PackedTriggerBatch1DecreasingIgnoresIncreasingGaps) {
  ModelCase m = base(1, 3);
  m.position_ids = {{5, 7, 9}};
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kPacked);
  s.packed_trigger = PackedTrigger::kBatch1Decreasing;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kDense);
}

TEST(ProfileSwitch, PackedTriggerBatch1DecreasingDropsCallerKwargsOfABatch) {
  ModelCase m = base(2, 2);
  m.varlen_kwargs = VarlenKwargs{{0, 2, 4}, {0, 2, 4}, 2, 2};
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kVarlenKwargs);
  s.packed_trigger = PackedTrigger::kBatch1Decreasing;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kDense);
}

TEST(ProfileSwitch, PackedTriggerNever) {
  ModelCase m = base(1, 4);
  m.position_ids = {{0, 1, 0, 1}};
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kPacked);
  s.packed_trigger = PackedTrigger::kNever;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kDense);
}

TEST(ProfileSwitch, QueryLengthSelectsDecoding) {
  ModelCase m = base(1, 6);
  m.position_ids = {{0, 1, 2, 0, 1, 2}};
  m.query_length = 3;
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).call.cu_q, (V{0, 3, 6}));
  s.query_length_selects_decoding = true;
  EXPECT_EQ(plan(s, m).call.cu_q, (V{0, 3}));
}

TEST(ProfileSwitch, SequencesStartAtMin) {
  ModelCase m = base(1, 3);
  m.position_ids = {{10, 12, 14}};
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).call.cu_q, (V{0, 3}));
  s.sequences_start_at_min = false;
  EXPECT_EQ(plan(s, m).branch, FlashBranch::kError);
}

TEST(ProfileSwitch, MaxSeqlenFromMaxPosition) {
  ModelCase m = base(1, 4);
  m.position_ids = {{0, 2, 4, 0}};
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).call.max_q, 3);
  s.max_seqlen_from_max_position = true;
  EXPECT_EQ(plan(s, m).call.max_q, 5);
}

TEST(ProfileSwitch, MaxSeqlenFromMaxPositionMovesTheErrorToFlashAttention) {
  ModelCase m = base(1, 3);
  m.position_ids = {{10, 12, 14}};
  ProfileSwitches s = kMain;
  s.sequences_start_at_min = false;
  EXPECT_NE(plan(s, m).error.find("max(): Expected reduction dim"), std::string::npos) << plan(s, m).error;
  s.max_seqlen_from_max_position = true;
  EXPECT_EQ(plan(s, m).error, "batch size must be postive");
}

TEST(PathDefectSwitches, EachDefectChangesHfMainsRow) {
  EXPECT_EQ(with_defect(kMain, PathDefect::kNone), kMain);
  for (const PathDefectInfo& d : path_defects()) EXPECT_NE(with_defect(kMain, d.defect), kMain) << d.name;
}

TEST(PathDefectSwitches, ADefectPlansAsItsSwitchedRow) {
  ModelCase m = base(1, 6);
  m.sliding_window = 4;
  EXPECT_EQ(plan_flash_path(Profile::kHfMain, m, PathDefect::kWindowWW).call.window, (W{{4, 4}}));
  EXPECT_EQ(plan_flash_path(Profile::kHfMain, m).call.window, (W{{3, 3}}));
}

}  // namespace
}  // namespace flashcheck::hf
