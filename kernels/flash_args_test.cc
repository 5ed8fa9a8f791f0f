#include "kernels/flash_args.h"

#include <gtest/gtest.h>

namespace flashcheck {
namespace {

TEST(FlashArgs, PrefixSumsAndOptionalArrays) {
  KernelCase c;
  c.seqs = {{.q_len = 3, .k_len = 5, .seqused_k = 4}, {.q_len = 0, .k_len = 2}, {.q_len = 2, .k_len = 7, .leftpad_k = 1}};
  const FlashArgs a = flash_args(c);
  EXPECT_EQ(a.cu_seqlens_q, (std::vector<std::int32_t>{0, 3, 3, 5}));
  EXPECT_EQ(a.cu_seqlens_k, (std::vector<std::int32_t>{0, 5, 7, 14}));
  EXPECT_EQ(a.seqused_k, (std::vector<std::int32_t>{4, 2, 7}));  // unset entries use the whole segment
  EXPECT_EQ(a.leftpad_k, (std::vector<std::int32_t>{0, 0, 1}));
  EXPECT_TRUE(a.cache_seqlens.empty());
  EXPECT_EQ(a.max_seqlen_q, 3);
  EXPECT_EQ(a.max_seqlen_k, 7);
}

TEST(FlashArgs, CausalFoldsIntoTheWindow) {
  KernelCase c;
  c.seqs = {{.q_len = 1, .k_len = 1}};
  c.causal = true;
  c.window = {4, 9};
  const FlashArgs a = flash_args(c);
  EXPECT_EQ(a.window_left, 4);
  EXPECT_EQ(a.window_right, 0);
}

TEST(FlashArgs, PagedTableIsPaddedRowMajor) {
  KernelCase c;
  c.kv_storage = KvStorage::kPaged;
  c.paging = {.page_size = 2, .extra_pages = 0, .table_seed = 0, .block_table = {{3, 1}, {0}, {2}}};
  c.seqs = {{.q_len = 1, .k_len = 4}, {.q_len = 1, .k_len = 1}, {.q_len = 1, .k_len = 2}};
  const FlashArgs a = flash_args(c);
  EXPECT_EQ(a.max_blocks, 2);
  EXPECT_EQ(a.block_table, (std::vector<std::int32_t>{3, 1, 0, -1, 2, -1}));
}

// The cases of fixtures/found/flash-varlen-gqa-decode-*.json and the H100 false-alarm run of 2026-12-06: the third
// (one sequence without a query, one row of slack) has as many Q rows as sequences and was missed by a row count.
TEST(FlashArgs, DecodeFastPathMisreadsQUnlessOneRowPerSequence) {
  KernelCase c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seqs = {{.q_len = 1, .k_len = 2}, {.q_len = 1, .k_len = 3}};
  EXPECT_FALSE(flash_decode_fast_path_misreads_q(c));
  c.slack.q_rows = 1;
  EXPECT_TRUE(flash_decode_fast_path_misreads_q(c));  // a row past the last sequence
  c.seqs = {{.q_len = 0, .k_len = 0}, {.q_len = 1, .k_len = 2}};
  EXPECT_TRUE(flash_decode_fast_path_misreads_q(c));  // rows == sequences, but row 0 is sequence 1's query
  c.slack.q_rows = 0;
  EXPECT_TRUE(flash_decode_fast_path_misreads_q(c));  // a sequence without a query
  c.seqs = {{.q_len = 2, .k_len = 2}, {.q_len = 0, .k_len = 2}};
  EXPECT_FALSE(flash_decode_fast_path_misreads_q(c));  // max_seqlen_q 2: not the decode path
  c.seqs = {{.q_len = 0, .k_len = 0}, {.q_len = 1, .k_len = 2}};
  c.kv_heads = 2;
  EXPECT_FALSE(flash_decode_fast_path_misreads_q(c));  // no GQA: no reshape
}

}  // namespace
}  // namespace flashcheck
