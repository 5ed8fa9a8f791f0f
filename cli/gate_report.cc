#include "cli/gate_report.h"
#include "cli/report.h"

#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/xml.h"
#include "core/files.h"

namespace flashcheck::cli {
namespace {

std::string run_problem(const FuzzReport& r) {
  std::string p;
  for (const Finding& f : r.findings)
    p += fmt::format("{}: {} -- {}\n", to_string(f.verdict.kind), f.model_case ? summary(*f.model_case) : summary(f.minimized), f.verdict.reason) +
         (f.fixture.empty() ? "" : fmt::format("  replay: {} replay {} --kernel {}\n", command_name(), f.fixture, r.kernel));
  if (!r.coverage_missing.empty()) {
    p += "coverage missing:";
    for (const std::string& m : r.coverage_missing) p += " " + m;
    p += "\n";
  }
  return p;
}

}  // namespace


std::string gate_markdown(const GateResult& g) {
  std::string md = fmt::format("# flashcheck gate: {}\n\nseed {}, {} cases per kernel and property, {:.0f} s\n\n",
                               g.ok() ? "PASS" : "FAIL", g.seed, g.cases_per_run, g.seconds);
  int unexpected = 0, xfail = 0, unsupported = 0, pass = 0;
  for (const ReplayRecord& r : g.replay) {
    unexpected += !r.as_expected;
    xfail += r.outcome == "xfail";
    unsupported += r.outcome == "unsupported";
    pass += r.outcome == "pass";
  }
  md += fmt::format("## Fixture corpus\n\n{} case-kernel runs: {} pass, {} expected failures (known bugs), {} unsupported, "
                    "{} unexpected.\n\n",
                    g.replay.size(), pass, xfail, unsupported, unexpected);
  for (const ReplayRecord& r : g.replay)
    if (!r.as_expected)
      md += fmt::format("- **{}** {} `{}#{}{}`: {}\n", r.outcome, r.verdict.kernel, r.fixture, r.model_case ? "m" : "",
                        r.case_index, r.verdict.reason);
  md += "\n## Properties\n\n| kernel | property | cases | failures | worst ratio | worst err/bound | unsupported | reasons | status |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  for (const FuzzReport& r : g.runs) {
    if (!r.not_applicable.empty()) {
      md += fmt::format("| {} | {} | - | - | - | - | - | {} | n/a |\n", r.kernel, r.property, r.not_applicable);
      continue;
    }
    std::string reasons;
    for (const auto& [why, n] : r.unsupported_reasons) reasons += fmt::format("{}{} x{}", reasons.empty() ? "" : "; ", why, n);
    md += fmt::format("| {} | {} | {} | {} | {:.3g} | {:.2f} | {} | {} | {} |\n", r.kernel, r.property, r.cases,
                      r.findings.size() + (r.findings.empty() ? r.crashes : 0), r.worst_ratio, r.worst_bound_use, r.unsupported,
                      reasons.empty() ? "-" : reasons, r.ok() ? "ok" : "**FAIL**");
  }
  for (const FuzzReport& r : g.runs)
    if (r.not_applicable.empty() && !r.ok()) md += fmt::format("\n### {} / {}\n\n```\n{}```\n", r.kernel, r.property, run_problem(r));
  if (g.ran_mutants) md += "\n## Mutants\n\n" + mutant_markdown(g.mutants);
  return md;
}

nlohmann::json gate_json(const GateResult& g) {
  nlohmann::json runs = nlohmann::json::array();
  for (const FuzzReport& r : g.runs) runs.push_back(to_json(r));
  nlohmann::json replay = nlohmann::json::array();
  for (const ReplayRecord& r : g.replay)
    replay.push_back({{"fixture", r.fixture}, {"case", r.case_index}, {"model_case", r.model_case}, {"kernel", r.verdict.kernel},
                      {"outcome", r.outcome}, {"as_expected", r.as_expected}, {"verdict", to_json(r.verdict)}});
  return {{"format", "flashcheck-gate/1"}, {"ok", g.ok()}, {"seed", g.seed},   {"cases_per_run", g.cases_per_run}, {"seconds", g.seconds},
          {"replay", replay}, {"runs", runs}, {"mutants", to_json(g.mutants)}};
}

