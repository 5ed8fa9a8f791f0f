#include "core/kernel_case.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <set>

#include "core/geometry.h"

namespace flashcheck {
namespace {

KernelCase simple_case() {
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 8;
  c.v_head_dim = 8;
  c.seqs = {{.q_len = 3, .k_len = 5}, {.q_len = 1, .k_len = 7}};
  return c;
}

// The first error's field for a case changed by `edit`.
template <typename F>
std::string first_error_field(F edit) {
  KernelCase c = simple_case();
  edit(c);
  const auto errors = validate(c);
  return errors.empty() ? "" : errors.front().field + ": " + errors.front().reason;
}

TEST(KernelCaseValidate, AcceptsASimpleCase) { EXPECT_TRUE(validate(simple_case()).empty()); }

TEST(KernelCaseValidate, NamesTheFieldAndReasonOfEachImpossibleCase) {
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.kv_heads = 3; }),
            "kv_heads: heads 4 is not a multiple of kv_heads 3 (H % Hk must be 0)");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.seqs[1].q_len = -1; }), "seqs[1].q_len: negative length -1");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.seqs[0].seqused_k = 6; }), "seqs[0].seqused_k: seqused_k 6 > k_len 5");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.window = {-2, 0}; }),
            "window[0]: left bound -2 is below -1 (-1 means unbounded)");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.window = {0, -3}; }),
            "window[1]: right bound -3 is below -1 (-1 means unbounded)");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.seqs.clear(); }),
            "seqs: the batch is empty: a case needs at least one sequence");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.seqs[0].leftpad_k = 6; }),
            "seqs[0].leftpad_k: leftpad_k 6 is past the end of the used keys (5)");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.softcap = -1; }), "softcap: -1 must be finite and >= 0");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.kv_strides = KvStrides::kExpanded; }),
            "kv.strides: expanded K/V broadcast one KV head; kv_heads is 2");
}

TEST(KernelCaseValidate, RefusesARecipeWhoseInputsOverflowTheDtype) {
  // The case a CI run drew (fp16, softcap 50, q scaled by four times the cap, the `large` recipe): q held
  // infinities, the truth and the bound were infinite, and conformance passed whatever the kernel returned.
  auto overflowing = [](KernelCase& c) {
    c.dtype = DType::kF16;
    c.softcap = 50;
    c.data.dist = Distribution::kLarge;
    c.data.q_scale = 200;
  };
  const std::string why = first_error_field(overflowing);
  EXPECT_EQ(why.rfind("data.q_scale: 200 gives 'large' inputs up to 8.868e+04, past fp16's safe range", 0), 0u) << why;
  EXPECT_EQ(first_error_field([&](KernelCase& c) {
              overflowing(c);
              c.dtype = DType::kBF16;
            }),
            "");
  EXPECT_EQ(first_error_field([&](KernelCase& c) {
              overflowing(c);
              c.data.q_scale = 50;
            }),
            "");
  EXPECT_EQ(first_error_field([](KernelCase& c) {
              c.dtype = DType::kF16;
              c.data.v_scale = 1e5;
            }).rfind("data.v_scale: ", 0),
            0u);
}

TEST(KernelCaseValidate, PagingRules) {
  EXPECT_EQ(first_error_field([](KernelCase& c) {
              c.kv_storage = KvStorage::kPaged;
              c.paging.page_size = 0;
            }),
            "kv.page_size: page size 0 must be >= 1");
  EXPECT_EQ(first_error_field([](KernelCase& c) {
              c.kv_storage = KvStorage::kPaged;
              c.paging.page_size = 2;
              c.paging.block_table = {{0, 1, 2}, {3, 4}};  // seq 1 has k_len 7: needs 4 pages
            }),
            "kv.block_table[1]: too short: 2 pages for k_len 7 at page size 2 (needs 4)");
  EXPECT_EQ(first_error_field([](KernelCase& c) {
              c.kv_storage = KvStorage::kPaged;
              c.paging.page_size = 4;
              c.paging.block_table = {{0, 1}, {1, 2}};
            }),
            "kv.block_table[1][0]: page 1 is already used by seqs[0]");
  EXPECT_EQ(first_error_field([](KernelCase& c) {
              c.kv_storage = KvStorage::kPaged;
              c.paging.page_size = 4;
              c.paging.block_table = {{0, 1}, {2, 9}};
            }),
            "kv.block_table[1][1]: page 9 is outside the pool [0, 4)");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.paging.block_table = {{0}}; }),
            "kv.block_table: a block table needs \"kv\": {\"storage\": \"paged\"}");
}

