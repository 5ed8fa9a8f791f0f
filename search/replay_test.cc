#include "search/replay.h"

#include <gtest/gtest.h>

namespace flashcheck {
namespace {

ReplayRecord record(VerdictKind got, std::string reason = "", std::optional<Expectation> want = std::nullopt) {
  ReplayRecord r;
  r.verdict.kind = got;
  r.verdict.reason = std::move(reason);
  if (want) {
    r.has_expectation = true;
    r.expected = *want;
  }
  judge(r);
  return r;
}

TEST(ReplayJudge, NoExpectationMeansPassOrUnsupported) {
  EXPECT_TRUE(record(VerdictKind::kPass).as_expected);
  const ReplayRecord u = record(VerdictKind::kUnsupported, "does not support softcap");
  EXPECT_TRUE(u.as_expected);
  EXPECT_EQ(u.outcome, "unsupported");
  EXPECT_FALSE(record(VerdictKind::kFail).as_expected);
  EXPECT_FALSE(record(VerdictKind::kCrash).as_expected);
}

TEST(ReplayJudge, ExpectedFailuresAreXfailAndTheirFixIsAnXpass) {
  Expectation crash{VerdictKind::kCrash, "signal 8", true, ""};
  const ReplayRecord x = record(VerdictKind::kCrash, "process killed by signal 8 (Floating point exception)", crash);
  EXPECT_TRUE(x.as_expected);
  EXPECT_EQ(x.outcome, "xfail");
  const ReplayRecord other = record(VerdictKind::kCrash, "process killed by signal 11", crash);
  EXPECT_FALSE(other.as_expected);  // a different crash is news
  const ReplayRecord fixed = record(VerdictKind::kPass, "", crash);
  EXPECT_FALSE(fixed.as_expected);
  EXPECT_EQ(fixed.outcome, "xpass");
}

}  // namespace
}  // namespace flashcheck
