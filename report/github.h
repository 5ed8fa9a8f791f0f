// GitHub Actions from the same result model as JUnit (report/junit.h): one `::error` workflow command per failed
// case (the annotation GitHub shows on the run and, with a file, on the fixture), and a Markdown step summary.
// Commands print them when they run inside GitHub Actions (GITHUB_ACTIONS=true): annotations on stdout unless stdout
// carries --json, the summary appended to the file GITHUB_STEP_SUMMARY names.
#pragma once

#include <string>

#include "report/junit.h"

namespace flashcheck {

// "::error file=F,title=T::message%0Adetails" per failed case, escaped as GitHub's workflow commands require.
std::string github_annotations(const JunitSuite& suite);

// A Markdown section: the counts, then a row per failed case (its message and where to find it).
std::string markdown_summary(const JunitSuite& suite);

// Inside GitHub Actions: prints the annotations (when `stdout_is_free`) and appends the summary to
// $GITHUB_STEP_SUMMARY. Outside, does nothing. Never throws: CI decoration must not fail a run that did its job.
void publish_to_github(const JunitSuite& suite, bool stdout_is_free);

}  // namespace flashcheck
