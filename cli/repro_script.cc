#include "cli/repro_script.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/case_json.h"
#include "core/files.h"
#include "core/geometry.h"
#include "core/hf_profiles.h"
#include "core/model_case_json.h"
#include "kernels/flash_args.h"

namespace flashcheck::cli {
namespace {

using nlohmann::json;

// The kernels a script is written for: what the adapter calls, where, and how it lays the case out.
struct ReproKernel {
  std::string name;
  std::string device;
  bool per_sequence;  // one call per sequence on its rows and keys (leftpad and seqused_k become the keys it gets)
  bool dense;         // (B, L, H, d): one q_len and one k_len for the batch, no slack
  std::string call;
};

const ReproKernel kKernels[] = {
    {"sdpa-math-cpu", "cpu", true, false,
     "torch.ops.aten._scaled_dot_product_attention_math (CPU), one (1, H, L, d) call per sequence"},
    {"cpu-flash", "cpu", true, false,
     "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, one (1, H, L, d) call per sequence"},
    {"flash-fwd-varlen", "cuda", false, false,
     "torch.ops.aten._flash_attention_forward / _flash_attention_backward with cu_seqlens (FlashAttention-2 in PyTorch)"},
    {"flash-fwd-varlen-deterministic", "cuda", false, false,
     "torch.ops.aten._flash_attention_forward / _flash_attention_backward with cu_seqlens, deterministic algorithms"},
    {"flash-fwd-dense", "cuda", false, true,
     "torch.ops.aten._flash_attention_forward / _flash_attention_backward, dense (B, S, H, d)"},
    {"flash-fwd-dense-deterministic", "cuda", false, true,
     "torch.ops.aten._flash_attention_forward / _flash_attention_backward, dense, deterministic algorithms"},
    {"efficient-fwd-varlen", "cuda", false, false,
     "torch.ops.aten._efficient_attention_forward / _efficient_attention_backward with cu_seqlens (CUTLASS)"},
    {"efficient-fwd-dense", "cuda", false, true,
     "torch.ops.aten._efficient_attention_forward / _efficient_attention_backward, dense (B, S, H, d) (CUTLASS)"},
    {"cudnn-fwd", "cuda", false, true,
     "torch.ops.aten._cudnn_attention_forward / _cudnn_attention_backward, dense (B, H, S, d)"},
    {"sdpa-flash", "cuda", true, false,
     "torch.nn.functional.scaled_dot_product_attention with only the flash backend, one call per sequence"},
    {"sdpa-efficient", "cuda", true, false,
     "torch.nn.functional.scaled_dot_product_attention with only the memory-efficient backend, one call per sequence"},
    {"sdpa-cudnn", "cuda", true, false,
     "torch.nn.functional.scaled_dot_product_attention with only the cuDNN backend, one call per sequence"},
    {"sdpa-math-cuda", "cuda", true, false,
     "torch.nn.functional.scaled_dot_product_attention with only the math backend (CUDA), one call per sequence"},
};

const ReproKernel* find_kernel(const std::string& name) {
  for (const ReproKernel& k : kKernels)
    if (name == k.name) return &k;
  return nullptr;
}

// The template's section name of a kernel: its own name, or "py" for every Python kernel (one adapter call for all).
std::string section_of(const std::string& kernel) { return is_python_kernel(kernel) ? "py" : kernel; }

ReproKernel kernel_of(const ReproInput& in) {
  if (is_python_kernel(in.kernel)) {
    if (!in.adapter) throw std::logic_error("repro: a Python kernel's script needs its adapter");
    const ReproAdapter& a = *in.adapter;
    return {in.kernel, a.device, false, false,
            fmt::format("{}.{} on {}: flashcheck's Python adapter, whose source is in this script (ADAPTER_SOURCES), "
                        "called as flashcheck's Python bridge calls it",
                        a.module, a.function, a.device)};
  }
  const ReproKernel* k = find_kernel(in.kernel);
  if (!k) throw std::runtime_error(repro_unsupported_kernel(in.kernel));
  return *k;
}

const FixtureCase& case_of(const ReproInput& in) { return in.fixture->cases.at(in.case_index); }

std::string case_name(const ReproInput& in) {
  const FixtureCase& fc = case_of(in);
  return fc.kcase.name.empty() ? fmt::format("#{}", in.case_index) : fc.kcase.name;
}

Expectation expectation_of(const ReproInput& in) {
  const FixtureCase& fc = case_of(in);
  const auto it = fc.expect.find(in.kernel);
  return it == fc.expect.end() ? Expectation{} : it->second;
}

// What the script imports: torch, and the packages a Python adapter imports.
std::string needs(const ReproInput& in) {
  if (!in.adapter || in.adapter->code.packages.empty()) return "only torch";
  std::string s = "torch";
  for (std::size_t i = 0; i < in.adapter->code.packages.size(); ++i)
    s += (i + 1 == in.adapter->code.packages.size() ? " and " : ", ") + in.adapter->code.packages[i];
  return s;
}

// Every line of `text` as a Python comment line.
std::string commented(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
  return out;
}

}  // namespace

std::vector<std::string> repro_kernels() {
  std::vector<std::string> names;
  for (const ReproKernel& k : kKernels) names.emplace_back(k.name);
  return names;
}

std::string repro_unsupported_kernel(const std::string& kernel) {
  if (find_kernel(kernel)) return "";
  if (kernel.rfind("tiled-cpu", 0) == 0 || kernel.rfind("mutant-", 0) == 0)
    return fmt::format("{} is flashcheck's own kernel: it has no upstream to report to", kernel);
  if (is_python_kernel(kernel)) {
    const std::string spec = kernel.substr(3);
    const std::size_t colon = spec.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size() || spec.find(':', colon + 1) != std::string::npos)
      return fmt::format("'{}' is not a Python kernel's name: expected py:package.module:function", kernel);
    return "";
  }
  std::string names;
  for (const ReproKernel& k : kKernels) names += (names.empty() ? "" : ", ") + std::string(k.name);
  return fmt::format("no reproducer is written for kernel '{}' (repro writes scripts for: {})", kernel, names);
}

