// `flashcheck repro FIXTURE [--case C] [--kernel K] --out DIR`: a fixture's case as an upstream-ready reproducer
// (cli/repro_script.h): DIR/repro.py, DIR/case.safetensors and DIR/ISSUE.md. Without --case and --kernel, the first
// case recording a failure of a kernel repro can write for, and that kernel.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "cli/commands.h"
#include "cli/export_cases.h"
#include "cli/plugins.h"
#include "cli/project_files.h"
#include "cli/repro_script.h"
#include "core/case_tensors.h"
#include "core/error.h"
#include "core/files.h"
#include "core/fixture.h"
#include "core/geometry.h"
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
  return it != fc.expect.end() && records_a_failure(it->second);
}

// A template of tools/repro: installed with the executable, else the working directory's or this build's source tree.
std::string find_template(const std::string& name) {
  return find_project_file("share/flashcheck/repro/" + name, "tools/repro/" + name);
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

// Every sequence's keys and values in logical order (positions p0 to kv_end), one sequence after another: what the
// script's reference reads when the kernel gets pages or a cache append.
struct LogicalKeys {
  HostTensor k, v;
};

LogicalKeys logical_keys(const KernelCase& c, const CaseTensors& t) {
  const CaseGeometry g = geometry(c);
  std::int64_t rows = 0;
  for (const SeqGeometry& s : g.seqs) rows += s.kv_end - s.p0;
  LogicalKeys out{HostTensor({rows, c.kv_heads, c.head_dim}, 0.0f), HostTensor({rows, c.kv_heads, c.v_head_dim}, 0.0f)};
  const ValueSource src = logical_values(c, t);
  std::int64_t row = 0;
  for (std::size_t b = 0; b < g.seqs.size(); ++b)
    for (std::int64_t pos = g.seqs[b].p0; pos < g.seqs[b].kv_end; ++pos, ++row)
      for (std::int64_t h = 0; h < c.kv_heads; ++h) {
        for (std::int64_t ch = 0; ch < c.head_dim; ++ch)
          out.k.data[static_cast<std::size_t>((row * c.kv_heads + h) * c.head_dim + ch)] =
              src(TensorId::kK, static_cast<std::int64_t>(b), pos, h, ch);
        for (std::int64_t ch = 0; ch < c.v_head_dim; ++ch)
          out.v.data[static_cast<std::size_t>((row * c.kv_heads + h) * c.v_head_dim + ch)] =
              src(TensorId::kV, static_cast<std::int64_t>(b), pos, h, ch);
      }
  return out;
}

// A case's tensors as the kernel gets them, under `prefix`: q, k, v, dout (backward), k_new and v_new (a cache append),
// and with `logical` the keys in logical order for the script's reference when they are paged or appended.
void store_case(const FixtureCase& fc, const std::string& prefix, bool logical, SafetensorsFile& st) {
  const KernelCase& c = fc.kcase;
  const CaseTensors t = fc.tensors ? *fc.tensors : materialize(c);
  const auto put = [&](const char* name, const HostTensor& x) {
    st.tensors[prefix + name] = store_floats(x.data, x.shape, c.dtype);
  };
  put("q", t.q);
  put("k", t.k);
  put("v", t.v);
  if (c.backward()) put("dout", t.dout);
  if (!t.k_new.empty()) put("k_new", t.k_new), put("v_new", t.v_new);
  if (logical && (c.kv_storage == KvStorage::kPaged || c.kv_cache)) {
    const LogicalKeys keys = logical_keys(c, t);
    put("k_logical", keys.k);
    put("v_logical", keys.v);
  }
}

// The model case --case names ("m2" or a model case's name), or without --case the first that records a failure of a
// modelled release; nullopt when there is none (or --case names a kernel-level case).
std::optional<std::size_t> pick_model_case(const Fixture& f, const std::string& given) {
  for (std::size_t i = 0; i < f.model_cases.size(); ++i) {
    const ModelFixtureCase& m = f.model_cases[i];
    if (given.empty() ? std::any_of(m.expect.begin(), m.expect.end(), [](const auto& e) { return records_a_failure(e.second); })
                      : (m.mcase.name == given || given == fmt::format("m{}", i)))
      return i;
  }
  return std::nullopt;
}

// A model-level case: DIR/repro.py (tools/repro/model_repro_template.py with tools/hf_live embedded), DIR/case (the
// case exported as hf-live reads it) and DIR/ISSUE.md.
int run_model_repro(const ReproOptions& o, const Fixture& f, std::size_t index) {
  if (!o.kernel.empty())
    return refuse(fmt::format("{} model case {} runs on transformers' own paths (the flash path on an exact stand-in "
                              "kernel): --kernel does not apply",
                              f.path, index));
  const std::string template_path = find_template("model_repro_template.py");
  const std::string live = find_project_file("share/flashcheck/hf_live/live.py", "tools/hf_live/live.py");
  if (template_path.empty() || live.empty())
    return refuse("tools/repro/model_repro_template.py or tools/hf_live is not installed with this flashcheck");
  ModelReproInput in;
  in.fixture = &f;
  in.model_index = index;
  in.generated_by = o.generated_by;
  try {
    in.driver = embed_modules("live", {fs::path(live).parent_path().string()});
  } catch (const std::runtime_error& e) {
    return refuse(e.what());
  }
  const ModelFixtureCase& mc = f.model_cases[index];
  // The export carries the plan of one profile besides the case (hf-live's driver reads only the case and eager's
  // output): the first profile that records the failure, else hf-main.
  hf::Profile profile = hf::Profile::kHfMain;
  for (const auto& [name, e] : mc.expect)
    if (records_a_failure(e))
      if (const std::optional<hf::Profile> p = hf::parse_profile(name)) {
        profile = *p;
        break;
      }
  const std::string script = render_model_repro_script(read_input_file(template_path, 1 << 20), in);
  const std::string issue = kIssueHead + render_model_issue_body(in);
  ensure_output_dir(o.out);
  const fs::path dir(o.out);
  const std::string script_path = (dir / "repro.py").string(), issue_path = (dir / "ISSUE.md").string();
  check_replaceable(script_path, [](std::string_view head) { return head.rfind(kScriptHead, 0) == 0; }, o.force);
  check_replaceable(issue_path, [](std::string_view head) { return head.rfind(kIssueHead, 0) == 0; }, o.force);
  const std::string name = mc.mcase.name.empty() ? fmt::format("m{}", index) : mc.mcase.name;
  write_export((dir / in.case_dir).string(), {{name, mc.mcase}}, profile, o.force);
  write_file_atomic(script_path, script);
  ::chmod(script_path.c_str(), 0755);
  write_file_atomic(issue_path, issue);
  fmt::print("wrote {}, {} and {}: model case {} of {} (transformers' attention paths)\nrun: python3 {} (with the "
             "transformers release to check installed)\n",
             script_path, (dir / in.case_dir).string(), issue_path, name, f.path, script_path);
  return kExitOk;
}

}  // namespace

