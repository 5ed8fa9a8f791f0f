#include "campaign/merge_report.h"
#include "report/junit.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/wait.h>

#include "core/files.h"

extern char** environ;

namespace flashcheck {
namespace {

namespace fs = std::filesystem;

// tools/campaign_report.py: installed next to the executable (<prefix>/share/flashcheck), else in this
// build's source tree.
std::string report_script() {
  if (std::string installed = installed_path("share/flashcheck/campaign_report.py"); !installed.empty()) return installed;
  return std::string(FLASHCHECK_SOURCE_DIR) + "/tools/campaign_report.py";
}


}  // namespace

nlohmann::json merge_json(const MergeResult& m) {
  nlohmann::json campaigns = nlohmann::json::array();
  for (const MergedCampaign& c : m.campaigns)
    campaigns.push_back({{"dir", c.dir},
                         {"shard", fmt::format("{}/{}", c.spec.shard.index, c.spec.shard.count)},
                         {"seed", c.spec.seed},
                         {"cases_budget", c.spec.cases},
                         {"seconds_budget", c.spec.seconds},
                         {"chunks_done", c.chunks_done},
                         {"chunks_planned", c.chunks_planned ? nlohmann::json(*c.chunks_planned) : nlohmann::json()},
                         {"seconds_used", c.seconds_used},
                         {"sessions", c.sessions},
                         {"torn_lines", c.torn_lines}});
  nlohmann::json units = nlohmann::json::array();
  std::int64_t cases = 0, failures = 0, crashes = 0, findings = 0;
  for (const MergedUnit& u : m.units) {
    nlohmann::json j = to_json(u.report);
    for (std::size_t i = 0; i < u.report.findings.size(); ++i)
      j["findings"][i]["signature"] = failure_signature(u.report.property, u.report.findings[i]);
    j["stats"] = to_json(u.stats);
    j["required_coverage"] = u.required_coverage;
    units.push_back(std::move(j));
    cases += u.report.cases;
    failures += u.report.failures;
    crashes += u.report.crashes;
    findings += static_cast<std::int64_t>(u.report.findings.size());
  }
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerThroughput& w : m.workers) {
    nlohmann::json points = nlohmann::json::array();
    for (const ThroughputPoint& p : w.points) points.push_back({p.finished, p.cases, p.seconds});
    workers.push_back({{"dir", w.dir},
                       {"host", w.host},
                       {"device", w.device},
                       {"worker", w.worker},
                       {"cases", w.cases},
                       {"busy_seconds", w.busy_seconds},
                       {"cases_per_second", w.cases_per_second()},
                       {"chunks", points}});
  }
  return {{"format", "flashcheck-merge/1"},
          {"ok", m.ok()},
          {"totals", {{"cases", cases}, {"failures", failures}, {"crashes", crashes}, {"findings", findings}}},
          {"campaigns", campaigns},
          {"warnings", m.warnings},
          {"first_start", m.first_start},
          {"units", units},
          {"root_causes", to_json(m.root_causes)},
          {"workers", workers}};
}