bool repro_keys_in_logical_order(const std::string& kernel) {
  const ReproKernel* k = find_kernel(kernel);
  return is_python_kernel(kernel) || (k && k->per_sequence);
}

std::string repro_unsupported_case(const KernelCase& c, const std::string& kernel) {
  if (std::string why = repro_unsupported_kernel(kernel); !why.empty()) return why;
  // K/V strides are laid out by the per-sequence kernels' calls (as the SDPA adapter presents K and V), not by the
  // packed ones' or the Python bridge's.
  const ReproKernel* k = find_kernel(kernel);
  if (c.kv_strides != KvStrides::kContiguous && !(k && k->per_sequence))
    return fmt::format("K/V strides '{}' are not laid out by the script for {} yet", to_string(c.kv_strides), kernel);
  const bool paged_or_appended = c.kv_storage == KvStorage::kPaged || c.kv_cache;
  if (repro_keys_in_logical_order(kernel)) {
    // A Python adapter gets every layout as flashcheck's bridge passes it, a per-sequence call each sequence's keys in
    // order; the script's gradients are read per sequence from packed K/V rows.
    if (c.backward() && paged_or_appended)
      return "a backward over paged K/V or a KV-cache append is not laid out by the script yet";
    if (is_python_kernel(kernel)) return "";
  }
  if (c.kv_storage == KvStorage::kPaged && !k->per_sequence)
    return "paged K/V (a block table) is not laid out by the script yet";
  if (c.kv_cache && !k->per_sequence) return "a KV-cache append is not laid out by the script yet";
  if (c.softcap > 0) return fmt::format("{} takes no softcap", kernel);
  const bool leftpad = std::any_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.leftpad_k > 0; });
  if (leftpad && !k->per_sequence) return fmt::format("{} takes no left padding of the keys", kernel);
  if (k->dense) {
    const bool uniform = std::all_of(c.seqs.begin(), c.seqs.end(), [&](const Sequence& s) {
      return s.q_len == c.seqs[0].q_len && s.k_len == c.seqs[0].k_len;
    });
    if (!uniform || c.slack.q_rows > 0 || c.slack.kv_rows > 0)
      return fmt::format("{} is dense: it needs one q_len and one k_len for the batch and no slack rows", kernel);
  }
  return "";
}