int run_repro(const ReproOptions& o) {
  if (!o.kernel.empty())
    if (std::string why = repro_unsupported_kernel(o.kernel); !why.empty()) return refuse(why);
  const Fixture f = load_fixture(o.fixture);
  // Model-level cases: a fixture that has only those, or --case naming one.
  const bool names_kernel_case = !o.case_name.empty() && pick_case(f, o.case_name).has_value();
  if (!f.model_cases.empty() && (f.cases.empty() || (!o.case_name.empty() && !names_kernel_case))) {
    const std::optional<std::size_t> m = pick_model_case(f, o.case_name);
    if (!m)
      return refuse(o.case_name.empty()
                        ? fmt::format("{}: no model case records a failure of a modelled release; name one with --case",
                                      f.path)
                        : fmt::format("{}: no case named or numbered '{}'", f.path, printable(o.case_name, 80)));
    return run_model_repro(o, f, *m);
  }
  if (f.cases.empty())
    return refuse(fmt::format("{} has no kernel-level case", f.path));
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
  if (is_python_kernel(in.kernel)) {
    // Resolved in a worker, as every run resolves it (the parent never imports a kernel): its contract says where it
    // runs and what it returns; the script embeds the adapter's source from where the bridge imports it.
    const Kernel* k = nullptr;
    try {
      k = builtin_registry().find(in.kernel);
    } catch (const InputError& e) {
      return refuse(e.what());
    }
    if (!k) return refuse(fmt::format("{}: this build has no Python bridge", in.kernel));
    try {
      in.adapter = find_repro_adapter(in.kernel, python_kernel_search_path());
    } catch (const std::runtime_error& e) {
      return refuse(fmt::format("{}: {}", in.kernel, e.what()));
    }
    in.adapter->device = std::string(k->device());
    in.adapter->returns_lse = k->contract().returns_lse;
  }
  // A case outside the kernel's contract is `unsupported` in flashcheck, never a finding: nothing to reproduce, unless
  // the fixture runs it there on purpose. Only the contract counts (a CUDA Python kernel's script is written on a
  // machine without a GPU too); kernels of other builds (CUDA ones on a CPU build) are not checked here.
  const Kernel* registered = builtin_registry().find_registered(in.kernel);
  const auto runs_there = [&](const FixtureCase& c, std::string* why) {
    if (!registered) return true;
    const ContractCheck r = check_backward_contract(registered->contract(), c.kcase);
    const auto e = c.expect.find(in.kernel);
    if (why) *why = r.reason;
    return r.supported || (e != c.expect.end() && e->second.run_outside_contract);
  };
  if (std::string why; !runs_there(fc, &why))
    return refuse(fmt::format("{} case {} is outside {}'s contract ({}): flashcheck reports it unsupported", f.path,
                              in.case_index, in.kernel, why));
  if (in.adapter)  // the earlier cases replay runs on this kernel in the same process
    for (std::size_t i = 0; i < in.case_index; ++i)
      if (repro_unsupported_case(f.cases[i].kcase, in.kernel).empty() && runs_there(f.cases[i], nullptr))
        in.prelude.push_back(i);
  const std::string template_path = find_template("repro_template.py");
  if (template_path.empty()) return refuse("tools/repro/repro_template.py is not installed with this flashcheck");

  const std::string script = render_repro_script(read_input_file(template_path, 1 << 20), in);
  const std::string issue = kIssueHead + render_issue_body(in);
  SafetensorsFile st;
  st.metadata["written_by"] = kTensorsMark;
  store_case(f.cases[in.case_index], "", repro_keys_in_logical_order(in.kernel), st);
  for (std::size_t i = 0; i < in.prelude.size(); ++i)
    store_case(f.cases[in.prelude[i]], fmt::format("prelude{}.", i), false, st);

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
