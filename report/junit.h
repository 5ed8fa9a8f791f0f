// JUnit XML, the one renderer every command's --junit and report folder share (gate, merge, replay, fuzz): a small
// result model and its rendering through pugixml. Kernel messages reach these files verbatim; what XML 1.0 cannot
// carry at all (control characters, bytes that are not UTF-8) is replaced (core/xml.h xml_text), the library escapes
// the rest.
#pragma once

#include <string>
#include <vector>

#include "search/fuzz_report.h"
#include "search/replay.h"

namespace flashcheck {

struct JunitCase {
  enum class Kind { kPassed, kFailed, kSkipped };
  std::string classname, name;
  double seconds = 0;
  Kind kind = Kind::kPassed;
  std::string message;  // the failure's or skip's one line
  std::string text;     // the failure's details
  std::string file;     // the fixture it concerns (a replayed file, a run's first found fixture), or ""
};

struct JunitSuite {
  std::string name;  // "flashcheck-gate", "flashcheck-campaign", ...
  double seconds = 0;
  std::vector<JunitCase> cases;
};

// <testsuites><testsuite name tests failures skipped time>...: what CI systems read.
std::string junit_xml(const JunitSuite& suite);

// One replayed case x kernel: failed unless as the fixture expects, skipped when unsupported.
JunitCase junit_case(const ReplayRecord& r);
// One property run (`classname` prefix: "property" in the gate, "campaign" in a merge, "fuzz"); a failure's text is
// run_problems(r, command).
JunitCase junit_case(const FuzzReport& r, const std::string& classname, const std::string& command);

// What a failed run found, one finding per line with its count and replay command (`command` invokes flashcheck),
// then the coverage it missed.
std::string run_problems(const FuzzReport& r, const std::string& command);

}  // namespace flashcheck
