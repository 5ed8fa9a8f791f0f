// `flashcheck bisect FIXTURE --transformers FROM..TO`: the first transformers release where a fixture's model cases fail
// on the flash path, and the first that fixes them. The search, the side-by-side installs and the hf-live probes are
// tools/hf_live/release_bisect.py's (a source-tree tool, as tools/hf_crosscheck/matrix.sh is); this checks the
// arguments and hands over to it, naming this executable as the one to probe with.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "cli/commands.h"
#include "core/error.h"
#include "core/fixture.h"

namespace flashcheck::cli {
namespace {

namespace fs = std::filesystem;

int refuse(const std::string& why) {
  fmt::print(stderr, "flashcheck bisect: {}\n", why);
  return kExitUsage;
}

}  // namespace

int run_bisect(const BisectOptions& o) {
  if (!std::regex_match(o.transformers, std::regex(R"([0-9]+(\.[0-9]+)*\.\.[0-9]+(\.[0-9]+)*)")))
    return refuse(fmt::format("--transformers '{}' is not FROM..TO (4.53.0..5.25.0)", printable(o.transformers, 60)));
  const Fixture f = load_fixture(o.fixture);  // an InputError names the file, field and reason
  if (f.model_cases.empty())
    return refuse(fmt::format("{} has no model-level case: bisect runs transformers releases on model cases", f.path));
  if (!o.case_name.empty() && std::none_of(f.model_cases.begin(), f.model_cases.end(),
                                           [&](const ModelFixtureCase& c) { return c.mcase.name == o.case_name; }))
    return refuse(fmt::format("{}: no model case named '{}'", f.path, printable(o.case_name, 80)));
  std::string script;
  for (const fs::path& p : {fs::path("tools/hf_live/release_bisect.py"),
                            fs::path(FLASHCHECK_SOURCE_DIR) / "tools/hf_live/release_bisect.py"})
    if (fs::exists(p)) {
      script = p.string();
      break;
    }
  if (script.empty())
    return refuse("tools/hf_live/release_bisect.py not found: bisect runs from a flashcheck source tree (it installs "
                  "releases under its build/hf, as hf-live's tools do)");
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return refuse("cannot name this executable (/proc/self/exe)");
  std::vector<std::string> args{"python3", script, "--flashcheck", self.string(), o.fixture, "--transformers", o.transformers};
  if (!o.case_name.empty()) args.insert(args.end(), {"--case", o.case_name});
  if (!o.releases.empty()) args.insert(args.end(), {"--releases", o.releases});
  if (!o.out.empty()) args.insert(args.end(), {"--out", o.out});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execvp("python3", argv.data());
  return refuse(fmt::format("cannot run python3: {}", std::strerror(errno)));
}

}  // namespace flashcheck::cli
