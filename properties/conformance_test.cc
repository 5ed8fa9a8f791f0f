// Conformance of the CPU kernels on hand-picked cases, and of the mutant that misaligns the causal
// diagonal: the #466 shape must fail it with a clear verdict.
#include "properties/conformance.h"

#include <cmath>
#include <gtest/gtest.h>

#include "core/geometry.h"

#include "kernels/kernel.h"

namespace flashcheck {
namespace {

Kernel& kernel(const char* name) {
  Kernel* k = builtin_registry().find(name);
  if (!k) throw std::runtime_error(std::string("no kernel ") + name);
  return *k;
}

KernelCase causal_case(std::int64_t lq, std::int64_t lk, Alignment a, DType dt = DType::kBF16) {
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.v_head_dim = 32;
  c.dtype = dt;
  c.causal = true;
  c.alignment = a;
  c.seqs = {{.q_len = lq, .k_len = lk}};
  c.data.seed = 466;
  return c;
}

Verdict check(const char* name, const KernelCase& c) { return check_conformance(kernel(name), c, materialize(c)); }

TEST(Conformance, TiledCpuPassesCausalWithMoreKeysAndMoreQueries) {
  for (auto [lq, lk] : {std::pair{4, 8}, std::pair{8, 4}, std::pair{70, 133}, std::pair{1, 65}}) {
    for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
      const Verdict v = check("tiled-cpu", causal_case(lq, lk, Alignment::kBottomRight, dt));
      EXPECT_EQ(v.kind, VerdictKind::kPass) << lq << "x" << lk << " " << to_string(dt) << ": " << describe(v);
      ASSERT_TRUE(v.cmp.has_value());
      EXPECT_TRUE(v.cmp->lse_checked);
    }
  }
}

TEST(Conformance, TorchCpuKernelsPassBothAlignments) {
  for (const char* name : {"cpu-flash", "sdpa-math-cpu"})
    for (Alignment a : {Alignment::kTopLeft, Alignment::kBottomRight}) {
      const Verdict v = check(name, causal_case(4, 8, a));
      EXPECT_EQ(v.kind, VerdictKind::kPass) << name << ": " << describe(v);
    }
}

TEST(Conformance, TiledCpuDeclaresTopLeftUnsupported) {
  const Verdict v = check("tiled-cpu", causal_case(4, 8, Alignment::kTopLeft));
  EXPECT_EQ(v.kind, VerdictKind::kUnsupported);
  EXPECT_EQ(v.reason, "does not support top-left causal/window alignment");
}

// flash-attention#466: queries 5..8 against keys 1..8 were treated as queries 1..4.
TEST(Conformance, TopLeftMutantFailsThe466ShapeWithAClearVerdict) {
  const Verdict v = check("mutant-top-left-causal", causal_case(4, 8, Alignment::kBottomRight));
  ASSERT_EQ(v.kind, VerdictKind::kFail);
  ASSERT_TRUE(v.cmp.has_value());
  EXPECT_GT(v.cmp->err_max, 10 * v.cmp->bound);
  EXPECT_GT(v.cmp->mismatches, 0);
  EXPECT_EQ(v.cmp->worst.b, 0);
  EXPECT_NE(v.reason.find("max error"), std::string::npos) << v.reason;
  EXPECT_NE(describe(v).find("worst (b0,h"), std::string::npos) << describe(v);
}

TEST(Conformance, NoMaskNoDifferenceForTheMutant) {
  KernelCase c = causal_case(4, 4, Alignment::kBottomRight);  // square: both alignments coincide
  EXPECT_EQ(check("mutant-top-left-causal", c).kind, VerdictKind::kPass);
}

// Buffers longer than the sequences (issue 15): NaN-poisoned rows past the last sequence in Q, the output
// and K/V change nothing for a kernel that stays inside cu_seqlens, and its output's slack rows are not
// required; a kernel whose last sequence runs to the end of the K buffer reads the poison and fails, on
// exactly the cases with slack.
TEST(Conformance, SlackRowsChangeNothingAndCatchAReadPastTheEnd) {
  KernelCase c = causal_case(5, 9, Alignment::kBottomRight, DType::kF16);
  c.seqs.push_back({.q_len = 3, .k_len = 4});
  const CaseGeometry g = geometry(c);
  KernelCase slack = c;
  slack.slack = {.q_rows = 3, .kv_rows = 7};
  const CaseTensors t = materialize(slack);
  ASSERT_EQ(t.q.shape[0], g.total_q + 3);
  ASSERT_EQ(t.k.shape[0], g.kv_rows + 7);
  EXPECT_TRUE(std::isnan(t.q.data.back()));
  EXPECT_TRUE(std::isnan(t.k.data.back()));
  EXPECT_EQ(check("tiled-cpu", slack).kind, VerdictKind::kPass) << describe(check("tiled-cpu", slack));
  EXPECT_EQ(check("mutant-read-past-end", c).kind, VerdictKind::kPass);
  const Verdict v = check("mutant-read-past-end", slack);
  EXPECT_EQ(v.kind, VerdictKind::kFail) << describe(v);
  // Kernels whose API takes only what the sequences need say so.
  EXPECT_EQ(check("sdpa-math-cpu", slack).kind, VerdictKind::kUnsupported);
}

TEST(Conformance, KernelErrorsBecomeErrorVerdicts) {
  KernelCase c = causal_case(4, 8, Alignment::kTopLeft);
  c.head_dim = 32;
  c.v_head_dim = 16;  // cpu-flash requires equal head sizes; run it anyway
  const Verdict v = check_conformance(kernel("cpu-flash"), c, materialize(c), {.ignore_contract = true});
  EXPECT_EQ(v.kind, VerdictKind::kError);
  EXPECT_NE(v.reason.find("head size"), std::string::npos) << v.reason;
}

}  // namespace
}  // namespace flashcheck
