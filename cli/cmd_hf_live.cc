// `flashcheck hf-live --python PATH`: the transformers installed for that interpreter, checked for real. The model
// cases (the fixtures' and generated ones) go to tools/hf_live/live.py as an export directory; it runs the
// release's eager attention (the truth), its flash-attention path on a real kernel and its SDPA path, and judges
// each with the integration rule. Every failure that is not a documented divergence of the release's profile is
// shrunk here (search/model_shrink.h, each round judged by the release again), saved as a fixture under
// OUT/found and reported like a fuzz finding. The release's profile (core/hf_profiles.h) is run on the shrunk case
// too, so the report says whether the harness's model of that release reproduces what the release did.
// With --backward the worker also judges the gradients of the training-shaped cases ("<path>-backward") and a
// tiny model's training step ("model-backward"); a backward whose forward already fails is counted, not shrunk again.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <regex>
#include <set>

#include "cli/commands.h"
#include "cli/export_cases.h"
#include "cli/project_files.h"
#include "cli/python_worker.h"
#include "core/files.h"
#include "cli/report.h"
#include "core/error.h"
#include "core/fixture.h"
#include "kernels/kernel.h"
#include "oracles/hf_divergences.h"
#include "properties/integration.h"
#include "search/coverage.h"
#include "search/fuzz_report.h"
#include "search/model_shrink.h"

#ifndef FLASHCHECK_SOURCE_DIR
#define FLASHCHECK_SOURCE_DIR "."
#endif

namespace flashcheck::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// live.py: --script, else installed with the executable, else the working directory's or this build's source tree.
std::string find_script(const std::string& given) {
  return !given.empty() ? given : find_project_file("share/flashcheck/hf_live/live.py", "tools/hf_live/live.py");
}

// What makes two failures of one path the same: the class and the reason with its numbers blanked.
std::string failure_key(const json& r) {
  static const std::regex numbers("[-+]?[0-9][0-9.eE+-]*");
  return fmt::format("{}|{}|{}", r.value("class", ""), r.value("verdict", ""),
                     std::regex_replace(r.value("reason", ""), numbers, "#"));
}

VerdictKind kind_of(const json& r) {
  const std::string v = r.value("verdict", "");
  if (v == "pass") return VerdictKind::kPass;
  if (v == "fail") return VerdictKind::kFail;
  if (v == "unsupported") return VerdictKind::kUnsupported;
  return VerdictKind::kError;
}

// The exception text without its type ("RuntimeError: max(): ..." -> "max(): ..."): what a fixture expects.
std::string exception_text(const std::string& reason) {
  const auto colon = reason.find(": ");
  return colon == std::string::npos ? reason : reason.substr(colon + 2);
}

class LiveRun {
 public:
  LiveRun(const HfLiveOptions& o, PythonWorker& worker, std::string version, std::string backend)
      : o_(o), worker_(worker), version_(std::move(version)), backend_(std::move(backend)),
        choice_(choose(o, version_)), profile_(choice_.profile) {}

  // --profile, else the release's own (core/hf_profiles.h profile_choice_for_release).
  static hf::ProfileChoice choose(const HfLiveOptions& o, const std::string& version) {
    if (o.profile.empty()) return hf::profile_choice_for_release(version);
    const std::optional<hf::Profile> p = hf::parse_profile(o.profile);
    return {p, true, fmt::format("given by --profile; {}", hf::profile_choice_for_release(version).why)};
  }

  std::optional<hf::Profile> profile() const { return profile_; }
  const hf::ProfileChoice& choice() const { return choice_; }
  const std::string& version() const { return version_; }

  // Judges the cases in one request: one result per case, or nullopt with the worker's error printed. With
  // `model_backward` (and --backward) the reply's tiny-model training step is kept for model_backward().
  std::optional<json> judge(const std::vector<NamedModelCase>& cases, const std::string& dir, bool model_backward = false) {
    fs::remove_all(dir);
    write_export(dir, cases, profile_.value_or(hf::Profile::kHfMain));
    json request = {{"dir", dir}, {"paths", o_.paths}};
    if (o_.backward) {
      request["backward"] = true;
      request["model_backward"] = model_backward;
    }
    const std::optional<json> reply = worker_.request(request);
    if (!reply) {
      fmt::print(stderr, "flashcheck hf-live: {}\n", worker_.error());
      return std::nullopt;
    }
    if (reply->contains("error")) {
      fmt::print(stderr, "flashcheck hf-live: the worker failed: {}\n{}\n", reply->value("error", ""), reply->value("trace", ""));
      return std::nullopt;
    }
    const json& results = reply->at("results");
    if (results.size() != cases.size()) {
      fmt::print(stderr, "flashcheck hf-live: {} results for {} cases\n", results.size(), cases.size());
      return std::nullopt;
    }
    if (model_backward && reply->contains("model_backward")) model_backward_ = reply->at("model_backward");
    return results;
  }

