#include "oracles/hf_eager.h"

#include <cmath>
#include <gtest/gtest.h>

#include "reference/host/attention.h"

namespace flashcheck::hf {
namespace {

ModelCase random_case(DType dt) {
  ModelCase m;
  m.dtype = dt;
  m.batch = 2;
  m.q_len = 5;
  m.past = 3;
  m.use_cache = true;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.attention_mask = {{0, 0, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}};
  m.data.seed = 11;
  return m;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b, const EagerMask& mask, std::int64_t row_elems) {
  double mx = 0;
  for (std::size_t x = 0; x < a.size(); ++x) {
    const std::size_t cell = x / static_cast<std::size_t>(row_elems);
    if (mask.rows[cell] == RowFlag::kNoKey) continue;
    mx = std::max(mx, std::fabs(a[x] - b[x]));
  }
  return mx;
}

TEST(HfEager, Fp32MatchesTheExactMaskedAttention) {
  ModelCase m = random_case(DType::kF32);
  m.softcap = 5.0;
  const ModelTensors t = materialize(m);
  const EagerResult e = eager_attention(m, t);
  ASSERT_EQ(e.out.shape, (std::vector<std::int64_t>{2, 5, 4, 16}));
  EXPECT_LT(max_abs_diff(e.out.data, exact_attention(m, t, e.mask).out, e.mask, m.heads * m.head_dim), 1e-5);
}

TEST(HfEager, Bf16RoundsLikeTransformersButStaysNearTheExactValue) {
  const ModelCase m = random_case(DType::kBF16);
  const ModelTensors t = materialize(m);
  const EagerResult e = eager_attention(m, t);
  for (float x : e.out.data) EXPECT_EQ(x, round_float(DType::kBF16, x));
  const double err = max_abs_diff(e.out.data, exact_attention(m, t, e.mask).out, e.mask, m.heads * m.head_dim);
  EXPECT_GT(err, 0.0);   // bf16 logits and probabilities do round
  EXPECT_LT(err, 0.05);  // values are O(1): a few bf16 ulps
}

// Tiny fp32 case by hand: q0 = e0, q1 = e1, k = v = identity, scale 1, causal.
TEST(HfEager, HandComputedCausalExample) {
  ModelCase m;
  m.dtype = DType::kF32;
  m.q_len = 2;
  m.head_dim = 2;
  m.scale = 1.0;
  ModelTensors t;
  t.q = HostTensor({1, 2, 1, 2}, 0.0f);
  t.k = HostTensor({1, 2, 1, 2}, 0.0f);
  t.v = HostTensor({1, 2, 1, 2}, 0.0f);
  t.q.data = {1, 0, 0, 1};
  t.k.data = {1, 0, 0, 1};
  t.v.data = {1, 0, 0, 1};
  const EagerResult e = eager_attention(m, t);
  EXPECT_FLOAT_EQ(e.out.data[0], 1.0f);  // row 0 sees key 0 only
  EXPECT_FLOAT_EQ(e.out.data[1], 0.0f);
  const double w1 = std::exp(1.0) / (1.0 + std::exp(1.0));  // row 1: logits (0, 1)
  EXPECT_NEAR(e.out.data[2], 1.0 - w1, 1e-7);
  EXPECT_NEAR(e.out.data[3], w1, 1e-7);
}

// A11: a row that sees no key gets finfo.min on every logit, so its softmax is uniform over all columns.
TEST(HfEager, RowWithoutKeysAveragesVOverEveryColumn) {
  ModelCase m = random_case(DType::kF32);
  m.attention_mask = {{0, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1, 1}};
  const ModelTensors t = materialize(m);
  const EagerResult e = eager_attention(m, t);
  EXPECT_EQ(e.mask.row(0, 0), RowFlag::kNoKey);
  const std::int64_t Lk = m.kv_len(), D = m.head_dim;
  for (std::int64_t h = 0; h < m.heads; ++h)
    for (std::int64_t d = 0; d < D; ++d) {
      double mean = 0;
      for (std::int64_t j = 0; j < Lk; ++j) mean += t.v.data[static_cast<std::size_t>((j * m.kv_heads + h / 2) * D + d)];
      mean /= static_cast<double>(Lk);
      EXPECT_NEAR(e.out.data[static_cast<std::size_t>(h * D + d)], mean, 1e-5);
    }
}

// Under a plain causal mask, eager's allowed keys are those of the kernel-level causal case (one
// sequence per batch row, bottom-right alignment: query i at position P + i sees keys 0 .. P + i). The
// model-level exact attention must then be the kernel-level reference, value for value and sensitivity
// for sensitivity: both go through reference/host/exact_row.h.
TEST(HfEager, ExactAttentionIsTheKernelReferenceUnderAPlainCausalMask) {
  ModelCase m = random_case(DType::kBF16);
  m.attention_mask.reset();
  m.softcap = 7.0;
  const ModelTensors t = materialize(m);
  const EagerMask mask = eager_mask(m);
  for (RowFlag f : mask.rows) ASSERT_EQ(f, RowFlag::kComparable);

  KernelCase c;
  c.dtype = m.dtype;
  c.heads = m.heads;
  c.kv_heads = m.kv_heads;
  c.head_dim = c.v_head_dim = m.head_dim;
  c.causal = true;
  c.alignment = Alignment::kBottomRight;
  c.softcap = *m.softcap;
  c.scale = m.softmax_scale();
  c.data.poison = false;
  for (std::int64_t b = 0; b < m.batch; ++b) c.seqs.push_back({.q_len = m.q_len, .k_len = m.kv_len()});
  ASSERT_TRUE(validate(c).empty());
  const std::int64_t Lq = m.q_len, Lk = m.kv_len(), H = m.heads, Hk = m.kv_heads, D = m.head_dim;
  const CaseTensors ct = materialize(c, [&](TensorId id, std::int64_t b, std::int64_t pos, std::int64_t h, std::int64_t x) {
    if (id == TensorId::kQ) return t.q.data[static_cast<std::size_t>(((b * Lq + pos) * H + h) * D + x)];
    const HostTensor& kv = id == TensorId::kK ? t.k : t.v;
    return kv.data[static_cast<std::size_t>(((b * Lk + pos) * Hk + h) * D + x)];
  });

  const ExactAttention exact = exact_attention(m, t, mask);
  const AttentionResult ref = reference::host_attention(c, ct);
  ASSERT_EQ(exact.out.size(), ref.out.size());
  for (std::size_t x = 0; x < ref.out.size(); ++x) {
    ASSERT_EQ(exact.out[x], ref.out[x]) << x;
    ASSERT_EQ(exact.noise[x], ref.noise[x]) << x;
  }
  for (double n : ref.noise) EXPECT_GT(n, 0.0);  // the comparison is not one of zeros
}

}  // namespace
}  // namespace flashcheck::hf
