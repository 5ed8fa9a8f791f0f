#include "report/github.h"

#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <string_view>

#include "core/xml.h"

namespace flashcheck {
namespace {

// GitHub's workflow-command escaping (actions/toolkit, core/src/command.ts): data escapes %, CR and LF;
// property values also ':' and ','. Control characters that would break the line are made printable first.
std::string escape_data(std::string_view s) {
  std::string out;
  for (char ch : xml_text(std::string(s))) {
    if (ch == '%') out += "%25";
    else if (ch == '\r') out += "%0D";
    else if (ch == '\n') out += "%0A";
    else out += ch;
  }
  return out;
}
std::string escape_property(std::string_view s) {
  std::string out;
  for (char ch : escape_data(s)) {
    if (ch == ':') out += "%3A";
    else if (ch == ',') out += "%2C";
    else out += ch;
  }
  return out;
}

// Markdown table cells: one line, no pipes.
std::string cell(std::string_view s) {
  std::string out;
  for (char ch : xml_text(std::string(s))) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n' || ch == '\r') out += ' ';
    else out += ch;
  }
  return out;
}

}  // namespace

std::string github_annotations(const JunitSuite& suite) {
  std::string out;
  for (const JunitCase& c : suite.cases) {
    if (c.kind != JunitCase::Kind::kFailed) continue;
    std::string props = c.file.empty() ? "" : "file=" + escape_property(c.file) + ",";
    props += "title=" + escape_property(fmt::format("{} {}: {}", c.classname, c.name, c.message));
    out += fmt::format("::error {}::{}\n", props, escape_data(c.text.empty() ? c.message : c.text));
  }
  return out;
}

std::string markdown_summary(const JunitSuite& suite) {
  int failed = 0, skipped = 0;
  for (const JunitCase& c : suite.cases) {
    failed += c.kind == JunitCase::Kind::kFailed;
    skipped += c.kind == JunitCase::Kind::kSkipped;
  }
  const int passed = static_cast<int>(suite.cases.size()) - failed - skipped;
  std::string out = fmt::format("### {}: {}\n\n| passed | failed | skipped | seconds |\n|---|---|---|---|\n"
                                "| {} | {} | {} | {:.1f} |\n",
                                suite.name, failed ? "FAIL" : "PASS", passed, failed, skipped, suite.seconds);
  if (failed) {
    out += "\n| failed | what | where |\n|---|---|---|\n";
    for (const JunitCase& c : suite.cases)
      if (c.kind == JunitCase::Kind::kFailed)
        out += fmt::format("| {} {} | {} | {} |\n", cell(c.classname), cell(c.name), cell(c.message),
                           c.file.empty() ? "" : "`" + cell(c.file) + "`");
  }
  return out + "\n";
}

void publish_to_github(const JunitSuite& suite, bool stdout_is_free) {
  const char* actions = std::getenv("GITHUB_ACTIONS");
  if (!actions || std::string_view(actions) != "true") return;
  if (stdout_is_free) std::fputs(github_annotations(suite).c_str(), stdout);
  if (const char* path = std::getenv("GITHUB_STEP_SUMMARY"); path && *path) {
    if (std::FILE* f = std::fopen(path, "a")) {  // appended, as every step's tools share the file
      const std::string md = markdown_summary(suite);
      std::fwrite(md.data(), 1, md.size(), f);
      std::fclose(f);
    }
  }
}

}  // namespace flashcheck
