// One bug, one row across runs: the same condition on two kernels and two properties is one root cause with the sum
// of its counts; different conditions stay apart; a cause a committed fixture records is labelled with it, by its
// reason_contains or by the features of its case, and only on the kernel it names.
#include "search/root_causes.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "search/coverage.h"

namespace flashcheck {
namespace {

Finding finding(VerdictKind kind, const std::string& reason, bool causal, std::int64_t count, std::string fixture = "") {
  Finding f;
  f.minimized.heads = 4;
  f.minimized.kv_heads = 1;
  f.minimized.causal = causal;
  f.minimized.seqs = {{.q_len = 2, .k_len = 3}};
  f.verdict.kind = kind;
  f.verdict.reason = reason;
  f.count = count;
  f.fixture = std::move(fixture);
  return f;
}

FuzzReport run(const std::string& kernel, const std::string& property, std::vector<Finding> findings) {
  FuzzReport r;
  r.kernel = kernel;
  r.property = property;
  r.findings = std::move(findings);
  return r;
}

TEST(RootCauses, OneConditionAcrossKernelsAndPropertiesIsOneRow) {
  const std::vector<RootCause> causes = root_causes(
      {run("cudnn-fwd", "grad-conformance", {finding(VerdictKind::kError, "cuDNN error: s_q = s_kv = 1 (case 3)", true, 5)}),
       run("sdpa-cudnn", "grad-gqa", {finding(VerdictKind::kError, "cuDNN error: s_q = s_kv = 1 (case 17)", false, 2),
                                      finding(VerdictKind::kFail, "max error 2 exceeds 0.1", true, 1)}),
       run("sdpa-cudnn", "conformance", {finding(VerdictKind::kFail, "max error 9 exceeds 0.2", true, 4)})},
      {});
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_EQ(causes[0].count, 7);  // largest first
  EXPECT_EQ(causes[0].kernels, (std::vector<std::string>{"cudnn-fwd", "sdpa-cudnn"}));
  EXPECT_EQ(causes[0].properties, (std::vector<std::string>{"grad-conformance", "grad-gqa"}));
  EXPECT_EQ(causes[1].count, 5);
  EXPECT_EQ(causes[1].properties, (std::vector<std::string>{"grad-gqa", "conformance"}));
  EXPECT_TRUE(causes[0].known_fixture.empty());
  EXPECT_NE(root_cause_lines(causes).find("2 root causes (0 known, 2 new)"), std::string::npos);
}

TEST(RootCauses, AKnownDefectIsLabelledByItsReasonOrItsFeaturesOnItsKernelOnly) {
  const std::vector<FuzzReport> runs = {
      run("cudnn-fwd", "grad-conformance", {finding(VerdictKind::kError, "cuDNN error: s_q = s_kv = 1", true, 5)}),
      run("mutant-x", "conformance", {finding(VerdictKind::kFail, "max error 9 exceeds 0.2", true, 4)})};
  KnownDefect by_reason{"fixtures/found/cudnn.json", "cudnn-fwd", VerdictKind::kError, "s_q = s_kv = 1", {}};
  Finding f = finding(VerdictKind::kFail, "", true, 1);
  KnownDefect by_features{"fixtures/found/x.json", "mutant-x", VerdictKind::kFail, "", classify(f.minimized)};
  std::sort(by_features.features.begin(), by_features.features.end());
  std::vector<RootCause> causes = root_causes(runs, {by_reason, by_features});
  EXPECT_EQ(causes[0].known_fixture, "fixtures/found/cudnn.json");
  EXPECT_EQ(causes[1].known_fixture, "fixtures/found/x.json");
  by_reason.kernel = "sdpa-cudnn";          // the same words recorded on another kernel
  by_features.features = {"causal-top-left"};  // other features
  causes = root_causes(runs, {by_reason, by_features});
  EXPECT_TRUE(causes[0].known_fixture.empty());
  EXPECT_TRUE(causes[1].known_fixture.empty());
}

TEST(RootCauses, TheCommittedCorpusYieldsKnownDefects) {
  const std::vector<KnownDefect> known = known_defects({"fixtures/found/cudnn-backward-sequence-length-one.json"});
  ASSERT_FALSE(known.empty());
  EXPECT_EQ(known[0].fixture, "fixtures/found/cudnn-backward-sequence-length-one.json");
}

}  // namespace
}  // namespace flashcheck