  // The tiny-model training step of the first request (an object; empty when it was not asked for).
  const json& model_backward() const { return model_backward_; }

  // The documented divergence this failure is, when the release's profile documents them (flash path only).
  std::optional<hf::Divergence> known(const std::string& path, const ModelCase& m) const {
    if (path != "flash" || !profile_ || !hf::profile_spec(*profile_).documented_divergences) return std::nullopt;
    return hf::known_divergence(m);
  }

  Finding shrink(const std::string& path, const ModelCase& m, const json& first, std::int64_t index) {
    const std::string key = failure_key(first);
    json last = first;
    const ShrinkOutcome s = shrink_model_case(
        m,
        [&](const std::vector<ModelCase>& batch) -> std::optional<std::size_t> {
          std::vector<NamedModelCase> named;
          for (std::size_t i = 0; i < batch.size(); ++i) named.emplace_back(fmt::format("shrink-{}", i), batch[i]);
          const std::optional<json> res = judge(named, (fs::path(o_.out) / "shrink").string());
          if (!res) return std::nullopt;
          for (std::size_t i = 0; i < batch.size(); ++i) {
            const json& paths = (*res)[i].value("paths", json::object());
            if (!paths.contains(path)) continue;
            if (failure_key(paths.at(path)) == key && !known(path, batch[i])) {
              last = paths.at(path);
              return i;
            }
          }
          return std::nullopt;
        },
        o_.shrink_rounds);
    Finding f;
    f.model_case = s.smallest;
    f.case_index = index;
    f.shrink_steps = s.steps;
    f.shrink_attempts = s.attempts;
    f.shrink_budget_exhausted = s.budget_exhausted;
    f.verdict.kind = kind_of(last);
    f.verdict.property = property(path);
    f.verdict.kernel = kernel_label();
    f.verdict.reason = fmt::format("[{}] {}", last.value("class", "?"), last.value("reason", ""));
    return f;
  }

