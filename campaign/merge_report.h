// The renderings of a campaign merge (campaign/merge.h): report.json (everything, and what the HTML report's
// plots are drawn from), summary.md, junit.xml, and report.html, which tools/campaign_report.py draws with
// matplotlib into one self-contained file (the plots are embedded PNGs: it opens without network).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "campaign/merge.h"
#include "report/junit.h"

namespace flashcheck {

nlohmann::json merge_json(const MergeResult& m);
std::string merge_markdown(const MergeResult& m);
JunitSuite merge_suite(const MergeResult& m);  // the report layer's model (report/junit.h)
std::string merge_junit(const MergeResult& m);

// Refuses (OutputError) when `dir` holds a report.json, summary.md or junit.xml merge did not write, or a link or other
// non-file in their place (core/files.h check_replaceable), unless `force`.
void check_merge_outputs(const std::string& dir, bool force);
// Writes report.json, summary.md and junit.xml into `dir`, each atomically (a full disk leaves the previous ones),
// after the same check.
void write_merge_files(const MergeResult& m, const std::string& dir, bool force);

// Runs tools/campaign_report.py on dir/report.json to write dir/report.html with the build's Python (or the
// FLASHCHECK_PYTHON of the environment). Returns "" on success, else why there is no report.html or why it
// has no plots (matplotlib missing): the script still writes the tables then.
std::string write_merge_html(const std::string& dir);

}  // namespace flashcheck
