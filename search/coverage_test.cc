#include "search/coverage.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace flashcheck {
namespace {

bool demands(const Contract& k, const std::string& feature) {
  const std::vector<std::string> r = required_coverage(k, CaseRequirements{});
  return std::find(r.begin(), r.end(), feature) != r.end();
}

Contract top_left_only() {
  Contract k;
  k.top_left = Support::kNative;
  k.dtypes = {DType::kF16};
  return k;
}

TEST(Coverage, TopLeftOnlyKernelsAreNotAskedForEmptyRows) {
  EXPECT_FALSE(demands(top_left_only(), "empty-rows"));
  EXPECT_TRUE(demands(top_left_only(), "causal-top-left"));
}

TEST(Coverage, BottomRightWindowOrEmptySequencesMakeEmptyRowsRequired) {
  Contract k = top_left_only();
  k.bottom_right = Support::kNative;
  EXPECT_TRUE(demands(k, "empty-rows"));
  k = top_left_only();
  k.window = Support::kTranslated;
  EXPECT_TRUE(demands(k, "empty-rows"));
  k = top_left_only();
  k.zero_length = Support::kNative;
  EXPECT_TRUE(demands(k, "empty-rows"));
}

TEST(Coverage, PageSizeOneIsDemandedOnlyWhereThePageSizeMultipleAllowsIt) {
  Contract k = top_left_only();
  k.paged = Support::kNative;
  EXPECT_TRUE(demands(k, "paged"));
  EXPECT_TRUE(demands(k, "page-size-1"));
  k.page_size_multiple = 128;  // FlexAttention's paged helper: a page is a key block of the mask
  EXPECT_TRUE(demands(k, "paged"));
  EXPECT_FALSE(demands(k, "page-size-1"));
}

TEST(Coverage, ExemptFeaturesAreDroppedWithTheirReason) {
  Contract k = top_left_only();
  k.bottom_right = Support::kNative;
  k.coverage_exempt = {{"empty-rows", "known defect"}};
  EXPECT_FALSE(demands(k, "empty-rows"));
  EXPECT_TRUE(demands(k, "causal-bottom-right"));
}

TEST(Coverage, TheBackwardsExemptionsApplyToGradientPropertiesOnly) {
  Contract k = top_left_only();
  k.bottom_right = Support::kNative;
  k.backward.available = true;
  k.backward.coverage_exempt = {{"empty-rows", "a known defect of the backward"}};
  CaseRequirements backward;
  backward.backward = true;
  const auto has = [](const std::vector<std::string>& r, const char* f) { return std::find(r.begin(), r.end(), f) != r.end(); };
  EXPECT_TRUE(has(required_coverage(k, CaseRequirements{}), "empty-rows"));
  EXPECT_FALSE(has(required_coverage(k, backward), "empty-rows"));
  EXPECT_TRUE(has(required_coverage(k, backward), "dout-onehot"));
}

TEST(Coverage, MissingNamesTheUnreachedFeaturesInOrder) {
  Coverage cov;
  KernelCase c;
  c.dtype = DType::kF16;
  c.heads = c.kv_heads = 1;
  c.head_dim = c.v_head_dim = 8;
  c.seqs = {{3, 5}};
  cov.add(c);
  EXPECT_EQ(cov.missing({"dtype-fp16", "gqa", "tile64-1"}), (std::vector<std::string>{"gqa", "tile64-1"}));
}

}  // namespace
}  // namespace flashcheck