  // OUT/found/<hash>.json: the shrunk case, expecting on the release's profile what the release did (flash path,
  // forward or backward).
  std::string save(const std::string& path, const Finding& f, std::string& profile_note) {
    Fixture fx;
    const ModelCase& m = *f.model_case;
    const bool backward = path.ends_with("-backward");
    const std::string forward = backward ? path.substr(0, path.size() - std::string_view("-backward").size()) : path;
    fx.path = (fs::path(o_.out) / "found" / (content_hash(m) + ".json")).string();
    fx.title = fmt::format("transformers {}, {} path: {}", version_, path, f.verdict.reason.substr(0, 120));
    fx.description = fmt::format(
        "Found by `flashcheck hf-live` on the installed transformers {} (kernel {}): its {} path {} this case while its "
        "eager attention ran. {}",
        version_, backend_, path,
        f.verdict.kind == VerdictKind::kError ? "raised on" : backward ? "returned wrong gradients for" : "returned wrong rows for",
        profile_ ? fmt::format("The expectation is keyed by {}, the profile of that release.", hf::to_string(*profile_))
                 : "No profile models this release.");
    fx.property = !backward ? "integration" : forward == "sdpa" ? "integration-sdpa-backward" : "integration-backward";
    fx.found_by = fmt::format("flashcheck hf-live --python {} (transformers {})", o_.python, version_);
    fx.replay = fmt::format("flashcheck replay {}", fx.path);
    ModelFixtureCase mc;
    mc.mcase = m;
    mc.note = fmt::format("transformers {}: {}", version_, f.verdict.reason);
    if (profile_ && forward == "flash") {
      fx.profiles = {std::string(hf::to_string(*profile_))};
      Expectation e;
      e.verdict = f.verdict.kind;
      const std::string reason = f.verdict.reason.substr(f.verdict.reason.find("] ") + 2);
      if (e.verdict == VerdictKind::kError) e.reason_contains = exception_text(reason);
      e.why = fmt::format("transformers {} itself: {}", version_, f.verdict.reason);
      Kernel* k = builtin_registry().find("tiled-cpu");
      const IntegrationResult model =
          backward ? check_integration_backward(*profile_, *k, m, hf::HfPath::kFlash) : check_integration(*profile_, *k, m);
      // The profile reproduces an error by the part of its message every run shares (an IndexError's first out-of-range
      // index depends on the gather's order): where the release's message holds the profile's, expect the shared part.
      std::string modelled = model.verdict.reason;
      if (modelled.starts_with(kTransformersRaises)) modelled.erase(0, kTransformersRaises.size());
      if (e.verdict == VerdictKind::kError && model.verdict.kind == VerdictKind::kError && !modelled.empty() &&
          e.reason_contains.find(modelled) != std::string::npos)
        e.reason_contains = modelled;
      const bool same = model.verdict.kind == e.verdict &&
                        (e.reason_contains.empty() || model.verdict.reason.find(e.reason_contains) != std::string::npos);
      profile_note = fmt::format("profile {} {} it ({}: {})", hf::to_string(*profile_), same ? "reproduces" : "DOES NOT reproduce",
                                 to_string(model.verdict.kind), model.verdict.reason.empty() ? "pass" : model.verdict.reason);
      mc.expect[std::string(hf::to_string(*profile_))] = e;
    } else {
      profile_note = forward == "flash" ? "no profile models this release" : "the profiles model the flash path only";
      fx.description += " The profiles model the flash path only: replay checks that path on this case.";
      if (profile_) fx.profiles = {std::string(hf::to_string(*profile_))};
    }
    fx.model_cases.push_back(mc);
    fs::create_directories(fs::path(fx.path).parent_path());
    save_fixture(fx);
    return fx.path;
  }

  std::string property(const std::string& path) const { return "hf-live/" + path; }
  std::string kernel_label() const { return fmt::format("transformers-{}@{}", version_, backend_); }

 private:
  const HfLiveOptions& o_;
  PythonWorker& worker_;
  std::string version_, backend_;
  hf::ProfileChoice choice_;
  std::optional<hf::Profile> profile_;
  json model_backward_ = json::object();
};

// The tiny-model training step (tools/hf_live/model_backward.py), reported like a path with one case; false when it
// fails. It has no model case to shrink or save: its reason names the parameter and the numbers.
bool report_model_backward(const LiveRun& run, const HfLiveOptions& o, const json& hello, double seconds, json& reports) {
  const json& r = run.model_backward();
  FuzzReport rep;
  rep.kernel = run.kernel_label();
  rep.property = run.property("model-backward");
  rep.seed = o.seed;
  rep.seconds = seconds;
  const VerdictKind kind = r.empty() ? VerdictKind::kError : kind_of(r);
  const std::string reason = r.empty() ? std::string("the worker returned no model_backward result") : r.value("reason", "");
  if (kind == VerdictKind::kUnsupported) {
    ++rep.unsupported;
    ++rep.unsupported_reasons[reason];
  } else {
    ++rep.cases;
    if (kind == VerdictKind::kPass) {
      if (r.value("bound", 0.0) > 0) rep.worst_bound_use = r.value("err", 0.0) / r.value("bound", 1.0);
      if (r.value("base", 0.0) > 0) rep.worst_ratio = r.value("err", 0.0) / r.value("base", 1.0);
    } else {
      ++rep.failures;
    }
  }
  const std::string note = fmt::format("model-backward {}: {}", to_string(kind), kind == VerdictKind::kPass ? r.value("detail", "") : reason);
  if (o.json) {
    json j = to_json(rep);
    j["release"] = hello;
    j["profile_checks"] = json::array({note});
    j["model_backward"] = r;
    reports.push_back(std::move(j));
  } else {
    print_fuzz_report(rep);
    fmt::print("    {}\n", note);
  }
  return kind == VerdictKind::kPass || kind == VerdictKind::kUnsupported;
}