namespace {

namespace fs = std::filesystem;

// The file of module `name` ("a.b.c" -> a/b/c.py or a/b/c/__init__.py) under one of `search_path`'s folders.
std::string module_file(const std::string& name, const std::vector<std::string>& search_path) {
  std::string rel = name;
  std::replace(rel.begin(), rel.end(), '.', '/');
  for (const std::string& dir : search_path)
    for (const fs::path& p : {fs::path(dir) / (rel + ".py"), fs::path(dir) / rel / "__init__.py"})
      if (fs::is_regular_file(p)) return p.string();
  return "";
}

std::string parent_of(const std::string& module) {
  const std::size_t dot = module.rfind('.');
  return dot == std::string::npos ? "" : module.substr(0, dot);
}

std::string top_of(const std::string& module) { return module.substr(0, module.find('.')); }

// The modules `source` (module `name`) imports, as absolute names: each `from X import a, b` gives X, X.a and X.b (a
// name after `import` may be a module or not); `base` is false for those names.
struct Import {
  std::string module;
  bool base;
};

std::vector<Import> imports_of(const std::string& name, const std::string& source) {
  static const std::regex from_import(R"(^\s*from\s+(\.*)([A-Za-z_][\w.]*)?\s+import\s+\(?([\w\s,]+))");
  static const std::regex plain_import(R"(^\s*import\s+([A-Za-z_][\w.]*))");
  std::vector<Import> found;
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, from_import)) {
      std::string base = m[2].str();
      if (m[1].length() > 0) {  // relative: one dot is this module's package, each further dot one level up
        std::string package = parent_of(name);
        for (long up = m[1].length() - 1; up > 0; --up) package = parent_of(package);
        base = package + (package.empty() || base.empty() ? "" : ".") + base;
      }
      found.push_back({base, true});
      std::istringstream names(m[3].str());
      for (std::string n; std::getline(names, n, ',');) {
        n.erase(0, n.find_first_not_of(" \t\r\n"));
        n = n.substr(0, n.find_first_of(" \t\r\n"));
        if (!n.empty()) found.push_back({base + "." + n, false});
      }
    } else if (std::regex_search(line, m, plain_import)) {
      found.push_back({m[1].str(), true});
    }
  }
  return found;
}

// Adds module `name` and, before it, the modules it imports that are on `search_path` (depth first), each once; the
// top-level names of imports found elsewhere (the kernel's own package, torch) go to `others`.
void add_module(const std::string& name, const std::vector<std::string>& search_path, EmbeddedModules& m,
                std::set<std::string>& seen, std::set<std::string>& others) {
  if (!seen.insert(name).second) return;
  const std::string file = module_file(name, search_path);
  if (fs::path(file).filename() == "__init__.py") return;  // a package: its modules are embedded, not its __init__
  const std::string source = read_input_file(file, 1 << 20);
  if (source.find("'''") != std::string::npos || (!source.empty() && source.back() == '\\'))
    throw std::runtime_error(fmt::format("{} cannot be embedded: the script holds it in a raw ''' string", file));
  for (const Import& i : imports_of(name, source)) {
    if (!module_file(i.module, search_path).empty()) add_module(i.module, search_path, m, seen, others);
    else if (i.base) others.insert(top_of(i.module));
  }
  m.sources.emplace_back(name, source);
}

}  // namespace

EmbeddedModules embed_modules(const std::string& module, const std::vector<std::string>& search_path) {
  if (module_file(module, search_path).empty()) {
    std::string where;
    for (const std::string& d : search_path) where += (where.empty() ? "" : ", ") + d;
    throw std::runtime_error(fmt::format("the module {} is not found under {}", module, where));
  }
  EmbeddedModules m;
  std::set<std::string> seen, others;
  add_module(module, search_path, m, seen, others);
  // The standard library's modules the project's Python uses, and torch (always printed), are not packages to name.
  static const std::set<std::string> known = {
      "__future__", "abc",      "argparse",  "collections", "contextlib", "copy",      "dataclasses", "enum",
      "functools",  "glob",     "hashlib",   "importlib",   "inspect",    "itertools", "json",        "logging",
      "math",       "os",       "pathlib",   "random",      "re",         "shutil",    "struct",      "subprocess",
      "sys",        "tempfile", "threading", "time",        "torch",      "traceback", "types",       "typing",
      "warnings",   "weakref"};
  for (const std::string& o : others)
    if (!o.empty() && !known.count(o)) m.packages.push_back(o);
  return m;
}

