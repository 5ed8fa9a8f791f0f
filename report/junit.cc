#include "report/junit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pugixml.hpp>
#include <sstream>

#include "core/xml.h"

namespace flashcheck {

std::string junit_xml(const JunitSuite& suite) {
  pugi::xml_document doc;
  pugi::xml_node decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  pugi::xml_node ts = doc.append_child("testsuites").append_child("testsuite");
  int failures = 0, skipped = 0;
  for (const JunitCase& c : suite.cases) {
    failures += c.kind == JunitCase::Kind::kFailed;
    skipped += c.kind == JunitCase::Kind::kSkipped;
  }
  ts.append_attribute("name") = xml_text(suite.name).c_str();
  ts.append_attribute("tests") = static_cast<unsigned long long>(suite.cases.size());
  ts.append_attribute("failures") = failures;
  ts.append_attribute("skipped") = skipped;
  ts.append_attribute("time") = fmt::format("{:.3f}", suite.seconds).c_str();
  for (const JunitCase& c : suite.cases) {
    pugi::xml_node tc = ts.append_child("testcase");
    tc.append_attribute("classname") = xml_text(c.classname).c_str();
    tc.append_attribute("name") = xml_text(c.name).c_str();
    tc.append_attribute("time") = fmt::format("{:.3f}", c.seconds).c_str();
    if (c.kind == JunitCase::Kind::kFailed) {
      pugi::xml_node f = tc.append_child("failure");
      f.append_attribute("message") = xml_text(c.message).c_str();
      f.text().set(xml_text(c.text).c_str());
    } else if (c.kind == JunitCase::Kind::kSkipped) {
      tc.append_child("skipped").append_attribute("message") = xml_text(c.message).c_str();
    }
  }
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
  return out.str();
}

JunitCase junit_case(const ReplayRecord& r) {
  JunitCase c;
  c.classname = "replay." + r.verdict.kernel;
  c.name = fmt::format("{}#{}{}", r.fixture, r.model_case ? "m" : "", r.case_index);
  c.file = r.fixture;
  c.seconds = r.verdict.seconds;
  if (!r.as_expected) {
    c.kind = JunitCase::Kind::kFailed;
    c.message = r.outcome;
    c.text = describe(r.verdict);
  } else if (r.outcome == "unsupported") {
    c.kind = JunitCase::Kind::kSkipped;
    c.message = r.verdict.reason;
  }
  return c;
}

std::string run_problems(const FuzzReport& r, const std::string& command) {
  std::string p;
  for (const Finding& f : r.findings)
    p += fmt::format("{} x{}: {} -- {}\n", to_string(f.verdict.kind), f.count,
                     f.model_case ? summary(*f.model_case) : summary(f.minimized), f.verdict.reason) +
         (f.fixture.empty() ? "" : fmt::format("  replay: {} replay {} --kernel {}\n", command, f.fixture, r.kernel));
  if (!r.coverage_missing.empty()) p += fmt::format("coverage missing: {}\n", fmt::join(r.coverage_missing, " "));
  return p;
}

JunitCase junit_case(const FuzzReport& r, const std::string& classname, const std::string& command) {
  JunitCase c;
  c.classname = classname + "." + r.kernel;
  c.name = r.property;
  for (const Finding& f : r.findings)
    if (c.file.empty()) c.file = f.fixture;
  c.seconds = r.seconds;
  if (!r.not_applicable.empty()) {
    c.kind = JunitCase::Kind::kSkipped;
    c.message = r.not_applicable;
  } else if (!r.ok()) {
    c.kind = JunitCase::Kind::kFailed;
    c.message = report_line(r);
    c.text = run_problems(r, command);
  }
  return c;
}

}  // namespace flashcheck
