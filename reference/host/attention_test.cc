// Tests of the fp64 reference against hand-derived values: which keys each row sees under every mask
// convention, and identities that need no second implementation.
#include "reference/host/attention.h"

#include <cmath>
#include <gtest/gtest.h>
#include <set>

#include "core/geometry.h"

namespace flashcheck::reference {
namespace {

// A single-sequence, single-head case with Q = 0 and one-hot V wide enough that output channel p holds
// the softmax weight of logical key position p: with Q = 0 the weights are uniform over the visible keys,
// so the output reads back exactly which keys a row sees.
KernelCase visibility_case(std::int64_t lq, std::int64_t lk) {
  KernelCase c;
  c.heads = 1;
  c.kv_heads = 1;
  c.head_dim = 4;
  c.v_head_dim = 16;
  c.dtype = DType::kF32;
  c.seqs = {{.q_len = lq, .k_len = lk}};
  c.data.q_scale = 0.0;
  c.data.v_onehot = true;
  return c;
}

// Logical key positions row i of sequence 0, head 0 sees (channels with non-zero weight).
std::set<int> seen(const KernelCase& c, const Result& r, std::int64_t i) {
  const CaseGeometry g = geometry(c);
  std::set<int> s;
  const double* o = r.out.data() + (g.seqs[0].q_start + i) * c.heads * c.v_head_dim;
  for (int x = 0; x < c.v_head_dim; ++x)
    if (o[x] != 0.0) s.insert(x);
  return s;
}

std::set<int> range(int lo, int hi_inclusive) {
  std::set<int> s;
  for (int j = lo; j <= hi_inclusive; ++j) s.insert(j);
  return s;
}

TEST(ReferenceHostVisibility, CausalQ2K5BothAlignments) {
  KernelCase c = visibility_case(2, 5);
  c.causal = true;
  Result r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 0), range(0, 3));
  EXPECT_EQ(seen(c, r, 1), range(0, 4));
  c.alignment = Alignment::kTopLeft;
  r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 0), range(0, 0));
  EXPECT_EQ(seen(c, r, 1), range(0, 1));
}

TEST(ReferenceHostVisibility, CausalQ5K2BottomRightHasEmptyRows) {
  KernelCase c = visibility_case(5, 2);
  c.causal = true;
  Result r = host_attention(c, materialize(c));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seen(c, r, i), std::set<int>{}) << i;
    EXPECT_EQ(r.empty[i], 1);
    EXPECT_EQ(r.lse[i], -INFINITY);
  }
  EXPECT_EQ(seen(c, r, 3), range(0, 0));
  EXPECT_EQ(seen(c, r, 4), range(0, 1));
  c.alignment = Alignment::kTopLeft;
  r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 0), range(0, 0));
  for (int i = 1; i < 5; ++i) EXPECT_EQ(seen(c, r, i), range(0, 1)) << i;
}

TEST(ReferenceHostVisibility, DecodeBottomRightEqualsNonCausal) {
  KernelCase c = visibility_case(1, 9);
  c.causal = true;
  EXPECT_EQ(seen(c, host_attention(c, materialize(c)), 0), range(0, 8));
  c.alignment = Alignment::kTopLeft;
  EXPECT_EQ(seen(c, host_attention(c, materialize(c)), 0), range(0, 0));
}

TEST(ReferenceHostVisibility, SlidingWindows) {
  KernelCase c = visibility_case(6, 6);
  c.window = {2, 0};
  Result r = host_attention(c, materialize(c));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(seen(c, r, i), range(std::max(0, i - 2), i)) << i;
  c.window = {1, 1};
  r = host_attention(c, materialize(c));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(seen(c, r, i), range(std::max(0, i - 1), std::min(5, i + 1))) << i;
}

TEST(ReferenceHostVisibility, WindowWithBottomRightOffset) {
  KernelCase c = visibility_case(3, 10);
  c.window = {2, 0};
  const Result r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 0), range(5, 7));
  EXPECT_EQ(seen(c, r, 1), range(6, 8));
  EXPECT_EQ(seen(c, r, 2), range(7, 9));
}

TEST(ReferenceHostVisibility, MoreQueriesThanKeysWithWindows) {
  for (Window w : {Window{-1, 0}, Window{3, 0}}) {
    KernelCase c = visibility_case(4, 2);
    c.window = w;
    const Result r = host_attention(c, materialize(c));
    EXPECT_EQ(seen(c, r, 0), std::set<int>{});
    EXPECT_EQ(seen(c, r, 1), std::set<int>{});
    EXPECT_EQ(seen(c, r, 2), range(0, 0));
    EXPECT_EQ(seen(c, r, 3), range(0, 1));
  }
}