ReproAdapter find_repro_adapter(const std::string& kernel, const std::vector<std::string>& search_path) {
  if (std::string why = repro_unsupported_kernel(kernel); !why.empty() || !is_python_kernel(kernel))
    throw std::runtime_error(why.empty() ? kernel + " is not a Python kernel" : why);
  const std::string spec = kernel.substr(3);
  ReproAdapter a;
  a.module = spec.substr(0, spec.find(':'));
  a.function = spec.substr(spec.find(':') + 1);
  a.code = embed_modules(a.module, search_path);
  return a;
}

namespace {

// What one call of a kernel needs to know about a case: its shapes, dtype and scale, and flash-attn's arguments.
json call_fields(const KernelCase& c) {
  const CaseGeometry g = geometry(c);
  const FlashArgs a = flash_args(c);
  return {{"dtype", to_string(c.dtype)},
          {"heads", c.heads},
          {"kv_heads", c.kv_heads},
          {"head_dim", c.head_dim},
          {"v_head_dim", c.v_head_dim},
          {"scale", c.softmax_scale()},
          {"total_q", g.total_q},
          {"q_rows", g.q_rows},
          {"flash_args",
           {{"batch", a.batch},
            {"cu_seqlens_q", a.cu_seqlens_q},
            {"cu_seqlens_k", a.cu_seqlens_k},
            {"seqused_k", a.seqused_k},
            {"leftpad_k", a.leftpad_k},
            {"cache_seqlens", a.cache_seqlens},
            {"cu_seqlens_k_new", a.cu_seqlens_k_new},
            {"block_table", a.block_table},
            {"max_blocks", a.max_blocks},
            {"page_size", a.page_size},
            {"max_seqlen_q", a.max_seqlen_q},
            {"max_seqlen_k", a.max_seqlen_k},
            {"softcap", a.softcap},
            {"causal", a.is_causal},
            {"top_left", c.alignment == Alignment::kTopLeft},
            {"window_left", a.window_left},
            {"window_right", a.window_right}}}};
}

}  // namespace

std::string repro_spec_json(const ReproInput& in) {
  const ReproKernel& k = kernel_of(in);
  const FixtureCase& fc = case_of(in);
  const KernelCase& c = fc.kcase;
  const CaseGeometry g = geometry(c);
  const MaskRule m = mask_rule(c);
  const Expectation e = expectation_of(in);
  // Paged or appended keys: the script reads each sequence's keys in logical order from k_logical / v_logical (written
  // beside q, k, v) for its reference and, for a per-sequence call, for the kernel too.
  const bool logical_kv = repro_keys_in_logical_order(in.kernel) && (c.kv_storage == KvStorage::kPaged || c.kv_cache);
  json seqs = json::array();
  std::int64_t logical_start = 0;
  for (const SeqGeometry& s : g.seqs) {
    seqs.push_back({{"q_start", s.q_start}, {"lq", s.lq}, {"k_start", s.k_start}, {"k_alloc", s.k_alloc},
                    {"p0", s.p0}, {"kv_end", s.kv_end}, {"logical_start", logical_start}});
    logical_start += s.kv_end - s.p0;
  }
  json packages = json::array(), prelude = json::array();
  if (in.adapter)
    for (const std::string& p : in.adapter->code.packages) packages.push_back(p);
  for (std::size_t i : in.prelude) {
    json call = call_fields(in.fixture->cases.at(i).kcase);
    const std::string name = in.fixture->cases[i].kcase.name;
    call["case"] = name.empty() ? fmt::format("#{}", i) : name;
    prelude.push_back(std::move(call));
  }
  json spec = {
      {"title", in.fixture->title},
      {"fixture", in.fixture->path},
      {"case", case_name(in)},
      {"case_index", in.case_index},
      {"kernel", in.kernel},
      {"call", k.call},
      {"property", in.fixture->property},
      {"expected", {{"verdict", to_string(e.verdict)}, {"reason_contains", e.reason_contains}, {"why", e.why}}},
      {"summary", summary(c)},
      {"device", k.device},
      {"packages", packages},
      {"tensors", in.tensors_file},
      {"causal", c.causal},
      {"alignment", to_string(c.alignment)},
      {"mask_left", m.left},
      {"mask_right", m.right},
      {"backward", c.backward()},
      {"kv_strides", to_string(c.kv_strides)},
      {"logical_kv", logical_kv},
      {"seqs", seqs},
      {"prelude", prelude},
  };
  spec.update(call_fields(c));
  if (in.adapter)
    spec["adapter"] = {{"module", in.adapter->module}, {"function", in.adapter->function},
                       {"returns_lse", in.adapter->returns_lse}};
  return spec.dump(1);
}

