#include "kernels/contract.h"

#include <gtest/gtest.h>

namespace flashcheck {
namespace {

TEST(Contract, NarrowingKeepsOnlyWhatTheKernelTakes) {
  Contract k;
  k.dtypes = {DType::kBF16, DType::kF16};
  k.max_head_dim = 128;
  k.head_dim_multiple = 16;
  const Contract n = narrowed(k, {DType::kF32, DType::kBF16}, {64, 72, 256, 128});
  EXPECT_EQ(n.dtypes, std::vector<DType>{DType::kBF16});
  EXPECT_EQ(n.head_dims, (std::vector<std::int64_t>{64, 128}));  // 72: not a multiple of 16; 256: too large
  EXPECT_TRUE(narrowed(k, {DType::kF32}, {}).dtypes.empty());
  EXPECT_TRUE(narrowed(k, {}, {72}).head_dims.empty());
  EXPECT_EQ(narrowed(k, {}, {}).dtypes, k.dtypes);  // nothing asked: the contract as it is
}

TEST(Contract, ListedHeadDimsAreTheOnlyOnesTaken) {
  Contract k;
  k.dtypes = {DType::kBF16};
  k.head_dims = {64, 128};
  KernelCase c;
  c.dtype = DType::kBF16;
  c.seqs = {{.q_len = 4, .k_len = 4}};
  c.head_dim = c.v_head_dim = 128;
  EXPECT_TRUE(check_contract(k, c).supported);
  c.head_dim = c.v_head_dim = 96;
  const ContractCheck r = check_contract(k, c);
  EXPECT_FALSE(r.supported);
  EXPECT_NE(r.reason.find("head dim 96 is not one of the kernel's head dims"), std::string::npos) << r.reason;
}

Contract bottom_right_only() {
  Contract k;
  k.bottom_right = Support::kNative;
  k.gqa = Support::kNative;
  k.window = Support::kTranslated;
  k.dtypes = {DType::kBF16};
  k.max_head_dim = 128;
  k.head_dim_multiple = 8;
  return k;
}

KernelCase base() {
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.v_head_dim = 64;
  c.seqs = {{.q_len = 3, .k_len = 5}};
  return c;
}

TEST(Contract, SupportedCaseListsItsTranslations) {
  KernelCase c = base();
  c.window = {4, -1};
  const ContractCheck r = check_contract(bottom_right_only(), c);
  EXPECT_TRUE(r.supported) << r.reason;
  ASSERT_EQ(r.translations.size(), 1u);
  EXPECT_EQ(r.translations[0], "sliding window");
}

TEST(Contract, UnsupportedCasesSayWhy) {
  KernelCase c = base();
  c.causal = true;
  c.alignment = Alignment::kTopLeft;
  EXPECT_EQ(check_contract(bottom_right_only(), c).reason, "does not support top-left causal/window alignment");
  c = base();
  c.softcap = 30;
  EXPECT_EQ(check_contract(bottom_right_only(), c).reason, "does not support softcap");
  c = base();
  c.seqs.push_back({.q_len = 2, .k_len = 5});
  EXPECT_EQ(check_contract(bottom_right_only(), c).reason, "does not support variable sequence lengths in one batch");
  c = base();
  c.seqs[0].k_len = 0;
  EXPECT_EQ(check_contract(bottom_right_only(), c).reason,
            "does not support zero-length sequences (q_len == 0 or no keys)");
  c = base();
  c.dtype = DType::kF16;
  EXPECT_EQ(check_contract(bottom_right_only(), c).reason, "does not support dtype fp16");
  c = base();
  c.head_dim = 60;
  c.v_head_dim = 60;
  EXPECT_EQ(check_contract(bottom_right_only(), c).reason, "head dim 60 is not a multiple of 8");
  c = base();
  c.head_dim = c.v_head_dim = 256;
  EXPECT_EQ(check_contract(bottom_right_only(), c).reason, "head dim 256 exceeds the maximum 128");
}

TEST(Contract, PureCausalNeedsNoWindowSupport) {
  KernelCase c = base();
  c.causal = true;
  c.window = {-1, 7};  // causal folds the right bound to 0: still plain causal
  Contract k = bottom_right_only();
  k.window = Support::kNo;
  EXPECT_TRUE(check_contract(k, c).supported);
  c.window = {3, -1};
  EXPECT_EQ(check_contract(k, c).reason, "does not support sliding window");
}

TEST(Contract, AlignmentIsIrrelevantWithoutMask) {
  KernelCase c = base();
  c.alignment = Alignment::kTopLeft;  // neither causal nor windowed
  EXPECT_TRUE(check_contract(bottom_right_only(), c).supported);
}

TEST(Contract, UnusedSlotsAreFoundWhereverTheyAre) {
  KernelCase c = base();
  EXPECT_FALSE(has_unused_input_slots(c));
  c.slack.q_rows = 1;
  EXPECT_TRUE(has_unused_input_slots(c));
  c = base();
  c.slack.kv_rows = 2;
  EXPECT_TRUE(has_unused_input_slots(c));
  c = base();
  c.seqs[0].seqused_k = 3;  // keys 3 and 4 are allocated and unused
  EXPECT_TRUE(has_unused_input_slots(c));
  c.seqs[0].seqused_k = 5;
  EXPECT_FALSE(has_unused_input_slots(c));
}

TEST(Contract, AKernelThatNeedsFiniteUnusedSlotsIsNotGivenNaNThere) {
  Contract k = bottom_right_only();
  k.seqused_k = Support::kNative;
  k.finite_unused_slots = "known defect: NaN past seqused_k reaches the output (fixtures/found/x.json)";
  KernelCase c = base();
  c.seqs[0].seqused_k = 3;
  c.data.poison = true;
  const ContractCheck r = check_contract(k, c);
  EXPECT_FALSE(r.supported);
  EXPECT_EQ(r.reason, "known defect: NaN past seqused_k reaches the output (fixtures/found/x.json) "
                      "(this case holds NaN in input slots no sequence uses)");
  c.data.poison = false;  // zeros there: inside the contract
  EXPECT_TRUE(check_contract(k, c).supported);
  c.data.poison = true;  // NaN, but no unused slot to hold it
  c.seqs[0].seqused_k.reset();
  EXPECT_TRUE(check_contract(k, c).supported);
  k.finite_unused_slots.clear();  // a kernel that takes NaN there
  c.seqs[0].seqused_k = 3;
  EXPECT_TRUE(check_contract(k, c).supported);
}

}  // namespace
}  // namespace flashcheck