TEST(ReferenceHostVisibility, WindowOpenOnTheRightAndCausalOverridesRight) {
  KernelCase c = visibility_case(4, 4);
  c.window = {1, -1};  // (W, -1): unbounded on the right
  Result r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 2), range(1, 3));
  c.window = {-1, 2};  // (-1, W)
  r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 0), range(0, 2));
  c.causal = true;  // causal forces the right bound to 0
  r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 1), range(0, 1));
}

TEST(ReferenceHostVisibility, KvCacheWithLeftpad) {
  // cache_seqlens 5, S_new 2, Sq 2, leftpad 2, causal: keys are logical 2..6; query 0 sees 2..5, query 1 2..6.
  KernelCase c = visibility_case(2, 8);
  c.kv_cache = true;
  c.causal = true;
  c.seqs[0] = {.q_len = 2, .k_len = 8, .leftpad_k = 2, .cache_len = 5, .new_len = 2};
  const Result r = host_attention(c, materialize(c));
  EXPECT_EQ(seen(c, r, 0), range(2, 5));
  EXPECT_EQ(seen(c, r, 1), range(2, 6));
}

TEST(ReferenceHostVisibility, SequsedKAndPagingSelectTheSameKeys) {
  KernelCase c = visibility_case(1, 7);
  c.seqs[0].seqused_k = 4;
  EXPECT_EQ(seen(c, host_attention(c, materialize(c)), 0), range(0, 3));
  c.kv_storage = KvStorage::kPaged;
  c.paging.page_size = 3;
  c.paging.extra_pages = 2;
  c.paging.table_seed = 11;
  EXPECT_EQ(seen(c, host_attention(c, materialize(c)), 0), range(0, 3));
}

TEST(ReferenceHostVisibility, ZeroLengthKeysGiveEmptyRowsUnderEveryConvention) {
  KernelCase c = visibility_case(2, 0);
  const CaseTensors t = materialize(c);
  Result r = host_attention(c, t, EmptyRow::kZero);
  EXPECT_EQ(r.out[0], 0.0);
  r = host_attention(c, t, EmptyRow::kNaN);
  EXPECT_TRUE(std::isnan(r.out[0]));
  EXPECT_TRUE(std::isnan(r.lse[0]));
  r = host_attention(c, t, EmptyRow::kUniform);
  EXPECT_EQ(r.out[0], 0.0);  // no keys at all: nothing to average
}

TEST(ReferenceHostConventions, UniformEmptyRowIsTheMeanOfAllKeysOfTheSequence) {
  KernelCase c = visibility_case(5, 2);
  c.causal = true;  // rows 0..2 are empty
  const Result r = host_attention(c, materialize(c), EmptyRow::kUniform);
  EXPECT_EQ(r.out[0], 0.5);
  EXPECT_EQ(r.out[1], 0.5);
  EXPECT_EQ(r.out[2], 0.0);
}

// Query head h reads KV head h / (H / Hk): with H 6 and Hk 2, heads 0-2 read head 0, heads 3-5 head 1.
TEST(ReferenceHostGqa, HeadMappingIsDivisionNotModulo) {
  KernelCase c;
  c.heads = 6;
  c.kv_heads = 2;
  c.head_dim = 2;
  c.v_head_dim = 1;
  c.dtype = DType::kF32;
  c.seqs = {{.q_len = 1, .k_len = 1}};
  CaseTensors t = materialize(c);
  t.v.data = {10.0f, 20.0f};  // (1 key, 2 kv heads, dv 1)
  const Result r = host_attention(c, t);
  for (int h = 0; h < 6; ++h) EXPECT_EQ(r.out[h], h < 3 ? 10.0 : 20.0) << h;
}

// Hand-computed logits: d = 1, q = 1, keys 0, 1, 2, scale 1 -> softmax weights e^j / (1 + e + e^2).
KernelCase logit_case() {
  KernelCase c;
  c.head_dim = 1;
  c.v_head_dim = 3;
  c.dtype = DType::kF32;
  c.scale = 1.0;
  c.seqs = {{.q_len = 1, .k_len = 3}};
  return c;
}
CaseTensors logit_tensors(const KernelCase& c, std::vector<float> keys) {
  CaseTensors t = materialize(c);
  t.q.data = {1.0f};
  t.k.data = std::move(keys);
  t.v.data = {1, 0, 0, 0, 1, 0, 0, 0, 1};  // one-hot: out = softmax weights
  return t;
}