TEST(KernelCaseValidate, CacheRules) {
  EXPECT_EQ(first_error_field([](KernelCase& c) {
              c.kv_cache = true;
              c.seqs[0].cache_len = 4;
              c.seqs[0].new_len = 2;
            }),
            "seqs[0].new_len: cache_len 4 + new_len 2 exceeds the cache capacity k_len 5");
  EXPECT_EQ(first_error_field([](KernelCase& c) { c.seqs[0].new_len = 1; }),
            "seqs[0].cache_len: cache_len/new_len need \"kv\": {\"cache\": true}");
}

// flash_attn_with_kvcache's semantics: cache_seqlens = 5, S_new = 2, Sq = 2, leftpad = 2, causal -> keys are
// logical positions 2..6 (Lk = 5) and the bottom-right offset is 3.
TEST(CaseGeometry, CacheWithLeftpadWorkedExample) {
  KernelCase c = simple_case();
  c.kv_cache = true;
  c.seqs = {{.q_len = 2, .k_len = 8, .leftpad_k = 2, .cache_len = 5, .new_len = 2}};
  ASSERT_TRUE(validate(c).empty());
  const CaseGeometry g = geometry(c);
  EXPECT_EQ(g.seqs[0].p0, 2);
  EXPECT_EQ(g.seqs[0].kv_end, 7);
  EXPECT_EQ(g.seqs[0].lk, 5);
  EXPECT_EQ(diagonal_offset(Alignment::kBottomRight, 2, 5), 3);
}

TEST(CaseGeometry, PackedOffsetsFollowPrefixSums) {
  KernelCase c = simple_case();
  c.seqs = {{.q_len = 3, .k_len = 5}, {.q_len = 0, .k_len = 2, .seqused_k = 1}, {.q_len = 4, .k_len = 0}};
  const CaseGeometry g = geometry(c);
  EXPECT_EQ(g.total_q, 7);
  EXPECT_EQ(g.kv_rows, 7);
  EXPECT_EQ(g.seqs[2].q_start, 3);
  EXPECT_EQ(g.seqs[2].k_start, 7);
  EXPECT_EQ(g.seqs[1].lk, 1);
  EXPECT_EQ(g.max_q, 4);
}

TEST(BlockTable, DerivedTablesAreDisjointDeterministicPermutations) {
  KernelCase c = simple_case();
  c.kv_storage = KvStorage::kPaged;
  c.paging.page_size = 2;
  c.paging.extra_pages = 3;
  c.paging.table_seed = 99;
  const auto t = block_table(c);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].size(), 3u);  // ceil(5 / 2)
  EXPECT_EQ(t[1].size(), 4u);  // ceil(7 / 2)
  std::set<int> pages;
  for (const auto& row : t)
    for (int p : row) {
      EXPECT_GE(p, 0);
      EXPECT_LT(p, 10);  // 7 needed + 3 extra
      pages.insert(p);
    }
  EXPECT_EQ(pages.size(), 7u);
  EXPECT_EQ(t, block_table(c));
  c.paging.table_seed = 100;
  EXPECT_NE(t, block_table(c));
  EXPECT_TRUE(validate(c).empty());
}

TEST(KernelCaseSummary, ShowsShapeAndFeatures) {
  KernelCase c = simple_case();
  c.causal = true;
  c.window = {3, 0};
  EXPECT_EQ(summary(c), "b2 h4/2 d8 bf16 causal-br win(3,0) L[3x5,1x7]");
}

}  // namespace
}  // namespace flashcheck
