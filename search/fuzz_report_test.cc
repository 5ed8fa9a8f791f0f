// One bug, one finding: errors group by their message (numbers blanked) whatever the case's features; failures and
// crashes by the features of their minimized case. And the closest passing case of a run, kept through merges.
#include "search/fuzz_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace flashcheck {
namespace {

Finding finding(VerdictKind kind, const std::string& reason, std::int64_t heads, bool causal) {
  Finding f;
  f.minimized.heads = f.minimized.kv_heads = heads;
  f.minimized.kv_heads = 1;
  f.minimized.causal = causal;
  f.minimized.seqs = {{.q_len = 2, .k_len = 3}};
  f.verdict.kind = kind;
  f.verdict.reason = reason;
  return f;
}

std::size_t findings_of(const std::vector<Finding>& all) {
  FuzzReport r;
  r.property = "integration";
  for (const Finding& f : all) add_finding(r, f, [](const Finding&) { return std::string(); });
  return r.findings.size();
}

TEST(FindingSignature, AnErrorIsItsMessageWhateverTheFeatures) {
  // GQA and causal against MQA and not: the same raise with other numbers in it.
  EXPECT_EQ(findings_of({finding(VerdictKind::kError, "cu_seqlens reach query row 3 and key row 3", 4, true),
                         finding(VerdictKind::kError, "cu_seqlens reach query row 17 and key row 9", 1, false)}),
            1u);
  EXPECT_EQ(findings_of({finding(VerdictKind::kError, "max(): Expected reduction dim", 4, true),
                         finding(VerdictKind::kError, "cu_seqlens reach query row 3", 4, true)}),
            2u);
}

TEST(FindingSignature, AFailureOrCrashIsItsFeatures) {
  for (VerdictKind kind : {VerdictKind::kFail, VerdictKind::kCrash}) {
    EXPECT_EQ(findings_of({finding(kind, "max error 1.2 exceeds 0.03", 4, true), finding(kind, "max error 1.2 exceeds 0.03", 4, false)}),
              2u);
    EXPECT_EQ(findings_of({finding(kind, "max error 1.2 exceeds 0.03", 4, true), finding(kind, "max error 7 exceeds 0.5", 4, true)}),
              1u);
  }
}

TEST(FindingSignature, WhatTheShrinkerMadeSmallDoesNotSplitABug) {
  // The same failing condition (causal, bottom-right) minimized once to one query of d 1 in fp16, once to two rows of
  // d 8 in bf16 at batch 2: one finding. The condition itself (causal or not) still tells bugs apart.
  Finding a = finding(VerdictKind::kFail, "max error 1 exceeds 0.1", 1, true);
  a.minimized.head_dim = a.minimized.v_head_dim = 1;
  a.minimized.dtype = DType::kF16;
  a.minimized.seqs = {{.q_len = 1, .k_len = 2}};
  Finding b = finding(VerdictKind::kFail, "max error 3 exceeds 0.1", 1, true);
  b.minimized.head_dim = b.minimized.v_head_dim = 8;
  b.minimized.seqs = {{.q_len = 2, .k_len = 3}, {.q_len = 2, .k_len = 3}};
  EXPECT_EQ(cause_signature(a), cause_signature(b));
  EXPECT_EQ(findings_of({a, b}), 1u);
  Finding c = b;
  c.minimized.causal = false;
  EXPECT_EQ(findings_of({a, c}), 2u);
}

TEST(FindingSignature, TheCountOfAGroupedErrorIsEveryCaseItStandsFor) {
  FuzzReport r;
  r.property = "integration";
  for (int i = 0; i < 3; ++i)
    add_finding(r, finding(VerdictKind::kError, "row " + std::to_string(i), 1 + i, i % 2 == 0), [](const Finding&) { return ""; });
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].count, 3);
}

// The closest call of a run is the passing case with the largest bound use; merging chunks keeps the one that came
// nearest, and the report's JSON carries it (a campaign keeps failing cases only).
TEST(ClosestPass, MergingKeepsTheCaseThatCameNearestTheBound) {
  FuzzReport a, b, c;
  a.worst_bound_use = 0.4, a.closest_pass = "b1 q3 h2/2 d16 fp16";
  b.worst_bound_use = 0.97, b.closest_pass = "b2 q1 p4 h4/1 d32 bf16 causal";
  c.worst_bound_use = 0.6, c.closest_pass = "b1 q7 h4/4 d64 bf16";
  FuzzReport all;
  for (const FuzzReport* part : {&a, &b, &c}) merge_reports(all, *part, false);
  EXPECT_DOUBLE_EQ(all.worst_bound_use, 0.97);
  EXPECT_EQ(all.closest_pass, "b2 q1 p4 h4/1 d32 bf16 causal");
  all.kernel = "k", all.property = "conformance";
  const FuzzReport back = fuzz_report_from_json(to_json(all));
  EXPECT_EQ(back.closest_pass, all.closest_pass);
  EXPECT_DOUBLE_EQ(back.worst_bound_use, 0.97);
}

}  // namespace
}  // namespace flashcheck
