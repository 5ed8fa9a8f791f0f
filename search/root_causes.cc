#include "search/root_causes.h"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/fixture.h"
#include "search/coverage.h"
#include "search/replay.h"

namespace flashcheck {
namespace {

void add_unique(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

bool matches(const KnownDefect& d, const RootCause& c, const std::vector<std::string>& features) {
  if (d.kind != c.kind || std::find(c.kernels.begin(), c.kernels.end(), d.kernel) == c.kernels.end()) return false;
  if (!d.reason_contains.empty()) return c.reason.find(d.reason_contains) != std::string::npos;
  return !features.empty() && d.features == features;
}

}  // namespace

std::vector<KnownDefect> known_defects(const std::vector<std::string>& paths) {
  std::vector<KnownDefect> out;
  for (const Fixture& fx : load_fixtures(paths))
    for (const FixtureCase& fc : fx.cases)
      for (const auto& [kernel, e] : fc.expect) {
        if (e.verdict == VerdictKind::kPass || e.verdict == VerdictKind::kUnsupported) continue;
        std::vector<std::string> features = classify(fc.kcase);
        std::sort(features.begin(), features.end());
        out.push_back({fx.path, kernel, e.verdict, e.reason_contains, std::move(features)});
      }
  return out;
}

std::vector<RootCause> root_causes(const std::vector<FuzzReport>& reports, const std::vector<KnownDefect>& known) {
  struct Group {
    RootCause cause;
    std::vector<std::string> features;  // of the smallest kernel-level case, sorted
    std::int64_t smallest_size = -1;
  };
  std::vector<Group> groups;
  for (const FuzzReport& r : reports)
    for (const Finding& f : r.findings) {
      const std::string sig = cause_signature(f);
      auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.cause.signature == sig; });
      if (g == groups.end()) {
        groups.push_back({});
        g = std::prev(groups.end());
        g->cause.signature = sig;
        g->cause.kind = f.verdict.kind;
      }
      RootCause& c = g->cause;
      add_unique(c.kernels, r.kernel);
      add_unique(c.properties, r.property);
      c.count += f.count;
      const std::int64_t size = case_size(f);
      if (g->smallest_size < 0 || size < g->smallest_size) {
        g->smallest_size = size;
        c.reason = f.verdict.reason;
        c.smallest_kernel = r.kernel;
        c.smallest_summary = f.model_case ? summary(*f.model_case) : summary(f.minimized);
        c.smallest_fixture = f.fixture;
        g->features.clear();
        if (!f.model_case) {
          g->features = classify(f.minimized);
          std::sort(g->features.begin(), g->features.end());
        }
      }
    }
  std::vector<RootCause> out;
  for (Group& g : groups) {
    for (const KnownDefect& d : known)
      if (matches(d, g.cause, g.features)) {
        g.cause.known_fixture = d.fixture;
        break;
      }
    out.push_back(std::move(g.cause));
  }
  std::stable_sort(out.begin(), out.end(), [](const RootCause& a, const RootCause& b) { return a.count > b.count; });
  return out;
}

std::string root_cause_lines(const std::vector<RootCause>& causes) {
  if (causes.empty()) return "";
  const auto known = std::count_if(causes.begin(), causes.end(), [](const RootCause& c) { return !c.known_fixture.empty(); });
  std::string s = fmt::format("{} root cause{} ({} known, {} new):\n", causes.size(), causes.size() == 1 ? "" : "s",
                              known, static_cast<std::int64_t>(causes.size()) - known);
  for (const RootCause& c : causes)
    s += fmt::format("  {:<5} x{} on {} ({}): {} -- smallest on {}: {}\n", c.known_fixture.empty() ? "NEW" : "known",
                     c.count, fmt::join(c.kernels, ","), fmt::join(c.properties, ","), c.signature, c.smallest_kernel,
                     c.smallest_summary) +
         (c.known_fixture.empty() ? "" : fmt::format("        recorded in {}\n", c.known_fixture));
  return s;
}

nlohmann::json to_json(const std::vector<RootCause>& causes) {
  nlohmann::json a = nlohmann::json::array();
  for (const RootCause& c : causes)
    a.push_back({{"signature", c.signature},
                 {"verdict", to_string(c.kind)},
                 {"reason", c.reason},
                 {"kernels", c.kernels},
                 {"properties", c.properties},
                 {"count", c.count},
                 {"smallest", {{"kernel", c.smallest_kernel}, {"summary", c.smallest_summary}, {"fixture", c.smallest_fixture}}},
                 {"known_fixture", c.known_fixture.empty() ? nlohmann::json() : nlohmann::json(c.known_fixture)}});
  return a;
}

}  // namespace flashcheck