std::string render_repro_script(const std::string& template_text, const ReproInput& in) {
  (void)kernel_of(in);
  if (template_text.find("@@SPEC@@") == std::string::npos || template_text.find("@@HEADER@@") == std::string::npos)
    throw std::runtime_error("the repro template lacks its @@SPEC@@ or @@HEADER@@ marker");
  const std::string section = section_of(in.kernel);
  // Sections: "# >>> kernel kernel ..." to "# <<<"; kept (without the markers) when they list this kernel.
  std::string out;
  std::istringstream lines(template_text);
  bool in_section = false, keep = true;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# >>> ", 0) == 0) {
      if (in_section) throw std::runtime_error("the repro template opens a section inside a section");
      in_section = true;
      std::istringstream names(line.substr(6));
      keep = false;
      for (std::string n; names >> n;) keep = keep || n == section;
      continue;
    }
    if (line.rfind("# <<<", 0) == 0) {
      in_section = false;
      keep = true;
      continue;
    }
    if (keep) out += line + "\n";
  }
  if (in_section) throw std::runtime_error("the repro template leaves a section open");
  const FixtureCase& fc = case_of(in);
  const std::string header =
      commented(fmt::format("Reproducer: {}\nflashcheck fixture {}, case {} (#{}), kernel {}: {}.\n"
                            "The case: {}. Written by {}.",
                            in.fixture->title, in.fixture->path, case_name(in), in.case_index, in.kernel,
                            kernel_of(in).call, summary(fc.kcase), in.generated_by));
  const std::size_t h = out.find("# @@HEADER@@\n");
  out.replace(h, std::string("# @@HEADER@@\n").size(), header);
  // The JSON sits in a raw triple-quoted string: it holds no ''' (json escapes nothing of the kind, so refuse it).
  const std::string spec = repro_spec_json(in);
  if (spec.find("'''") != std::string::npos) throw std::runtime_error("the case's description contains '''");
  out.replace(out.find("@@SPEC@@"), 8, spec);
  if (in.adapter) {  // the adapter's modules as raw strings, dependencies first
    const std::string marker = "@@ADAPTER@@\n";
    const std::size_t at = out.find(marker);
    if (at == std::string::npos) throw std::runtime_error("the repro template lacks its @@ADAPTER@@ marker");
    std::string modules;
    for (const auto& [name, source] : in.adapter->code.sources)
      modules += fmt::format("    \"{}\": r'''{}''',\n", name, source);
    out.replace(at, marker.size(), modules);
  }
  return out;
}