std::string merge_markdown(const MergeResult& m) {
  std::int64_t cases = 0;
  for (const MergedUnit& u : m.units) cases += u.report.cases;
  std::string md = fmt::format("# flashcheck campaign merge: {}\n\n{} cases from {} campaign director{}.\n\n", m.ok() ? "PASS" : "FAIL",
                               cases, m.campaigns.size(), m.campaigns.size() == 1 ? "y" : "ies");
  for (const std::string& w : m.warnings) md += fmt::format("- **warning**: {}\n", w);
  if (!m.warnings.empty()) md += "\n";
  md += "| directory | shard | seed | budget | chunks done | sessions | seconds |\n|---|---|---|---|---|---|---|\n";
  for (const MergedCampaign& c : m.campaigns)
    md += fmt::format("| {} | {}/{} | {} | {} | {}{} | {} | {:.0f} |\n", c.dir, c.spec.shard.index, c.spec.shard.count, c.spec.seed,
                      c.spec.cases > 0 ? fmt::format("{} cases", c.spec.cases) : fmt::format("{:.0f} s", c.spec.seconds),
                      c.chunks_done, c.chunks_planned ? fmt::format(" of {}", *c.chunks_planned) : "", c.sessions, c.seconds_used);
  md += "\n## Kernels x properties\n\n| kernel | property | cases | failing cases | findings | crashes | worst err/bound | status |\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const MergedUnit& u : m.units) {
    const FuzzReport& r = u.report;
    if (!r.not_applicable.empty()) {
      md += fmt::format("| {} | {} | - | - | - | - | - | n/a: {} |\n", r.kernel, r.property, r.not_applicable);
      continue;
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.2f} | {} |\n", r.kernel, r.property, r.cases, r.failures,
                      r.findings.size(), r.crashes, r.worst_bound_use, r.ok() ? "ok" : "**FAIL**");
  }
  std::string close;
  for (const MergedUnit& u : m.units)
    if (u.report.worst_bound_use >= kCloseCallBoundUse && !u.report.closest_pass.empty())
      close += fmt::format("| {} | {} | {:.2f} | {} |\n", u.report.kernel, u.report.property, u.report.worst_bound_use,
                           u.report.closest_pass);
  if (!close.empty())
    md += fmt::format("\n## Closest passes (err/bound of at least {:.1f})\n\n| kernel | property | err/bound | case |\n"
                      "|---|---|---|---|\n{}",
                      kCloseCallBoundUse, close);
  for (const MergedUnit& u : m.units)
    if (u.report.not_applicable.empty() && !u.report.ok())
      md += fmt::format("\n### {} / {}\n\n```\n{}```\n", u.report.kernel, u.report.property, run_problems(u.report, "flashcheck"));
  if (!m.root_causes.empty()) {
    md += "\n## Root causes (one bug, one row)\n\n| | failing cases | kernels | properties | condition | smallest case | recorded in |\n"
          "|---|---|---|---|---|---|---|\n";
    for (const RootCause& c : m.root_causes)
      md += fmt::format("| {} | {} | {} | {} | {} | {}: {} | {} |\n", c.known_fixture.empty() ? "**new**" : "known", c.count,
                        fmt::join(c.kernels, ", "), fmt::join(c.properties, ", "), c.signature, c.smallest_kernel,
                        c.smallest_summary, c.known_fixture);
  }
  md += "\n## Workers\n\n| directory | host | device | cases | busy seconds | cases/s |\n|---|---|---|---|---|---|\n";
  for (const WorkerThroughput& w : m.workers)
    md += fmt::format("| {} | {} | {} | {} | {:.1f} | {:.1f} |\n", w.dir, w.host, w.device, w.cases, w.busy_seconds,
                      w.cases_per_second());
  return md;
}

JunitSuite merge_suite(const MergeResult& m) {
  JunitSuite suite{"flashcheck-campaign", 0, {}};
  for (const MergedUnit& u : m.units) {
    suite.seconds += u.report.seconds;
    suite.cases.push_back(junit_case(u.report, "campaign", "flashcheck"));
  }
  return suite;
}

std::string merge_junit(const MergeResult& m) { return junit_xml(merge_suite(m)); }

namespace {

bool merge_report(std::string_view head) { return head.find("\"format\": \"flashcheck-merge/") != std::string_view::npos; }
bool merge_summary(std::string_view head) { return head.rfind("# flashcheck campaign merge", 0) == 0; }
bool merge_junit_file(std::string_view head) { return head.find("<testsuite name=\"flashcheck-campaign\"") != std::string_view::npos; }

}  // namespace

void check_merge_outputs(const std::string& dir, bool force) {
  check_replaceable((fs::path(dir) / "report.json").string(), merge_report, force);
  check_replaceable((fs::path(dir) / "summary.md").string(), merge_summary, force);
  check_replaceable((fs::path(dir) / "junit.xml").string(), merge_junit_file, force);
}

void write_merge_files(const MergeResult& m, const std::string& dir, bool force) {
  ensure_output_dir(dir);
  check_merge_outputs(dir, force);
  write_file_atomic((fs::path(dir) / "report.json").string(),
                    merge_json(m).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write_file_atomic((fs::path(dir) / "summary.md").string(), merge_markdown(m));
  write_file_atomic((fs::path(dir) / "junit.xml").string(), merge_junit(m));
}

std::string write_merge_html(const std::string& dir) {
  const char* env_python = std::getenv("FLASHCHECK_PYTHON");
  const std::string python = env_python && *env_python ? env_python : FLASHCHECK_REPORT_PYTHON;
  const std::string script = report_script();
  if (!fs::exists(script)) return fmt::format("no report.html: {} is missing", script);
  const std::string note = (fs::path(dir) / "report-html.note").string();
  std::vector<std::string> args{python, script, dir, "--note", note};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = ::posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ); rc != 0)
    return fmt::format("no report.html: cannot run {}: {}", python, std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string why;
  if (std::ifstream in(note); in) std::getline(in, why);
  remove_file(note);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fmt::format("no report.html: {} {} failed (exit status {})", python, script, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return why;
}

}  // namespace flashcheck
