// `flashcheck repro FIXTURE [--case C] [--kernel K] --out DIR`: a fixture's case as an upstream-ready reproducer
// (cli/repro_script.h): DIR/repro.py, DIR/case.safetensors and DIR/ISSUE.md. Without --case and --kernel, the first
// case recording a failure of a kernel repro can write for, and that kernel.
#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>

#include "cli/commands.h"
#include "cli/repro_script.h"
#include "core/case_tensors.h"
#include "core/error.h"
#include "core/files.h"
#include "core/fixture.h"
#include "core/safetensors.h"
#include "kernels/kernel.h"

namespace flashcheck::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCommand = "flashcheck repro";
constexpr const char* kScriptHead = "#!/usr/bin/env python3\n# Reproducer: ";
constexpr const char* kIssueHead = "<!-- written by flashcheck repro -->\n";
constexpr const char* kTensorsMark = "flashcheck repro";

int refuse(const std::string& why) {
  fmt::print(stderr, "{}: {}\n", kCommand, why);
  return kExitUsage;
}

bool records_failure(const FixtureCase& fc, const std::string& kernel) {
  const auto it = fc.expect.find(kernel);
  if (it == fc.expect.end()) return false;
  const VerdictKind v = it->second.verdict;
  return v == VerdictKind::kFail || v == VerdictKind::kError || v == VerdictKind::kCrash || v == VerdictKind::kTimeout;
}

// The template: installed with the executable, else the working directory's or this build's source tree.
std::string find_template() {
  if (std::string installed = installed_path("share/flashcheck/repro/repro_template.py"); !installed.empty())
    return installed;
  for (const fs::path& p : {fs::path("tools/repro/repro_template.py"),
                            fs::path(FLASHCHECK_SOURCE_DIR) / "tools/repro/repro_template.py"})
    if (fs::exists(p)) return p.string();
  return "";
}

// The case's index from --case: its name, or its position ("3" or "#3").
std::optional<std::size_t> pick_case(const Fixture& f, const std::string& given) {
  for (std::size_t i = 0; i < f.cases.size(); ++i)
    if (f.cases[i].kcase.name == given) return i;
  const std::string digits = !given.empty() && given[0] == '#' ? given.substr(1) : given;
  if (!digits.empty() && digits.size() < 7 && digits.find_first_not_of("0123456789") == std::string::npos &&
      std::stoul(digits) < f.cases.size())
    return std::stoul(digits);
  return std::nullopt;
}

}  // namespace

int run_repro(const ReproOptions& o) {
  if (!o.kernel.empty())
    if (std::string why = repro_unsupported_kernel(o.kernel); !why.empty()) return refuse(why);
  const Fixture f = load_fixture(o.fixture);
  if (f.cases.empty())
    return refuse(fmt::format("{} has only model-level cases; repro writes kernel-level cases (replay runs the others)",
                              f.path));
  std::vector<std::size_t> candidates;
  if (!o.case_name.empty()) {
    const std::optional<std::size_t> i = pick_case(f, o.case_name);
    if (!i) return refuse(fmt::format("{}: no case named or numbered '{}'", f.path, printable(o.case_name, 80)));
    candidates.push_back(*i);
  } else {
    for (std::size_t i = 0; i < f.cases.size(); ++i) candidates.push_back(i);
  }
  ReproInput in;
  in.fixture = &f;
  in.generated_by = o.generated_by;
  bool chosen = false;
  for (std::size_t i : candidates) {
    const FixtureCase& fc = f.cases[i];
    if (!o.kernel.empty()) {
      if (records_failure(fc, o.kernel) || !o.case_name.empty()) {
        in.case_index = i, in.kernel = o.kernel, chosen = true;
        break;
      }
      continue;
    }
    for (const auto& [kernel, e] : fc.expect)
      if (records_failure(fc, kernel) && repro_unsupported_kernel(kernel).empty() &&
          repro_unsupported_case(fc.kcase, kernel).empty()) {
        in.case_index = i, in.kernel = kernel, chosen = true;
        break;
      }
    if (chosen) break;
  }
  if (!chosen)
    return refuse(fmt::format("{}: no case records a failure of {}; name the case with --case and the kernel with "
                              "--kernel",
                              f.path, o.kernel.empty() ? "a kernel repro writes scripts for" : o.kernel));
  const FixtureCase& fc = f.cases[in.case_index];
  if (std::string why = repro_unsupported_case(fc.kcase, in.kernel); !why.empty())
    return refuse(fmt::format("{} case {} on {}: {}", f.path, in.case_index, in.kernel, why));
  // A case outside the kernel's contract is `unsupported` in flashcheck, never a finding: nothing to reproduce, unless
  // the fixture runs it there on purpose. Kernels of other builds (CUDA ones on a CPU build) are not checked here.
  if (const Kernel* k = builtin_registry().find_registered(in.kernel)) {
    const ContractCheck r = k->check(fc.kcase);
    const auto e = fc.expect.find(in.kernel);
    if (!r.supported && (e == fc.expect.end() || !e->second.run_outside_contract))
      return refuse(fmt::format("{} case {} is outside {}'s contract ({}): flashcheck reports it unsupported", f.path,
                                in.case_index, in.kernel, r.reason));
  }
  const std::string template_path = find_template();
  if (template_path.empty()) return refuse("tools/repro/repro_template.py is not installed with this flashcheck");

  const std::string script = render_repro_script(read_input_file(template_path, 1 << 20), in);
  const std::string issue = kIssueHead + render_issue_body(in);
  const CaseTensors t = fc.tensors ? *fc.tensors : materialize(fc.kcase);
  SafetensorsFile st;
  st.metadata["written_by"] = kTensorsMark;
  st.tensors["q"] = store_floats(t.q.data, t.q.shape, fc.kcase.dtype);
  st.tensors["k"] = store_floats(t.k.data, t.k.shape, fc.kcase.dtype);
  st.tensors["v"] = store_floats(t.v.data, t.v.shape, fc.kcase.dtype);
  if (fc.kcase.backward()) st.tensors["dout"] = store_floats(t.dout.data, t.dout.shape, fc.kcase.dtype);

  ensure_output_dir(o.out);
  const fs::path dir(o.out);
  const std::string script_path = (dir / "repro.py").string(), tensors_path = (dir / in.tensors_file).string(),
                    issue_path = (dir / "ISSUE.md").string();
  check_replaceable(script_path, [](std::string_view head) { return head.rfind(kScriptHead, 0) == 0; }, o.force);
  check_replaceable(issue_path, [](std::string_view head) { return head.rfind(kIssueHead, 0) == 0; }, o.force);
  check_replaceable(tensors_path, [](std::string_view head) { return head.find(kTensorsMark) != std::string_view::npos; },
                    o.force);
  write_safetensors(tensors_path, st);
  write_file_atomic(script_path, script);
  ::chmod(script_path.c_str(), 0755);
  write_file_atomic(issue_path, issue);
  const auto it = fc.expect.find(in.kernel);
  fmt::print("wrote {}, {} and {}: case {} of {} on {} (flashcheck expects {})\nrun: python3 {}\n", script_path,
             tensors_path, issue_path, fc.kcase.name.empty() ? fmt::format("#{}", in.case_index) : fc.kcase.name,
             f.path, in.kernel, it == fc.expect.end() ? "pass" : to_string(it->second.verdict), script_path);
  return kExitOk;
}

}  // namespace flashcheck::cli