std::string render_issue_body(const ReproInput& in) {
  const ReproKernel& k = kernel_of(in);
  const FixtureCase& fc = case_of(in);
  const Expectation e = expectation_of(in);
  std::string found = in.fixture->found_by.empty() ? "" : fmt::format(" (`{}`)", in.fixture->found_by);
  std::string s = fmt::format("# {}\n\n", in.fixture->title);
  s += fmt::format("**Kernel:** {}.\n\n", k.call);
  s += fmt::format("Found by flashcheck, a differential tester of attention kernels{}: fixture `{}`, case `{}`.\n\n",
                   found, in.fixture->path, case_name(in));
  if (!in.fixture->description.empty()) s += fmt::format("## What goes wrong\n\n{}\n\n", in.fixture->description);
  if (!e.why.empty()) s += fmt::format("On this case: {}\n\n", e.why);
  s += fmt::format("## Minimal case\n\n`{}`{}\n\n```json\n{}\n```\n\n", summary(fc.kcase),
                   fc.note.empty() ? "" : ": " + fc.note, case_to_json(fc.kcase).dump(1));
  s += "The inputs are in `case.safetensors` (q, k, v as the kernel receives them: packed rows (tokens, heads, dim), "
       "sequences by cu_seqlens, or pages (pages, page size, heads, dim) with a block table; k_new and v_new for a "
       "cache append; k_logical and v_logical, each sequence's keys in order, for the reference when the keys are "
       "paged or appended; dout for a backward case). Values are exact in the case's dtype.\n\n";
  s += "## Reproduce\n\n```sh\npython3 repro.py             # exit 1: the bug reproduces; 0: it does not\n"
       "python3 repro.py --markdown  # the environment and the observed values, for this issue\n```\n\n";
  s += fmt::format("The script needs {}. It calls the kernel as flashcheck's adapter does{} and compares it with an fp64 "
                   "reference written in torch in the script.\n\n",
                   needs(in), in.adapter ? " (the adapter's source is in the script)" : "");
  s += fmt::format(
      "## Expected vs actual\n\nExpected: every output (and LSE{}) within flash-attention's test rule of the fp64 "
      "reference: `max|kernel - ref64| <= 2 * max|baseline - ref64| + 1e-6 * max|ref64|`, where the baseline is the "
      "same attention computed in {} (flash-attention's `attention_ref(upcast=False)`); no NaN where the reference is "
      "finite.\n\nActual (flashcheck's record): **{}**{}.\n\n",
      fc.kcase.backward() ? ", dQ, dK, dV" : "", to_string(fc.kcase.dtype), to_string(e.verdict),
      e.reason_contains.empty() ? "" : fmt::format(", the message mentioning \"{}\"", e.reason_contains));
  s += "Paste the `Observed` section of `python3 repro.py --markdown` here.\n\n";
  s += "## Environment\n\nPaste the `Environment` section of `python3 repro.py --markdown` (GPU, driver, CUDA, cuDNN, "
       "torch and package versions).\n";
  return s;
}

}  // namespace flashcheck::cli

