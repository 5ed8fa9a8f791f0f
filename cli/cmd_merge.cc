#include <fmt/format.h>

#include "report/github.h"
#include "cli/commands.h"
#include "campaign/merge.h"
#include "campaign/merge_report.h"

namespace flashcheck::cli {

int run_merge(const MergeOptions& o) {
  MergeResult m;
  try {
    m = merge_campaigns(o.dirs);
    std::vector<FuzzReport> reports;
    for (const MergedUnit& u : m.units) reports.push_back(u.report);
    m.root_causes = root_causes(reports, load_known_defects(o.known, "merge"));
  } catch (const MergeError& e) {
    fmt::print(stderr, "flashcheck merge: {}\n", e.what());
    return kExitUsage;
  }
  try {
    write_merge_files(m, o.out, o.force);
    if (!o.junit.empty()) write_junit_file(o.junit, merge_junit(m));
  } catch (const std::exception& e) {
    fmt::print(stderr, "flashcheck merge: cannot write {}: {}\n", o.out, e.what());
    return kExitUsage;
  }
  fmt::print("{}", merge_markdown(m));
  publish_to_github(merge_suite(m), true);
  std::string files = "summary.md, report.json, junit.xml";
  if (o.html) {
    const std::string why = write_merge_html(o.out);
    if (why.rfind("no report.html", 0) != 0) files += ", report.html";
    if (!why.empty()) fmt::print(stderr, "flashcheck merge: {}\n", why);
  }
  fmt::print("\nwrote {} in {}\n", files, o.out);
  return m.ok() ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