std::string gate_junit(const GateResult& g) {
  std::string cases;
  int tests = 0, failures = 0;
  for (const ReplayRecord& r : g.replay) {
    ++tests;
    cases += fmt::format("  <testcase classname=\"replay.{}\" name=\"{}#{}{}\" time=\"{:.3f}\">", xml_escape(r.verdict.kernel),
                         xml_escape(r.fixture), r.model_case ? "m" : "", r.case_index, r.verdict.seconds);
    if (!r.as_expected) {
      ++failures;
      cases += fmt::format("<failure message=\"{}\">{}</failure>", xml_escape(r.outcome), xml_escape(describe(r.verdict)));
    } else if (r.outcome == "unsupported") {
      cases += fmt::format("<skipped message=\"{}\"/>", xml_escape(r.verdict.reason));
    }
    cases += "</testcase>\n";
  }
  for (const FuzzReport& r : g.runs) {
    ++tests;
    cases += fmt::format("  <testcase classname=\"property.{}\" name=\"{}\" time=\"{:.3f}\">", xml_escape(r.kernel),
                         xml_escape(r.property), r.seconds);
    if (!r.not_applicable.empty()) {
      cases += fmt::format("<skipped message=\"{}\"/>", xml_escape(r.not_applicable));
    } else if (!r.ok()) {
      ++failures;
      cases += fmt::format("<failure message=\"{}\">{}</failure>", xml_escape(gate_line(r)), xml_escape(run_problem(r)));
    }
    cases += "</testcase>\n";
  }
  for (const MutantRow& m : g.mutants) {
    ++tests;
    cases += fmt::format("  <testcase classname=\"mutants\" name=\"{}\" time=\"{:.3f}\">", xml_escape(m.mutant), m.seconds);
    if (!m.killed()) {
      ++failures;
      cases += fmt::format("<failure message=\"survived\">{} survived every property</failure>", xml_escape(m.mutant));
    }
    cases += "</testcase>\n";
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"flashcheck-gate\" "
                     "tests=\"{}\" failures=\"{}\" time=\"{:.3f}\">\n{}</testsuite>\n</testsuites>\n",
                     tests, failures, g.seconds, cases);
}

namespace {

// What the gate's own files begin with (report.json before it had "format": its first key).
bool gate_report(std::string_view head) {
  return head.find("\"format\": \"flashcheck-gate/") != std::string_view::npos || head.rfind("{\n  \"cases_per_run\":", 0) == 0;
}
bool gate_summary(std::string_view head) { return head.rfind("# flashcheck gate", 0) == 0; }
bool gate_junit_file(std::string_view head) { return head.find("<testsuite name=\"flashcheck-gate\"") != std::string_view::npos; }

}  // namespace

void check_gate_outputs(const std::string& dir, bool force) {
  const std::filesystem::path d(dir);
  check_replaceable((d / "report.json").string(), gate_report, force);
  check_replaceable((d / "junit.xml").string(), gate_junit_file, force);
  check_replaceable((d / "summary.md").string(), gate_summary, force);
}

void write_gate_files(const GateResult& g, const std::string& dir, bool force) {
  // The gate's own reports, regenerated by every run: replaced, each atomically; a user's file of the same name is not.
  ensure_output_dir(dir);
  check_gate_outputs(dir, force);
  const std::filesystem::path d(dir);
  write_file_atomic((d / "report.json").string(),
                    gate_json(g).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write_file_atomic((d / "junit.xml").string(), gate_junit(g));
  write_file_atomic((d / "summary.md").string(), gate_markdown(g));
}

}  // namespace flashcheck::cli
