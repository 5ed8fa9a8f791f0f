// GitHub Actions annotations and the Markdown summary from the report model: one `::error` line per failed case,
// escaped so that no message can end the command early or forge another, and a summary with the right counts.
#include "report/github.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

#include "core/test_temp_dir.h"

namespace flashcheck {
namespace {

JunitSuite suite() {
  JunitSuite s{"flashcheck-replay", 1.25, {}};
  s.cases.push_back({"replay.tiled-cpu", "a.json#0", 0.1, JunitCase::Kind::kPassed, "", "", "fixtures/a.json"});
  s.cases.push_back({"replay.mutant,x", "b.json#1", 0.2, JunitCase::Kind::kFailed, "fail: 100% off",
                     "line one\r\nline two ::error ::forged", "fixtures/b:c,d.json"});
  s.cases.push_back({"replay.k2", "c.json#0", 0.0, JunitCase::Kind::kSkipped, "unsupported | top-left", "", ""});
  return s;
}

TEST(GithubAnnotations, OneEscapedErrorLinePerFailedCase) {
  const std::string a = github_annotations(suite());
  EXPECT_EQ(a,
            "::error file=fixtures/b%3Ac%2Cd.json,title=replay.mutant%2Cx b.json#1%3A fail%3A 100%25 off"
            "::line one%0D%0Aline two ::error ::forged\n");
  // A multi-line message stays one command: the only newline is the terminator.
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), 1);
}

TEST(GithubAnnotations, NothingWhenEverythingPassedOrWasSkipped) {
  JunitSuite s = suite();
  s.cases.erase(s.cases.begin() + 1);
  EXPECT_EQ(github_annotations(s), "");
}

TEST(MarkdownSummary, CountsAndAFailedRowWithItsFixture) {
  const std::string md = markdown_summary(suite());
  EXPECT_NE(md.find("### flashcheck-replay: FAIL"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | 1 | 1 | 1.2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| replay.mutant,x b.json#1 | fail: 100% off | `fixtures/b:c,d.json` |"), std::string::npos) << md;
  JunitSuite ok = suite();
  ok.cases[1].kind = JunitCase::Kind::kPassed;
  EXPECT_NE(markdown_summary(ok).find(": PASS"), std::string::npos);
}

TEST(PublishToGithub, AppendsTheSummaryOnlyInsideActions) {
  const testing::TempDir dir("github");
  const std::string path = (dir.path / "summary.md").string();
  ::setenv("GITHUB_STEP_SUMMARY", path.c_str(), 1);
  ::unsetenv("GITHUB_ACTIONS");
  publish_to_github(suite(), false);
  EXPECT_FALSE(std::ifstream(path).good());
  ::setenv("GITHUB_ACTIONS", "true", 1);
  publish_to_github(suite(), false);
  publish_to_github(suite(), false);
  std::stringstream got;
  got << std::ifstream(path).rdbuf();
  EXPECT_EQ(got.str(), markdown_summary(suite()) + markdown_summary(suite()));
  ::unsetenv("GITHUB_ACTIONS");
  ::unsetenv("GITHUB_STEP_SUMMARY");
}

}  // namespace
}  // namespace flashcheck