namespace flashcheck::cli {
namespace {

const ModelFixtureCase& model_case_of(const ModelReproInput& in) { return in.fixture->model_cases.at(in.model_index); }

std::string model_case_name(const ModelReproInput& in) {
  const std::string& name = model_case_of(in).mcase.name;
  return name.empty() ? fmt::format("m{}", in.model_index) : name;
}

// What flashcheck's models of the releases record for the case, one line per profile that fails, with its releases.
std::string recorded_failures(const ModelReproInput& in) {
  std::string s;
  for (const auto& [profile, e] : model_case_of(in).expect) {
    if (!records_a_failure(e)) continue;
    std::string releases;
    if (const std::optional<hf::Profile> p = hf::parse_profile(profile)) {
      const hf::ProfileSpec& spec = hf::profile_spec(*p);
      releases = spec.first_release.empty() ? fmt::format(" ({})", spec.releases)
                                            : fmt::format(" (transformers {} to {})", spec.first_release,
                                                          spec.last_release);
    }
    s += fmt::format("{}{}{}: {}{}", s.empty() ? "" : "; ", profile, releases, to_string(e.verdict),
                     e.reason_contains.empty() ? "" : fmt::format(" \"{}\"", e.reason_contains));
  }
  return s.empty() ? "every modelled release passes" : s;
}

// A release to install for the issue: the first of the first failing profile's range.
std::string a_failing_release(const ModelReproInput& in) {
  for (const auto& [profile, e] : model_case_of(in).expect)
    if (records_a_failure(e))
      if (const std::optional<hf::Profile> p = hf::parse_profile(profile))
        if (!hf::profile_spec(*p).first_release.empty()) return std::string(hf::profile_spec(*p).first_release);
  return "";
}

}  // namespace

std::string render_model_repro_script(const std::string& template_text, const ModelReproInput& in) {
  std::string out = template_text;
  for (const char* marker : {"# @@HEADER@@\n", "@@SPEC@@", "@@MODULES@@\n"})
    if (out.find(marker) == std::string::npos)
      throw std::runtime_error(fmt::format("the model repro template lacks its {} marker", marker));
  const ModelFixtureCase& mc = model_case_of(in);
  const std::string header = commented(fmt::format(
      "Reproducer: {}\nflashcheck fixture {}, model case {}: {}{}.\nWritten by {}.", in.fixture->title,
      in.fixture->path, model_case_name(in), summary(mc.mcase), mc.note.empty() ? "" : " (" + mc.note + ")",
      in.generated_by));
  out.replace(out.find("# @@HEADER@@\n"), std::string("# @@HEADER@@\n").size(), header);
  const json spec = {{"title", in.fixture->title},
                     {"source", in.fixture->source},
                     {"fixture", in.fixture->path},
                     {"case", model_case_name(in)},
                     {"summary", summary(mc.mcase)},
                     {"case_dir", in.case_dir},
                     {"paths", {"flash", "sdpa"}},
                     {"expected", recorded_failures(in)}};
  const std::string spec_text = spec.dump(1);
  if (spec_text.find("'''") != std::string::npos) throw std::runtime_error("the case's description contains '''");
  out.replace(out.find("@@SPEC@@"), 8, spec_text);
  std::string modules;
  for (const auto& [name, source] : in.driver.sources) modules += fmt::format("    \"{}\": r'''{}''',\n", name, source);
  out.replace(out.find("@@MODULES@@\n"), std::string("@@MODULES@@\n").size(), modules);
  return out;
}

std::string render_model_issue_body(const ModelReproInput& in) {
  const ModelFixtureCase& mc = model_case_of(in);
  const std::string release = a_failing_release(in);
  std::string s = fmt::format("# {}\n\n", in.fixture->title);
  if (!in.fixture->source.empty()) s += fmt::format("Related: {}\n\n", in.fixture->source);
  s += fmt::format("Found by flashcheck, a differential tester of attention kernels and of transformers' attention "
                   "paths: fixture `{}`, model case `{}`.\n\n",
                   in.fixture->path, model_case_name(in));
  if (!in.fixture->description.empty()) s += fmt::format("## What goes wrong\n\n{}\n\n", in.fixture->description);
  s += fmt::format("## Minimal case\n\n`{}`{}\n\n```json\n{}\n```\n\n", summary(mc.mcase),
                   mc.note.empty() ? "" : ": " + mc.note, model_case_to_json(mc.mcase).dump(1));
  s += "The attention layer's inputs are in `case/` (q, k, v, the attention mask and position ids, and the cache when "
       "the case has one), in the layout the model hands them to the attention function.\n\n";
  s += fmt::format("## Reproduce\n\n```sh\npip install torch transformers{}\npython3 repro.py             # exit 1: "
                   "the bug reproduces; 0: it does not; 2: this machine cannot run the case\n"
                   "python3 repro.py --markdown  # the environment and the verdicts, for this issue\n```\n\n",
                   release.empty() ? "" : "==" + release);
  s += "The script needs torch and transformers. It runs the layer through the installed release's own code on each "
       "path: eager attention, the flash-attention path (on an exact stand-in for the flash_attn package: an fp64 "
       "reference on the CPU, PyTorch's FlashAttention-2 on a GPU) and SDPA. The driver that calls the release is "
       "flashcheck's, embedded in the script.\n\n";
  s += fmt::format("## Expected vs actual\n\nExpected: every path's output within the integration rule of the exact "
                   "attention under eager's own mask, as eager's output is; no exception.\n\nActual (flashcheck's "
                   "models of the releases): {}.\n\nPaste the `Observed` section of `python3 repro.py --markdown` "
                   "here.\n\n",
                   recorded_failures(in));
  s += "## Environment\n\nPaste the `Environment` section of `python3 repro.py --markdown` (torch, transformers, GPU).\n";
  return s;
}

}  // namespace flashcheck::cli