// Whether the release behaves as the profile it is judged by: on every case, the release's flash path and the profile's
// model of it (on tiled-cpu) give the same verdict kind (pass, fail, error). The profile decides which failures are
// documented divergences rather than findings, so a claim that does not hold would hide findings.
struct ClaimCheck {
  int checked = 0, agree = 0;
  std::vector<std::string> disagreements;  // the first few
};

ClaimCheck check_profile_claim(hf::Profile profile, const std::vector<NamedModelCase>& cases, const json& results) {
  ClaimCheck c;
  Kernel* k = builtin_registry().find("tiled-cpu");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const json& ps = results[i].value("paths", json::object());
    if (results[i].contains("bad_input") || !ps.contains("flash")) continue;
    const VerdictKind release = kind_of(ps.at("flash"));
    if (release == VerdictKind::kUnsupported) continue;
    const Verdict model = check_integration(profile, *k, cases[i].second).verdict;
    if (model.kind == VerdictKind::kUnsupported) continue;
    ++c.checked;
    if (model.kind == release) {
      ++c.agree;
    } else if (c.disagreements.size() < 3) {
      c.disagreements.push_back(fmt::format("{}: the release {} ({}), the profile {} ({})", cases[i].first,
                                            to_string(release), printable(ps.at("flash").value("reason", ""), 160),
                                            to_string(model.kind), printable(model.reason, 160)));
    }
  }
  return c;
}

}  // namespace