namespace flashcheck {
namespace {

TEST(BackwardContract, BackwardCasesNeedABackwardAndMeetItsLimits) {
  Contract k;
  k.bottom_right = k.softcap = k.gqa = k.leftpad = Support::kNative;
  k.dtypes = {DType::kBF16, DType::kF32};
  KernelCase c;
  c.dtype = DType::kBF16;
  c.seqs = {{.q_len = 2, .k_len = 3}};
  EXPECT_TRUE(check_backward_contract(k, c).supported);  // a forward case: the forward contract only
  c.dout = DoutRecipe{};
  EXPECT_EQ(check_backward_contract(k, c).reason, "has no backward (its contract computes the forward only)");
  k.backward.available = true;
  EXPECT_TRUE(check_backward_contract(k, c).supported);
  k.backward.without = {"softcap"};
  c.softcap = 10;
  EXPECT_EQ(check_backward_contract(k, c).reason, "its backward does not support softcap");
  c.softcap = 0;
  k.backward.dtypes = {DType::kF32};
  EXPECT_EQ(check_backward_contract(k, c).reason, "its backward does not support dtype bf16");
  c.dtype = DType::kF32;
  EXPECT_TRUE(check_backward_contract(k, c).supported);
  // Rows without keys have no defined gradient unless the forward writes 0 there.
  c.causal = true;
  c.seqs = {{.q_len = 3, .k_len = 1}};
  k.empty_row = EmptyRow::kNaN;
  EXPECT_NE(check_backward_contract(k, c).reason.find("rows without keys"), std::string::npos);
  k.empty_row = EmptyRow::kZero;
  EXPECT_TRUE(check_backward_contract(k, c).supported);
}

TEST(BackwardContract, EveryFeatureNameIsOneTheCaseCanUse) {
  KernelCase c;
  c.causal = true;
  c.softcap = 5;
  c.heads = 2;
  c.seqs = {{.q_len = 2, .k_len = 4, .seqused_k = 3, .leftpad_k = 1}, {.q_len = 1, .k_len = 0}};
  c.slack = {.q_rows = 1};
  c.v_head_dim = 32;
  for (const char* f : {"bottom_right", "softcap", "gqa", "varlen", "seqused_k", "leftpad", "zero_length", "dv_differs", "slack"})
    EXPECT_TRUE(case_uses_feature(c, f)) << f;
  for (const char* f : {"top_left", "window", "paged", "kv_cache"}) EXPECT_FALSE(case_uses_feature(c, f)) << f;
  EXPECT_EQ(contract_feature_names().size(), 13u);
}

}  // namespace
}  // namespace flashcheck
