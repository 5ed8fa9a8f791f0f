// The SDPA path: which calls the releases make (read off integrations/sdpa_attention.py and
// masking_utils.sdpa_mask of each release; tools/hf_crosscheck checks them against the releases themselves),
// and that the call computes the masked attention: outputs against the fp64 exact attention under eager's mask
// (oracles/hf_eager.h exact_attention), never against the code under test.
#include "oracles/hf_sdpa_path.h"

#include <cmath>
#include <gtest/gtest.h>

#include "oracles/hf_eager.h"
#include "oracles/model_case_for_tests.h"

namespace flashcheck::hf {
namespace {

ModelCase base(std::int64_t batch, std::int64_t q_len, std::int64_t past = 0) {
  return testing::small_model_case(DType::kF32, 5, batch, q_len, past);
}

const ProfileSwitches kMain = profile_spec(Profile::kHfMain).switches;

SdpaPlan plan(const ProfileSwitches& s, const ModelCase& m) { return plan_sdpa_with_switches(Profile::kHfMain, s, m); }

// max |sdpa - exact| over rows that see a key, with the fp64 attention under eager's own mask as the truth.
double error_against_exact(const ModelCase& m, const SdpaPlan& p) {
  const ModelTensors t = materialize(m);
  const SdpaRun run = run_sdpa_path(p, m, t);
  EXPECT_EQ(run.kind, VerdictKind::kPass) << run.reason;
  const EagerMask mask = eager_mask(m, p.profile);
  const ExactAttention exact = exact_attention(m, t, mask);
  EXPECT_EQ(run.out.size(), exact.out.size());
  double mx = 0;
  const std::size_t row = static_cast<std::size_t>(m.heads * m.head_dim);
  for (std::size_t x = 0; x < std::min(run.out.size(), exact.out.size()); ++x) {
    if (mask.rows[x / row] != RowFlag::kComparable) continue;
    const double d = std::fabs(run.out[x] - exact.out[x]);
    mx = std::isnan(d) ? INFINITY : std::max(mx, d);
  }
  return mx;
}

TEST(SdpaPlan, PrefillWithoutPaddingTakesTheCausalShortcutWithEnableGqa) {
  const SdpaPlan p = plan(kMain, base(2, 6));
  EXPECT_TRUE(p.mask_skipped);
  EXPECT_TRUE(p.is_causal);
  EXPECT_EQ(p.keys, 6);
  EXPECT_EQ(p.gqa, SdpaGqa::kEnableGqa);
}

TEST(SdpaPlan, LeftPaddingKeepsTheMaskAndRepeatsKv) {
  ModelCase m = base(2, 4);
  m.attention_mask = {{0, 1, 1, 1}, {1, 1, 1, 1}};
  const SdpaPlan p = plan(kMain, m);
  EXPECT_FALSE(p.mask_skipped);
  EXPECT_FALSE(p.is_causal);
  EXPECT_EQ(p.gqa, SdpaGqa::kRepeatKv);  // use_gqa_in_sdpa wants no mask
}

TEST(SdpaPlan, DecodingSkipsTheMaskWithoutIsCausal) {
  ModelCase m = base(1, 1, 7);
  m.attention_mask = {{1, 1, 1, 1, 1, 1, 1, 1}};  // all true: the same as none
  const SdpaPlan p = plan(kMain, m);
  EXPECT_TRUE(p.mask_skipped);
  EXPECT_FALSE(p.is_causal);  // one query sees every key
}

TEST(SdpaPlan, SeveralQueriesOverACacheKeepTheMask) {
  const SdpaPlan p = plan(kMain, base(1, 3, 4));  // is_causal would be top-left: wrong by 4 columns
  EXPECT_FALSE(p.mask_skipped);
  EXPECT_FALSE(p.is_causal);
}

TEST(SdpaPlan, AWindowTheKeysReachKeepsTheMask) {
  ModelCase m = base(1, 6);
  m.sliding_window = 6;  // kv_length >= W: the mask must carry the window
  EXPECT_FALSE(plan(kMain, m).mask_skipped);
  m.sliding_window = 7;
  EXPECT_TRUE(plan(kMain, m).mask_skipped);
}

TEST(SdpaPlan, PackedSequencesKeepTheMaskWhereMasksKnowThem) {
  ModelCase m = base(1, 5);
  m.position_ids = {{0, 1, 0, 1, 2}};
  EXPECT_FALSE(plan_sdpa_path(Profile::kHfMain, m).mask_skipped);
  EXPECT_TRUE(plan_sdpa_path(Profile::kHf453, m).mask_skipped);  // v4.53.0 masks ignore position_ids (#39194 is in v4.53.1)
}

TEST(SdpaPlan, StaticCachePrefillSkipsAndSlicesSinceV514) {
  ModelCase m = base(1, 3);
  m.use_cache = true;
  m.static_cache_len = 8;
  m.attention_mask = {{1, 1, 1}};  // padded with False to the 8 slots: padding only after the query
  const SdpaPlan main = plan_sdpa_path(Profile::kHfMain, m);
  EXPECT_TRUE(main.mask_skipped);
  EXPECT_TRUE(main.is_causal);
  EXPECT_EQ(main.keys, 3);
  const SdpaPlan old = plan_sdpa_path(Profile::kHf456, m);  // a static cache never skipped before #47094
  EXPECT_FALSE(old.mask_skipped);
  EXPECT_EQ(old.keys, 8);
  m.past = 2;
  m.q_len = 1;
  m.attention_mask = {{1, 1, 1}};
  EXPECT_FALSE(plan_sdpa_path(Profile::kHfMain, m).mask_skipped);  // decoding over a static cache never skips
}

TEST(SdpaPlan, BidirectionalSkipsWithoutPaddingAndNeverIsCausal) {
  ModelCase m = base(1, 5);
  m.causal = false;
  const SdpaPlan p = plan(kMain, m);
  EXPECT_TRUE(p.mask_skipped);
  EXPECT_FALSE(p.is_causal);
}

TEST(SdpaPlan, SoftcapIsDroppedUntilV521ThenRaises) {
  ModelCase m = base(1, 4);
  m.softcap = 2.0;
  EXPECT_TRUE(plan(kMain, m).softcap_dropped);
  ProfileSwitches s = kMain;
  s.sdpa_softcap_raises = true;
  const SdpaPlan p = plan(s, m);
  EXPECT_TRUE(p.raises);
  EXPECT_NE(p.error.find("does not support `softcap`"), std::string::npos);
}

TEST(SdpaPlan, FastchatHasNoSdpaPath) {
  const ModelCase m = base(1, 4);
  EXPECT_TRUE(plan_sdpa_path(Profile::kFastchat2023, m).raises);
  EXPECT_EQ(run_sdpa_path(plan_sdpa_path(Profile::kFastchat2023, m), m, materialize(m)).kind, VerdictKind::kUnsupported);
}

// Each SDPA switch of a profile row changes the plan of a case built to reach it.
TEST(SdpaSwitch, EachSwitchIsLive) {
  ModelCase m = base(2, 5);
  ProfileSwitches s = kMain;
  EXPECT_EQ(plan(s, m).gqa, SdpaGqa::kEnableGqa);
  s.sdpa_enable_gqa = false;
  EXPECT_EQ(plan(s, m).gqa, SdpaGqa::kRepeatKv);

  ModelCase decode = base(2, 1, 4);
  decode.attention_mask = {{0, 1, 1, 1, 1}, {1, 1, 1, 1, 1}};
  s = kMain;
  EXPECT_EQ(plan(s, decode).gqa, SdpaGqa::kRepeatKv);
  s.sdpa_pack_gqa_decode = true;
  EXPECT_EQ(plan(s, decode).gqa, SdpaGqa::kPackQuery);

  ModelCase window = base(1, 6);
  window.sliding_window = 3;
  s = kMain;
  s.sdpa_skip_checks_window = false;
  EXPECT_TRUE(plan(s, window).mask_skipped);

  s = kMain;
  s.sdpa_skip_checks_alignment = false;
  EXPECT_TRUE(plan(s, base(1, 3, 4)).mask_skipped);

  ModelCase padded = base(2, 4);
  padded.attention_mask = {{0, 1, 1, 1}, {1, 1, 1, 1}};
  s = kMain;
  s.sdpa_skip_checks_padding = false;
  EXPECT_TRUE(plan(s, padded).mask_skipped);

  ModelCase stat = base(1, 3);
  stat.use_cache = true;
  stat.static_cache_len = 6;
  s = kMain;
  EXPECT_TRUE(plan(s, stat).mask_skipped);
  s.sdpa_static_prefill_skip = false;
  EXPECT_FALSE(plan(s, stat).mask_skipped);

  s = kMain;
  EXPECT_TRUE(plan(s, base(1, 4)).mask_skipped);
  s.sdpa_mask_for_one_sequence = true;
  EXPECT_FALSE(plan(s, base(1, 4)).mask_skipped);
  EXPECT_TRUE(plan(s, base(1, 1, 3)).mask_skipped);  // a cache object: no packed-sequence test at all
}

// The calls compute the masked attention: fp32 to 1e-5 of the exact value, for every way of calling SDPA.
TEST(SdpaRun, EveryCallShapeComputesTheMaskedAttention) {
  std::vector<std::pair<std::string, ModelCase>> cases;
  cases.emplace_back("is_causal prefill, enable_gqa", base(2, 6));
  ModelCase padded = base(2, 4, 2);
  padded.attention_mask = {{0, 0, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}};
  cases.emplace_back("mask, repeat_kv", padded);
  ModelCase decode = base(2, 1, 5);
  cases.emplace_back("decode without mask", decode);
  ModelCase stat = base(1, 3);
  stat.use_cache = true;
  stat.static_cache_len = 8;
  cases.emplace_back("static prefill, keys sliced", stat);
  ModelCase window = base(1, 7, 3);
  window.sliding_window = 4;
  cases.emplace_back("window mask over a cache", window);
  ModelCase bidir = base(1, 5);
  bidir.causal = false;
  cases.emplace_back("bidirectional", bidir);
  for (const auto& [what, m] : cases) EXPECT_LT(error_against_exact(m, plan(kMain, m)), 1e-5) << what;

  ModelCase masked_decode = base(2, 1, 4);
  masked_decode.attention_mask = {{0, 1, 1, 1, 1}, {1, 1, 1, 1, 1}};
  ProfileSwitches s = kMain;
  s.sdpa_pack_gqa_decode = true;
  const SdpaPlan packed = plan(s, masked_decode);
  ASSERT_EQ(packed.gqa, SdpaGqa::kPackQuery);
  EXPECT_LT(error_against_exact(masked_decode, packed), 1e-5) << "pack_gqa";
}

// The planted SDPA defects change the output of the cases they reach, far beyond fp32 rounding.
TEST(SdpaRun, PlantedDefectsAttendTheWrongKeys) {
  ModelCase window = base(1, 8);
  window.sliding_window = 3;
  EXPECT_LT(error_against_exact(window, plan_sdpa_path(Profile::kHfMain, window)), 1e-5);
  EXPECT_GT(error_against_exact(window, plan_sdpa_path(Profile::kHfMain, window, PathDefect::kSdpaWindowLost)), 1e-2);

  const ModelCase cached = base(1, 3, 4);
  EXPECT_GT(error_against_exact(cached, plan_sdpa_path(Profile::kHfMain, cached, PathDefect::kSdpaMisaligned)), 1e-2);

  ModelCase padded = base(1, 5);
  padded.attention_mask = {{0, 0, 1, 1, 1}};
  EXPECT_GT(error_against_exact(padded, plan_sdpa_path(Profile::kHfMain, padded, PathDefect::kSdpaIgnoresPadding)), 1e-2);
}

}  // namespace
}  // namespace flashcheck::hf