int run_hf_live(const HfLiveOptions& o) {
  std::signal(SIGPIPE, SIG_IGN);  // a worker that dies must not take this process with it
  for (const std::string& p : o.paths)
    if (p != "flash" && p != "sdpa") {
      fmt::print(stderr, "flashcheck hf-live: unknown path '{}' (flash, sdpa)\n", p);
      return kExitUsage;
    }
  if (!o.profile.empty() && !hf::parse_profile(o.profile)) {
    fmt::print(stderr, "flashcheck hf-live: --profile: '{}' is not a profile ({})\n", printable(o.profile, 60),
               hf::profile_name_list());
    return kExitUsage;
  }
  const std::string script = find_script(o.script);
  if (script.empty()) {
    fmt::print(stderr, "flashcheck hf-live: live.py not found: not installed with this executable (share/flashcheck/hf_live), "
                       "not under tools/hf_live here (run from the repository root or give --script)\n");
    return kExitUsage;
  }
  std::vector<NamedModelCase> cases;
  try {
    cases = collect_model_cases(o.fixtures, o.generated, o.seed);
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck hf-live: {}\n", e.what());
    return kExitUsage;
  }
  std::string paths;
  for (const std::string& p : o.paths) paths += (paths.empty() ? "" : ",") + p;
  std::unique_ptr<PythonWorker> worker;
  try {
    worker = std::make_unique<PythonWorker>(
        std::vector<std::string>{o.python, script, "serve", "--kernel", o.kernel, "--paths", paths});
  } catch (const std::runtime_error& e) {
    fmt::print(stderr, "flashcheck hf-live: {}\n", e.what());
    return kExitUsage;
  }
  const std::optional<json> hello = worker->read();
  if (!hello || !hello->contains("hello")) {
    fmt::print(stderr, "flashcheck hf-live: {} did not start: {}\n", o.python,
               hello ? hello->value("error", hello->dump()) + "\n" + hello->value("trace", "") : worker->error());
    return kExitUsage;
  }
  const json& h = hello->at("hello");
  LiveRun run(o, *worker, h.value("transformers", "?"), h.value("kernel", "?"));
  const auto start = std::chrono::steady_clock::now();
  if (!o.json)
    fmt::print("hf-live: transformers {} ({}), torch {}, python {}, kernel {}; profile {}\n", run.version(),
               h.value("transformers_path", "?"), h.value("torch", "?"), h.value("python", "?"), h.value("kernel", "?"),
               run.profile() ? fmt::format("{} ({})", hf::to_string(*run.profile()), run.choice().why) : run.choice().why);
  const std::optional<json> results = run.judge(cases, (fs::path(o.out) / "cases").string(), /*model_backward=*/true);
  if (!results) return kExitUsage;

  std::optional<ClaimCheck> claim;
  if (run.profile() && std::find(o.paths.begin(), o.paths.end(), "flash") != o.paths.end()) {
    claim = check_profile_claim(*run.profile(), cases, *results);
    if (!o.json) {
      fmt::print("hf-live: profile {} {} transformers {}: the same verdict on {} of {} cases (flash path){}\n",
                 hf::to_string(*run.profile()), claim->agree == claim->checked ? "agrees with" : "DISAGREES with",
                 run.version(), claim->agree, claim->checked,
                 claim->agree == claim->checked ? "" : "; its documented divergences cannot be trusted for this release");
      for (const std::string& d : claim->disagreements) fmt::print("    {}\n", d);
    }
  }

  std::vector<std::string> all_paths{"eager"};
  all_paths.insert(all_paths.end(), o.paths.begin(), o.paths.end());
  if (o.backward)
    for (const std::string& p : o.paths) all_paths.push_back(p + "-backward");
  json reports = json::array();
  bool ok = true;
  for (const std::string& path : all_paths) {
    FuzzReport rep;
    rep.kernel = run.kernel_label();
    rep.property = run.property(path);
    rep.seed = o.seed;
    std::set<std::string> shrunk;
    std::vector<std::string> notes;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const ModelCase& m = cases[i].second;
      const json& res = (*results)[i];
      if (res.contains("bad_input")) {
        ++rep.unsupported;
        ++rep.unsupported_reasons["bad input: " + res.value("bad_input", "")];
        continue;
      }
      const json& ps = res.value("paths", json::object());
      if (!ps.contains(path)) {
        ++rep.unsupported;
        ++rep.unsupported_reasons["eager failed on the case"];
        continue;
      }
      const json& r = ps.at(path);
      const VerdictKind kind = kind_of(r);
      if (kind == VerdictKind::kUnsupported) {
        ++rep.unsupported;
        ++rep.unsupported_reasons[r.value("reason", "")];
        continue;
      }
      ++rep.cases;
      for (const std::string& f : classify(m)) ++rep.coverage[f];
      if (kind == VerdictKind::kPass) {
        const double bound = r.value("bound", 0.0);
        if (bound > 0) rep.worst_bound_use = std::max(rep.worst_bound_use, r.value("err", 0.0) / bound);
        if (r.value("base", 0.0) > 0) rep.worst_ratio = std::max(rep.worst_ratio, r.value("err", 0.0) / r.value("base", 1.0));
        continue;
      }
      ++rep.failures;
      if (const std::string from = r.value("inherited", ""); !from.empty()) {
        // The path's forward fails on this case: one bug, reported (and shrunk) under the forward path.
        ++rep.known_divergences[fmt::format("the forward fails, reported under {}", run.property(from))];
        continue;
      }
      if (const auto known = run.known(path, m)) {
        ++rep.known_divergences[known->id];
        continue;
      }
      if (!shrunk.insert(failure_key(r)).second) continue;  // this failure was shrunk already
      if (!o.json) fmt::print(stderr, "hf-live: {} path fails on {} ({}); shrinking\n", path, cases[i].first, r.value("reason", ""));
      Finding f = run.shrink(path, m, r, static_cast<std::int64_t>(i) + 1);
      std::string note;
      f.fixture = run.save(path, f, note);
      if (const auto upstream = hf::upstream_symptom(f.verdict.reason, *f.model_case))
        f.verdict.reason += fmt::format(" -- the symptom of {}", *upstream);
      notes.push_back(fmt::format("{}: {}", f.fixture, note));
      add_finding(rep, std::move(f), [](const Finding& g) { return g.fixture; });
    }
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ok = ok && rep.findings.empty();
    if (o.json) {
      json j = to_json(rep);
      j["release"] = h;
      j["profile_checks"] = notes;
      j["profile"] = {{"name", run.profile() ? std::string(hf::to_string(*run.profile())) : ""},
                      {"why", run.choice().why},
                      {"assumed", run.choice().assumed}};
      if (claim)
        j["profile"]["claim"] = {{"checked", claim->checked}, {"agree", claim->agree}, {"disagreements", claim->disagreements}};
      reports.push_back(std::move(j));
    } else {
      print_fuzz_report(rep);
      for (const std::string& n : notes) fmt::print("    {}\n", n);
    }
  }
  if (o.backward) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ok = report_model_backward(run, o, h, seconds, reports) && ok;
  }
  if (claim && claim->agree != claim->checked) ok = false;
  if (o.json) std::cout << reports.dump(2) << "\n";
  return ok ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