TEST(ReferenceHostIdentities, OneHotVReadsBackSoftmaxWeightsAndLse) {
  const KernelCase c = logit_case();
  const Result r = host_attention(c, logit_tensors(c, {0, 1, 2}));
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(r.out[0], 1 / z, 1e-15);
  EXPECT_NEAR(r.out[1], std::exp(1.0) / z, 1e-15);
  EXPECT_NEAR(r.out[2], std::exp(2.0) / z, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(z), 1e-14);
}

TEST(ReferenceHostIdentities, SoftcapSaturatesTheScaledLogitBeforeTheSoftmax) {
  KernelCase c = logit_case();
  c.softcap = 5.0;
  c.scale = 0.5;
  const Result r = host_attention(c, logit_tensors(c, {0, 10, 40}));
  // logits 0.5 * {0, 10, 40} = {0, 5, 20} -> 5 tanh({0, 1, 4})
  const double a = 0.0, b = 5 * std::tanh(1.0), d = 5 * std::tanh(4.0);
  const double z = std::exp(a) + std::exp(b) + std::exp(d);
  EXPECT_NEAR(r.out[0], std::exp(a) / z, 1e-15);
  EXPECT_NEAR(r.out[1], std::exp(b) / z, 1e-15);
  EXPECT_NEAR(r.out[2], std::exp(d) / z, 1e-15);
}

TEST(ReferenceHostIdentities, DefaultScaleIsOneOverSqrtHeadDim) {
  KernelCase c = logit_case();
  c.scale.reset();
  c.head_dim = 4;
  CaseTensors t = materialize(c);
  t.q.data = {1, 1, 1, 1};
  t.k.data = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0};  // dot products 0, 4, 0 -> logits 0, 2, 0
  t.v.data = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const Result r = host_attention(c, t);
  const double z = 2 + std::exp(2.0);
  EXPECT_NEAR(r.out[1], std::exp(2.0) / z, 1e-15);
}

TEST(ReferenceHostIdentities, OneVisibleKeyReturnsItsValueRow) {
  KernelCase c;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 8;
  c.v_head_dim = 5;
  c.dtype = DType::kBF16;
  c.causal = true;
  c.alignment = Alignment::kTopLeft;
  c.seqs = {{.q_len = 3, .k_len = 4}};
  c.data.seed = 3;
  const CaseTensors t = materialize(c);
  const Result r = host_attention(c, t);
  for (int h = 0; h < 2; ++h)
    for (int x = 0; x < 5; ++x) EXPECT_EQ(r.out[h * 5 + x], t.v.data[x]);  // row 0 sees key 0 only
}

TEST(ReferenceHostIdentities, ZeroQueryGivesTheMeanOfTheVisibleValues) {
  KernelCase c;
  c.head_dim = 8;
  c.v_head_dim = 3;
  c.dtype = DType::kF32;
  c.window = {1, 0};
  c.seqs = {{.q_len = 4, .k_len = 6}};
  c.data.q_scale = 0.0;
  c.data.seed = 9;
  const CaseTensors t = materialize(c);
  const Result r = host_attention(c, t);
  // off = 2; row 3 sees keys 4 and 5.
  for (int x = 0; x < 3; ++x)
    EXPECT_NEAR(r.out[3 * 3 + x], (static_cast<double>(t.v.data[4 * 3 + x]) + t.v.data[5 * 3 + x]) / 2, 1e-15);
}

TEST(ReferenceHostIdentities, PoisonOutsideTheSequencesNeverReachesTheOutput) {
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.v_head_dim = 16;
  c.causal = true;
  c.kv_cache = true;
  c.kv_storage = KvStorage::kPaged;
  c.paging = {.page_size = 3, .extra_pages = 2, .table_seed = 4};
  c.seqs = {{.q_len = 3, .k_len = 11, .leftpad_k = 2, .cache_len = 5, .new_len = 3},
            {.q_len = 1, .k_len = 4, .cache_len = 0, .new_len = 1}};
  c.data.seed = 17;
  const Result r = host_attention(c, materialize(c));
  for (double x : r.out) EXPECT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace flashcheck::reference
