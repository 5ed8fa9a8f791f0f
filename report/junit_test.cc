// The JUnit renderer read back by a real XML parser (pugixml): well-formed whatever a kernel's message holds, the
// counts CI systems show, and every message as it was but for what XML 1.0 cannot carry.
#include "report/junit.h"

#include <gtest/gtest.h>
#include <pugixml.hpp>

namespace flashcheck {
namespace {

const std::string kHostile = "\x1b[31m<fail>\x01 & \"quoted\" 'x' ]]> \xff\xfe caf\xc3\xa9";
const std::string kCleaned = "?[31m<fail>? & \"quoted\" 'x' ]]> ?? caf\xc3\xa9";

JunitSuite suite() {
  JunitSuite s{"flashcheck-test", 2.5, {}};
  s.cases.push_back({"replay.k", "a.json#0", 0.1, JunitCase::Kind::kPassed, "", ""});
  s.cases.push_back({"property.k", kHostile, 0.2, JunitCase::Kind::kFailed, kHostile, kHostile + "\nsecond line"});
  s.cases.push_back({"property.k2", "p", 0.0, JunitCase::Kind::kSkipped, "n/a: " + kHostile, ""});
  return s;
}

TEST(Junit, AParserReadsBackEveryMessageAndTheCounts) {
  const std::string xml = junit_xml(suite());
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_string(xml.c_str());
  ASSERT_TRUE(parsed) << parsed.description() << " at " << parsed.offset << " in\n" << xml;
  const pugi::xml_node ts = doc.child("testsuites").child("testsuite");
  EXPECT_STREQ(ts.attribute("name").value(), "flashcheck-test");
  EXPECT_EQ(ts.attribute("tests").as_int(), 3);
  EXPECT_EQ(ts.attribute("failures").as_int(), 1);
  EXPECT_EQ(ts.attribute("skipped").as_int(), 1);
  EXPECT_STREQ(ts.attribute("time").value(), "2.500");
  const pugi::xml_node failed = ts.find_child_by_attribute("testcase", "classname", "property.k");
  EXPECT_EQ(std::string(failed.attribute("name").value()), kCleaned);
  EXPECT_EQ(std::string(failed.child("failure").attribute("message").value()), kCleaned);
  EXPECT_EQ(std::string(failed.child("failure").text().get()), kCleaned + "\nsecond line");
  const pugi::xml_node skipped = ts.find_child_by_attribute("testcase", "classname", "property.k2");
  EXPECT_EQ(std::string(skipped.child("skipped").attribute("message").value()), "n/a: " + kCleaned);
  EXPECT_FALSE(ts.find_child_by_attribute("testcase", "classname", "replay.k").child("failure"));
}

TEST(Junit, AReplayRecordFailsOnlyWhenNotAsExpected) {
  ReplayRecord r;
  r.fixture = "f.json";
  r.case_index = 2;
  r.verdict.kernel = "k";
  r.outcome = "xfail";
  EXPECT_EQ(junit_case(r).kind, JunitCase::Kind::kPassed);
  r.as_expected = false;
  r.outcome = "xpass";
  const JunitCase c = junit_case(r);
  EXPECT_EQ(c.kind, JunitCase::Kind::kFailed);
  EXPECT_EQ(c.message, "xpass");
  EXPECT_EQ(c.name, "f.json#2");
  r.as_expected = true;
  r.outcome = "unsupported";
  EXPECT_EQ(junit_case(r).kind, JunitCase::Kind::kSkipped);
}

}  // namespace
}  // namespace flashcheck
