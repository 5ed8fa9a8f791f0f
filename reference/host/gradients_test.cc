// Tests of the reference gradients against the one thing they must agree with without a second implementation:
// finite differences of the fp64 forward reference, element by element, under every switch of a case (both causal
// alignments, windows, softcap, GQA/MQA, seqused_k, leftpad, varlen, slack, dv != d, rows without keys). Then the
// zeros the reference promises, and the low-precision baseline's closeness to it.
#include "reference/host/gradients.h"

#include <cmath>
#include <gtest/gtest.h>

#include "core/geometry.h"
#include "reference/host/attention.h"

namespace flashcheck::reference {
namespace {

// A small fp32 backward case: one sequence of 3 queries over 5 keys, 2 query heads on 1 KV head, d 3, dv 2.
KernelCase small_case() {
  KernelCase c;
  c.dtype = DType::kF32;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 3;
  c.v_head_dim = 2;
  c.seqs = {{.q_len = 3, .k_len = 5}};
  c.data.seed = 11;
  c.dout = DoutRecipe{};
  return c;
}

// <dO, out> of the fp64 forward over the rows that see a key: the loss whose gradients host_gradients gives.
double loss(const KernelCase& c, const CaseTensors& t) {
  const AttentionResult r = host_attention(c, t);
  const CaseGeometry g = geometry(c);
  double sum = 0;
  for (std::int64_t row = 0; row < g.total_q; ++row)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      if (r.empty[static_cast<std::size_t>(row * c.heads + h)]) continue;
      for (std::int64_t x = 0; x < c.v_head_dim; ++x) {
        const std::size_t at = static_cast<std::size_t>((row * c.heads + h) * c.v_head_dim + x);
        sum += static_cast<double>(t.dout.data[at]) * r.out[at];
      }
    }
  return sum;
}

// Every element of q, k and v: the central difference of the loss against the reference gradient. Elements the
// case does not use must have gradient 0 (and a difference of 0: the forward ignores them).
void expect_gradients_match_differences(const KernelCase& c) {
  ASSERT_TRUE(validate(c).empty());
  KernelCase clean = c;
  clean.data.poison = false;  // finite values in unused slots, so that perturbing them is harmless
  CaseTensors t = materialize(clean);
  const GradientResult g = host_gradients(clean, t);
  struct Part {
    const char* name;
    HostTensor* x;
    const std::vector<double>* grad;
  };
  for (const Part& p : {Part{"dq", &t.q, &g.dq}, Part{"dk", &t.k, &g.dk}, Part{"dv", &t.v, &g.dv}}) {
    ASSERT_EQ(p.x->data.size(), p.grad->size()) << p.name;
    for (std::size_t i = 0; i < p.x->data.size(); ++i) {
      const float x0 = p.x->data[i];
      const float h = 1.0f / 1024;
      const float xp = x0 + h, xm = x0 - h;
      p.x->data[i] = xp;
      const double up = loss(clean, t);
      p.x->data[i] = xm;
      const double down = loss(clean, t);
      p.x->data[i] = x0;
      const double fd = (up - down) / (static_cast<double>(xp) - static_cast<double>(xm));  // the step fp32 realized
      EXPECT_NEAR((*p.grad)[i], fd, 1e-5 * (1 + std::fabs(fd))) << p.name << "[" << i << "] of " << summary(c);
    }
  }
}

TEST(ReferenceGradients, MatchFiniteDifferencesPlain) { expect_gradients_match_differences(small_case()); }

TEST(ReferenceGradients, MatchFiniteDifferencesCausalBothAlignments) {
  KernelCase c = small_case();
  c.causal = true;
  expect_gradients_match_differences(c);
  c.alignment = Alignment::kTopLeft;
  expect_gradients_match_differences(c);
}

TEST(ReferenceGradients, MatchFiniteDifferencesWindowAndEmptyRows) {
  KernelCase c = small_case();
  c.seqs = {{.q_len = 5, .k_len = 3}};
  c.causal = true;  // bottom-right with more queries than keys: the first two rows see no key
  c.window = {1, 0};
  ASSERT_TRUE(has_empty_rows(c));
  expect_gradients_match_differences(c);
}

TEST(ReferenceGradients, MatchFiniteDifferencesSoftcap) {
  KernelCase c = small_case();
  c.softcap = 2.0;  // logits up to several times the cap: tanh's derivative matters
  c.data.q_scale = 4.0;
  expect_gradients_match_differences(c);
}

TEST(ReferenceGradients, MatchFiniteDifferencesVarlenSequsedLeftpadSlack) {
  KernelCase c = small_case();
  c.heads = 4;
  c.kv_heads = 2;
  c.seqs = {{.q_len = 2, .k_len = 6, .seqused_k = 5, .leftpad_k = 1}, {.q_len = 3, .k_len = 2}};
  c.slack = {.q_rows = 2, .kv_rows = 3};
  c.causal = true;
  expect_gradients_match_differences(c);
}

TEST(ReferenceGradients, UnusedKeysSlackAndEmptyRowsAreZero) {
  KernelCase c = small_case();
  c.seqs = {{.q_len = 4, .k_len = 6, .seqused_k = 3, .leftpad_k = 1}};
  c.slack = {.q_rows = 1, .kv_rows = 2};
  c.causal = true;  // 4 queries over 2 keys: rows 0 and 1 see none
  const CaseTensors t = materialize(c);
  const GradientResult g = host_gradients(c, t);
  const std::int64_t qw = c.heads * c.head_dim, kw = c.kv_heads * c.head_dim;
  for (std::int64_t row : {0, 1, 4})  // two empty rows, one slack row
    for (std::int64_t x = 0; x < qw; ++x) EXPECT_EQ(g.dq[static_cast<std::size_t>(row * qw + x)], 0.0) << row;
  for (std::int64_t row : {0, 3, 4, 5, 6, 7})  // before leftpad, past seqused_k, slack
    for (std::int64_t x = 0; x < kw; ++x) EXPECT_EQ(g.dk[static_cast<std::size_t>(row * kw + x)], 0.0) << row;
  double used = 0;
  for (std::int64_t x = 0; x < 2 * kw; ++x) used += std::fabs(g.dk[static_cast<std::size_t>(kw + x)]);
  EXPECT_GT(used, 0.0);
}

TEST(ReferenceGradients, GqaSumsTheGroupsGradients) {
  KernelCase grouped = small_case();  // 2 query heads on 1 KV head
  KernelCase repeated = grouped;
  repeated.kv_heads = 2;
  const CaseTensors t = materialize(grouped);
  // The repeated case holds KV head 0 twice.
  CaseTensors t2 = materialize(repeated, [&](TensorId id, std::int64_t b, std::int64_t p, std::int64_t h, std::int64_t ch) {
    return logical_values(grouped, t)(id, b, p, query_side(id) ? h : 0, ch);
  });
  const GradientResult a = host_gradients(grouped, t), b = host_gradients(repeated, t2);
  for (std::size_t i = 0; i < a.dq.size(); ++i) EXPECT_DOUBLE_EQ(a.dq[i], b.dq[i]);
  for (std::int64_t row = 0; row < 5; ++row)
    for (std::int64_t x = 0; x < 3; ++x)
      EXPECT_NEAR(a.dk[static_cast<std::size_t>(row * 3 + x)],
                  b.dk[static_cast<std::size_t>((row * 2) * 3 + x)] + b.dk[static_cast<std::size_t>((row * 2 + 1) * 3 + x)], 1e-12);
}

TEST(ReferenceGradients, DoutRecipesShapeTheGradients) {
  KernelCase c = small_case();
  c.dout = DoutRecipe{DoutKind::kOneHot, 2.0};
  CaseTensors t = materialize(c);
  // One-hot: cell (row i, head h) is 2 * e_((i + h) mod dv).
  EXPECT_EQ(t.dout.data[0], 2.0f);
  EXPECT_EQ(t.dout.data[1], 0.0f);
  EXPECT_EQ(t.dout.data[2], 0.0f);
  EXPECT_EQ(t.dout.data[3], 2.0f);
  // Zero rows: a quarter of the cells or so, over a larger case; their rows contribute nothing.
  c.dout = DoutRecipe{DoutKind::kZeroRows, 1.0};
  c.seqs = {{.q_len = 200, .k_len = 4}};
  t = materialize(c);
  int zero = 0;
  for (std::int64_t cell = 0; cell < 200 * c.heads; ++cell)
    zero += t.dout.data[static_cast<std::size_t>(cell * 2)] == 0.0f && t.dout.data[static_cast<std::size_t>(cell * 2 + 1)] == 0.0f;
  EXPECT_GT(zero, 60);
  EXPECT_LT(zero, 140);
}

TEST(ReferenceGradients, BaselineIsTheReferenceRoundedInItsDtype) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    KernelCase c = small_case();
    c.dtype = dt;
    c.seqs = {{.q_len = 17, .k_len = 23}};
    c.softcap = dt == DType::kF32 ? 0.0 : 5.0;
    const CaseTensors t = materialize(c);
    const GradientResult ref = host_gradients(c, t), base = low_precision_gradients(c, t);
    // A few roundings of the dtype per element, relative to the gradients' scale.
    double scale = 0, worst = 0;
    for (const auto* p : {&ref.dq, &ref.dk, &ref.dv})
      for (double x : *p) scale = std::max(scale, std::fabs(x));
    for (auto [r, b] : {std::pair{&ref.dq, &base.dq}, std::pair{&ref.dk, &base.dk}, std::pair{&ref.dv, &base.dv}})
      for (std::size_t i = 0; i < r->size(); ++i) worst = std::max(worst, std::fabs((*r)[i] - (*b)[i]));
    const double ulp = dt == DType::kF32 ? 0x1.0p-23 : dt == DType::kBF16 ? 0x1.0p-7 : 0x1.0p-10;
    EXPECT_GT(scale, 0.0);
    EXPECT_LT(worst, 16 * ulp * scale) << to_string(dt);
    if (dt != DType::kF32) {
      EXPECT_GT(worst, 0.0) << "a low-precision baseline that is exact measures nothing";
    }
  }
}

}  // namespace
}  // namespace flashcheck::reference
