#include "search/found_cases.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/case_json.h"
#include "core/files.h"
#include "core/fixture.h"
#include "core/input_limits.h"
#include "core/json_input.h"
#include "core/model_case_json.h"

namespace flashcheck {
namespace fs = std::filesystem;

std::string inflight_path(const std::string& dir, const Kernel& k, const Property& p) {
  // Kernel names can hold any character (py:package.module:function): keep the file name portable.
  std::string name = fmt::format("inflight-{}-{}.json", k.name(), p.label());
  std::replace_if(name.begin(), name.end(), [](char ch) { return !(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_'); }, '-');
  return (fs::path(dir) / name).string();
}

void write_inflight(const std::string& path, const AnyCase& c) {
  const nlohmann::json j = std::holds_alternative<KernelCase>(c)
                               ? nlohmann::json{{"case", case_to_json(std::get<KernelCase>(c))}}
                               : nlohmann::json{{"model_case", model_case_to_json(std::get<ModelCase>(c))}};
  // Written, then renamed: a worker killed mid-write leaves the previous descriptor, never half of one. Not
  // synced: a killed worker does not lose the page cache, and a sync before every case would cost more
  // than the case.
  write_file_atomic(path, j.dump(), Overwrite::kReplace, /*durable=*/false);
}

std::optional<AnyCase> read_inflight(const std::string& path) {
  try {
    if (!path_exists(path)) return std::nullopt;
    const nlohmann::json j = parse_json_input(read_input_file(path, limits::kMaxFixtureBytes), path);
    if (j.contains("model_case")) return AnyCase{model_case_from_json(j.at("model_case"), path, "model_case")};
    return AnyCase{case_from_json(j.at("case"), path, "case")};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string keep_earlier_inflight(const std::string& path) {
  const std::string kept = move_aside(path);
  if (!kept.empty())
    fmt::print(stderr, "flashcheck: {} is the in-flight case of an earlier run that did not finish; kept as {}\n", path, kept);
  return kept;
}

AnyCase finding_case(const Finding& f) {
  if (f.model_case) return *f.model_case;
  return f.minimized;
}

void set_finding_case(Finding& f, const AnyCase& c) {
  if (const ModelCase* m = std::get_if<ModelCase>(&c)) f.model_case = *m;
  else f.minimized = std::get<KernelCase>(c);
}

std::string save_finding(const std::string& dir, const Kernel& k, const Property& p, std::uint64_t seed,
                         const Finding& f) {
  if (dir.empty()) return "";
  ensure_output_dir(dir);
  Fixture fx;
  fx.description = f.verdict.reason;
  fx.property = std::string(p.name());
  fx.replay = "";
  fx.rc_reproduce = f.reproduce;
  Expectation e;
  e.verdict = f.verdict.kind;
  e.why = f.verdict.reason;
  if (f.model_case) {
    const std::string profile(p.profile());
    fx.path = (fs::path(dir) / (content_hash(*f.model_case) + ".json")).string();
    fx.title = fmt::format("{} {} on {} @ {}: {}", p.name(), to_string(f.verdict.kind), profile, k.name(),
                           summary(*f.model_case));
    fx.profiles = {profile};
    fx.found_by = fmt::format("flashcheck fuzz --kernel {} --property {} --profile {} --seed {}", k.name(), p.name(),
                              profile, seed);
    ModelFixtureCase mc;
    mc.mcase = *f.model_case;
    mc.expect[profile] = e;
    fx.model_cases.push_back(mc);
  } else {
    fx.path = (fs::path(dir) / (content_hash(f.minimized) + ".json")).string();
    fx.title = fmt::format("{} {} of {}: {}", p.name(), to_string(f.verdict.kind), k.name(), summary(f.minimized));
    fx.found_by = fmt::format("flashcheck fuzz --kernel {} --property {} --seed {}", k.name(), p.name(), seed);
    e.run_outside_contract = f.verdict.kind == VerdictKind::kCrash || f.verdict.kind == VerdictKind::kTimeout;
    FixtureCase fc;
    fc.kcase = f.minimized;
    fc.expect[std::string(k.name())] = e;
    fx.cases.push_back(fc);
  }
  fx.replay = fmt::format("flashcheck replay {} --kernel {}", fx.path, k.name());
  // Named by the case's content: an existing file is the same case, found before (perhaps annotated by
  // someone since), and is kept as it is.
  save_fixture(fx, Overwrite::kKeep);
  return fx.path;
}

}  // namespace flashcheck
