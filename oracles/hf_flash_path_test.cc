#include "oracles/hf_flash_path.h"

#include <cmath>
#include <gtest/gtest.h>

#include "oracles/hf_divergences.h"
#include "oracles/hf_eager.h"
#include "oracles/model_case_for_tests.h"

namespace flashcheck::hf {
namespace {

using V = std::vector<std::int64_t>;

ModelCase base(std::int64_t batch, std::int64_t q_len, std::int64_t past = 0) {
  return testing::small_model_case(DType::kBF16, 3, batch, q_len, past);
}

TEST(FlashPlan, NoMaskNoPackingIsDense) {
  const FlashPlan p = plan_flash_path(Profile::kHfMain, base(2, 4));
  EXPECT_EQ(p.branch, FlashBranch::kDense);
  EXPECT_EQ(p.row_source, (V{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(FlashPlan, PackedPositionsStartAtTheMinimumOnMain) {
  ModelCase m = base(1, 5);
  m.position_ids = {{0, 1, 2, 0, 1}};
  FlashPlan p = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(p.branch, FlashBranch::kPacked);
  EXPECT_EQ(p.call.cu_q, (V{0, 3, 5}));
  EXPECT_EQ(p.call.cu_k, (V{0, 3, 5}));
  EXPECT_EQ(p.call.max_q, 3);
  m.position_ids = {{10, 12, 14}};  // #39814's residual: no zero. 5.x starts sequences at min(pos).
  m.q_len = 3;
  p = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(p.branch, FlashBranch::kPacked);
  EXPECT_EQ(p.call.cu_q, (V{0, 3}));
}

TEST(FlashPlan, TokensBeforeTheFirstStartAreNeverWritten) {  // F17
  ModelCase m = base(1, 4);
  m.position_ids = {{2, 3, 0, 1}};
  const FlashPlan p = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(p.call.cu_q, (V{2, 4}));
  EXPECT_EQ(p.row_source, (V{kUnwritten, kUnwritten, 2, 3}));
}

TEST(FlashPlan, Hf455RaisesOnPositionsWithoutZero) {  // #39814
  ModelCase m = base(1, 1, 7);
  m.position_ids = std::vector<std::vector<std::int64_t>>{{7}};
  const FlashPlan p = plan_flash_path(Profile::kHf455, m);
  EXPECT_EQ(p.branch, FlashBranch::kError);
  EXPECT_NE(p.error.find("max(): Expected reduction dim"), std::string::npos) << p.error;
  EXPECT_EQ(plan_flash_path(Profile::kHfMain, m).branch, FlashBranch::kDense);
}

TEST(FlashPlan, Hf455ComputesOnlyTheFirstRowOfABatchWithDefaultPositions) {  // F5
  const FlashPlan p = plan_flash_path(Profile::kHf455, base(2, 3));
  EXPECT_EQ(p.branch, FlashBranch::kPacked);
  EXPECT_EQ(p.call.cu_q, (V{0, 3}));
  EXPECT_EQ(p.row_source, (V{0, 1, 2, kUnwritten, kUnwritten, kUnwritten}));
}

TEST(FlashPlan, Hf455GenerateKwargsAreShortOneKeyPerEarlierRow) {  // F6
  ModelCase m = base(2, 3);
  m.via_generate = true;
  m.position_ids = {{0, 1, 2}, {0, 1, 2}};
  const FlashPlan p = plan_flash_path(Profile::kHf455, m);
  EXPECT_EQ(p.branch, FlashBranch::kVarlenKwargs);
  EXPECT_EQ(p.call.cu_q, (V{0, 3, 6}));
  EXPECT_EQ(p.call.cu_k, (V{0, 3, 5}));
}

TEST(FlashPlan, MaskBranchUnpadsAndZeroFillsPadQueries) {
  ModelCase m = base(2, 3);
  m.attention_mask = {{0, 1, 1}, {1, 1, 1}};
  const FlashPlan p = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(p.branch, FlashBranch::kMask);
  EXPECT_EQ(p.call.cu_q, (V{0, 2, 5}));
  EXPECT_EQ(p.call.cu_k, (V{0, 2, 5}));
  EXPECT_EQ(p.call.q_rows, (V{1, 2, 3, 4, 5}));
  EXPECT_EQ(p.row_source, (V{kZeroRow, 0, 1, 2, 3, 4}));
}

TEST(FlashPlan, DecodeKeepsEveryRowsQuery) {
  ModelCase m = base(2, 1, 3);
  m.attention_mask = {{0, 0, 1, 1}, {1, 1, 1, 1}};
  const FlashPlan p = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(p.call.cu_q, (V{0, 1, 2}));
  EXPECT_EQ(p.call.cu_k, (V{0, 2, 6}));
  EXPECT_EQ(p.call.k_rows, (V{2, 3, 4, 5, 6, 7}));
}

TEST(FlashPlan, WindowConventionChangedInV456) {  // F9
  ModelCase m = base(1, 6);
  m.sliding_window = 4;
  EXPECT_EQ(plan_flash_path(Profile::kHfMain, m).call.window, std::make_pair(std::int64_t{3}, std::int64_t{3}));
  EXPECT_EQ(plan_flash_path(Profile::kHf453, m).call.window, std::make_pair(std::int64_t{4}, std::int64_t{4}));
  m.q_len = 4;  // key length not above the window: no window passed
  EXPECT_FALSE(plan_flash_path(Profile::kHfMain, m).call.window.has_value());
}

TEST(FlashPlan, StaticCacheWithAllOnesMask) {  // F13
  ModelCase m = base(1, 2, 2);
  m.static_cache_len = 8;
  m.attention_mask = {{1, 1, 1, 1}};
  const FlashPlan main = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(main.branch, FlashBranch::kMask);  // #46914 keeps the shorter mask and trims K/V
  EXPECT_EQ(main.call.cu_k, (V{0, 4}));
  // v4.55 drops the all-true mask and takes the position_ids path, where [[2, 3]] has no zero (#39814).
  EXPECT_EQ(plan_flash_path(Profile::kHf455, m).branch, FlashBranch::kError);
  EXPECT_EQ(plan_flash_path(Profile::kHf453, m).branch, FlashBranch::kDense);    // over all 8 slots
}

TEST(FlashPlan, MRopePositionsReadPastTheQuery) {  // F21
  ModelCase m = base(1, 4);
  m.position_ids = {{0, 1, 2, 3}};
  m.position_ids_3d = true;
  const FlashPlan p = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(p.branch, FlashBranch::kError);
  EXPECT_NE(p.error.find("illegal memory access"), std::string::npos) << p.error;
}

TEST(FlashPlan, CallerQueryLengthPicksDecodingModeOnlyInAugust2025) {  // F8, #40399
  ModelCase m = base(1, 6);
  m.position_ids = {{0, 1, 2, 0, 1, 2}};
  m.query_length = 3;
  const FlashPlan aug = plan_flash_path(Profile::kHf202508, m);
  EXPECT_EQ(aug.call.cu_q, (V{0, 3}));
  const FlashPlan main = plan_flash_path(Profile::kHfMain, m);
  EXPECT_EQ(main.call.cu_q, (V{0, 3, 6}));
}

TEST(FlashPlan, FastchatForgetsPaddingInsideThePast) {
  ModelCase m = base(2, 2, 2);
  m.attention_mask = {{0, 1, 1, 1}, {1, 1, 1, 0}};
  const FlashPlan p = plan_flash_path(Profile::kFastchat2023, m);
  EXPECT_EQ(p.branch, FlashBranch::kMask);
  EXPECT_EQ(p.call.cu_k, (V{0, 4, 7}));  // row 0's padded past key is attended
  EXPECT_EQ(p.call.cu_q, (V{0, 2, 3}));
  EXPECT_EQ(p.row_source, (V{0, 1, 2, kZeroRow}));
}

TEST(FlashRun, MaskBranchOnTheTiledKernelMatchesEagerOnValidRows) {
  ModelCase m = base(2, 5, 2);
  m.attention_mask = {{0, 0, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1}};
  const ModelTensors t = materialize(m);
  Kernel* k = builtin_registry().find("tiled-cpu");
  ASSERT_NE(k, nullptr);
  const FlashPlan p = plan_flash_path(Profile::kHfMain, m);
  const FlashRun r = run_flash_path(p, m, t, *k);
  ASSERT_EQ(r.kind, VerdictKind::kPass) << r.reason;
  const EagerResult e = eager_attention(m, t);
  const std::size_t row = static_cast<std::size_t>(m.heads * m.head_dim);
  double worst = 0;
  for (std::size_t x = 0; x < r.out.size(); ++x) {
    if (e.mask.rows[x / row] != RowFlag::kComparable) continue;
    worst = std::max(worst, std::fabs(r.out[x] - e.out.data[x]));
  }
  EXPECT_LT(worst, 0.05);
  EXPECT_GT(worst, 0.0);  // different rounding: fp32 logits in the kernel, bf16 in eager
}

TEST(FlashRun, UnwrittenRowsComeBackAsNaN) {
  const ModelCase m = base(2, 3);
  const FlashRun r = run_flash_path(plan_flash_path(Profile::kHf455, m), m, materialize(m), *builtin_registry().find("tiled-cpu"));
  ASSERT_EQ(r.kind, VerdictKind::kPass) << r.reason;
  const std::size_t row = static_cast<std::size_t>(m.heads * m.head_dim);
  EXPECT_FALSE(std::isnan(r.out[0]));
  EXPECT_TRUE(std::isnan(r.out[3 * row]));
}

// hf-live names transformers#39814 by its message only in its scenario: a decode step whose positions do not start at
// 0. Packed positions [4, 2] raise the same message in releases that fixed #39814, for another reason.
TEST(UpstreamSymptom, NamesAReportOnlyInItsScenario) {
  const std::string error = "RuntimeError: max(): Expected reduction dim to be specified for input.numel() == 0.";
  ModelCase decode = flashcheck::testing::small_model_case(DType::kBF16, 1, 1, 1, 5);
  decode.position_ids = std::vector<std::vector<std::int64_t>>{{5}};
  const std::optional<std::string> named = upstream_symptom(error, decode);
  ASSERT_TRUE(named.has_value());
  EXPECT_NE(named->find("transformers#39814"), std::string::npos);
  ModelCase packed = flashcheck::testing::small_model_case(DType::kBF16, 1, 1, 2);
  packed.position_ids = std::vector<std::vector<std::int64_t>>{{4, 2}};
  EXPECT_EQ(upstream_symptom(error, packed), std::nullopt);
  EXPECT_EQ(upstream_symptom("another message", decode), std::nullopt);
  ModelCase mrope = flashcheck::testing::small_model_case(DType::kBF16, 1, 1, 4);
  mrope.position_ids_3d = true;
  EXPECT_NE(upstream_symptom("illegal memory access: cu_seqlens reach query row 12", mrope), std::nullopt);
  EXPECT_EQ(upstream_symptom("illegal memory access: cu_seqlens reach query row 12", decode), std::nullopt);
}

}  // namespace
}  // namespace flashcheck::hf
