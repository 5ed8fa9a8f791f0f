#include "core/case_tensors.h"

#include <cmath>
#include <gtest/gtest.h>

#include "core/geometry.h"

namespace flashcheck {
namespace {

KernelCase base_case() {
  KernelCase c;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 4;
  c.v_head_dim = 3;
  c.dtype = DType::kBF16;
  c.seqs = {{.q_len = 2, .k_len = 5, .seqused_k = 4, .leftpad_k = 1}, {.q_len = 1, .k_len = 2}};
  c.data.seed = 42;
  return c;
}

TEST(Materialize, ShapesFollowTheStorage) {
  KernelCase c = base_case();
  CaseTensors t = materialize(c);
  EXPECT_EQ(t.q.shape, (std::vector<std::int64_t>{3, 2, 4}));
  EXPECT_EQ(t.k.shape, (std::vector<std::int64_t>{7, 1, 4}));
  EXPECT_EQ(t.v.shape, (std::vector<std::int64_t>{7, 1, 3}));
  EXPECT_EQ(check_shapes(c, t), "");
  t.v.shape = {7, 1, 4};
  EXPECT_EQ(check_shapes(c, t), "tensor 'v' has shape (7, 1, 4), the case needs (7, 1, 3)");
}

TEST(Materialize, PoisonsExactlyTheSlotsOutsideEverySequence) {
  const KernelCase c = base_case();
  const CaseTensors t = materialize(c);
  // Sequence 0 owns rows 0..4: row 0 is left padding, row 4 is beyond seqused_k. Sequence 1 owns 5..6.
  for (std::int64_t row = 0; row < 7; ++row) {
    const bool poisoned = row == 0 || row == 4;
    for (int x = 0; x < 4; ++x) EXPECT_EQ(std::isnan(t.k.data[row * 4 + x]), poisoned) << "row " << row;
  }
  KernelCase clean = c;
  clean.data.poison = false;
  EXPECT_EQ(materialize(clean).k.data[0], 0.0f);
}

TEST(Materialize, ValuesAreDtypeExactDeterministicAndSeeded) {
  const KernelCase c = base_case();
  const CaseTensors a = materialize(c), b = materialize(c);
  for (std::size_t i = 0; i < a.q.data.size(); ++i) {
    EXPECT_EQ(a.q.data[i], b.q.data[i]);
    EXPECT_EQ(static_cast<double>(a.q.data[i]), round_to(DType::kBF16, a.q.data[i]));
  }
  KernelCase other = c;
  other.data.seed = 43;
  EXPECT_NE(materialize(other).q.data[0], a.q.data[0]);
}

TEST(Materialize, LayoutDoesNotChangeLogicalValues) {
  // The same logical key in packed and paged storage has the same value.
  KernelCase packed = base_case();
  KernelCase paged = packed;
  paged.kv_storage = KvStorage::kPaged;
  paged.paging.page_size = 2;
  paged.paging.extra_pages = 1;
  paged.paging.table_seed = 5;
  const CaseTensors a = materialize(packed), b = materialize(paged);
  const auto table = block_table(paged);
  for (std::int64_t p = 1; p < 4; ++p) {  // logical positions of sequence 0 in use
    const std::int64_t prow = table[0][p / 2] * 2 + p % 2;
    for (int x = 0; x < 4; ++x) EXPECT_EQ(a.k.data[p * 4 + x], b.k.data[prow * 4 + x]);
  }
}

TEST(Materialize, OneHotVReadsBackPositions) {
  KernelCase c = base_case();
  c.data.v_onehot = true;
  const CaseTensors t = materialize(c);
  // Logical position 2 of sequence 0 (row 2): e_(2 mod 3).
  EXPECT_EQ(t.v.data[2 * 3 + 0], 0.0f);
  EXPECT_EQ(t.v.data[2 * 3 + 1], 0.0f);
  EXPECT_EQ(t.v.data[2 * 3 + 2], 1.0f);
}

TEST(Materialize, CacheSlotsForNewTokensArePoisonedAndNewTensorsFilled) {
  KernelCase c = base_case();
  c.kv_cache = true;
  c.seqs = {{.q_len = 2, .k_len = 6, .cache_len = 3, .new_len = 2}};
  const CaseTensors t = materialize(c);
  EXPECT_EQ(t.k_new.shape, (std::vector<std::int64_t>{2, 1, 4}));
  EXPECT_FALSE(std::isnan(t.k.data[2 * 4]));  // cached
  EXPECT_TRUE(std::isnan(t.k.data[3 * 4]));   // to be written by the kernel
  EXPECT_TRUE(std::isnan(t.k.data[5 * 4]));   // beyond the appended tokens
  EXPECT_FALSE(std::isnan(t.k_new.data[0]));
}

TEST(Materialize, IntegerRecipeGivesSmallExactIntegers) {
  KernelCase c = base_case();
  c.data.dist = Distribution::kIntegers;
  for (float x : materialize(c).q.data) {
    EXPECT_EQ(x, std::round(x));
    EXPECT_LE(std::fabs(x), 2.0f);
  }
}

}  // namespace
}  // namespace flashcheck
