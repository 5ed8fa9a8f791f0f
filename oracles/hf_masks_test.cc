#include "oracles/hf_masks.h"

#include <gtest/gtest.h>

namespace flashcheck::hf {
namespace {

ModelCase base(std::int64_t batch, std::int64_t q_len, std::int64_t past = 0) {
  ModelCase m;
  m.batch = batch;
  m.q_len = q_len;
  m.past = past;
  m.use_cache = past > 0;
  m.heads = m.kv_heads = 1;
  m.head_dim = 4;
  return m;
}

// Allowed keys of query (b, i) as a string of 0/1 over the key columns.
std::string row(const EagerMask& e, std::int64_t b, std::int64_t i) {
  std::string s;
  for (std::int64_t j = 0; j < e.kv_len; ++j) s += e.at(b, i, j) ? '1' : '0';
  return s;
}

TEST(EagerMask, CausalWithAPastSeesEveryEarlierKey) {
  const EagerMask e = eager_mask(base(1, 2, 3));
  EXPECT_EQ(row(e, 0, 0), "11110");
  EXPECT_EQ(row(e, 0, 1), "11111");
}

TEST(EagerMask, LeftPaddingFlagsPadQueriesWithoutKeys) {
  ModelCase m = base(2, 4);
  m.attention_mask = {{0, 0, 1, 1}, {1, 1, 1, 1}};
  const EagerMask e = eager_mask(m);
  EXPECT_EQ(row(e, 0, 0), "0000");
  EXPECT_EQ(e.row(0, 0), RowFlag::kNoKey);
  EXPECT_EQ(e.row(0, 1), RowFlag::kNoKey);
  EXPECT_EQ(row(e, 0, 3), "0011");
  EXPECT_EQ(e.row(0, 3), RowFlag::kComparable);
  EXPECT_EQ(e.row(1, 0), RowFlag::kComparable);
}

TEST(EagerMask, RightPaddingQueriesStillSeeKeysButAreNotCompared) {
  ModelCase m = base(1, 3);
  m.attention_mask = {{1, 1, 0}};
  const EagerMask e = eager_mask(m);
  EXPECT_EQ(row(e, 0, 2), "110");
  EXPECT_EQ(e.row(0, 2), RowFlag::kPaddedQuery);
}

TEST(EagerMask, CausalWindowAdmitsExactlyWKeysIncludingSelf) {
  ModelCase m = base(1, 5);
  m.sliding_window = 2;
  const EagerMask e = eager_mask(m);
  EXPECT_EQ(row(e, 0, 0), "10000");
  EXPECT_EQ(row(e, 0, 4), "00011");
}

TEST(EagerMask, BidirectionalWindowIsSymmetric) {
  ModelCase m = base(1, 5);
  m.causal = false;
  m.sliding_window = 1;
  EXPECT_EQ(row(eager_mask(m), 0, 2), "01110");
}

TEST(EagerMask, PackedPositionsGiveBlockDiagonalSegmentsOnlyWithoutCacheOrMask) {
  ModelCase m = base(1, 5);
  m.position_ids = {{0, 1, 2, 0, 1}};
  EagerMask e = eager_mask(m);
  EXPECT_TRUE(e.segments);
  EXPECT_EQ(row(e, 0, 2), "11100");
  EXPECT_EQ(row(e, 0, 4), "00011");
  m.use_cache = true;  // a cache object turns packing detection off
  e = eager_mask(m);
  EXPECT_FALSE(e.segments);
  EXPECT_EQ(row(e, 0, 4), "11111");
  m.use_cache = false;
  m.attention_mask = {{1, 1, 1, 1, 1}};  // so does an explicit mask, even all ones
  EXPECT_FALSE(eager_mask(m).segments);
}

TEST(EagerMask, AnyStepOtherThanPlusOneStartsASegment) {
  ModelCase m = base(1, 5);
  m.position_ids = {{0, 1, 3, 3, 4}};  // a gap, then a repeat
  const EagerMask e = eager_mask(m);
  EXPECT_EQ(row(e, 0, 1), "11000");
  EXPECT_EQ(row(e, 0, 2), "00100");
  EXPECT_EQ(row(e, 0, 4), "00011");
}

TEST(EagerMask, StaticCacheSlotsBeyondTheMaskAreInvalid) {
  ModelCase m = base(1, 2, 1);
  m.static_cache_len = 5;
  m.attention_mask = {{1, 1, 1}};
  m.causal = false;
  EXPECT_EQ(row(eager_mask(m), 0, 0), "11100");
}

}  // namespace
}  // namespace flashcheck::hf
