#include "cli/repro_script.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/case_json.h"
#include "core/geometry.h"
#include "kernels/flash_args.h"

namespace flashcheck::cli {
namespace {

using nlohmann::json;

// The kernels a script is written for: what the adapter calls, where, and how it lays the case out.
struct ReproKernel {
  const char* name;
  const char* device;
  bool per_sequence;  // one call per sequence on its rows and keys (leftpad and seqused_k become the keys it gets)
  bool dense;         // (B, L, H, d): one q_len and one k_len for the batch, no slack
  const char* call;
};

constexpr ReproKernel kKernels[] = {
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

const ReproKernel& kernel_of(const ReproInput& in) {
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
  if (kernel.rfind("py:", 0) == 0)
    return fmt::format("{} runs through a Python adapter, which repro does not write as a script yet "
                       "(FlexAttention, FlashInfer and FlashAttention-4 reproduce with `flashcheck replay`)",
                       kernel);
  std::string names;
  for (const ReproKernel& k : kKernels) names += (names.empty() ? "" : ", ") + std::string(k.name);
  return fmt::format("no reproducer is written for kernel '{}' (repro writes scripts for: {})", kernel, names);
}

std::string repro_unsupported_case(const KernelCase& c, const std::string& kernel) {
  const ReproKernel* k = find_kernel(kernel);
  if (!k) return repro_unsupported_kernel(kernel);
  if (c.kv_storage == KvStorage::kPaged) return "paged K/V (a block table) is not laid out by the script yet";
  if (c.kv_cache) return "a KV-cache append is not laid out by the script yet";
  if (c.softcap > 0) return fmt::format("{} takes no softcap", kernel);
  if (c.kv_strides != KvStrides::kContiguous)
    return fmt::format("K/V strides '{}' are not laid out by the script yet", to_string(c.kv_strides));
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

std::string repro_spec_json(const ReproInput& in) {
  const ReproKernel& k = kernel_of(in);
  const FixtureCase& fc = case_of(in);
  const KernelCase& c = fc.kcase;
  const CaseGeometry g = geometry(c);
  const MaskRule m = mask_rule(c);
  const Expectation e = expectation_of(in);
  json seqs = json::array();
  for (const SeqGeometry& s : g.seqs)
    seqs.push_back({{"q_start", s.q_start}, {"lq", s.lq}, {"k_start", s.k_start}, {"k_alloc", s.k_alloc},
                    {"p0", s.p0}, {"kv_end", s.kv_end}});
  const FlashArgs a = flash_args(c);
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
      {"packages", json::array()},
      {"tensors", in.tensors_file},
      {"dtype", to_string(c.dtype)},
      {"heads", c.heads},
      {"kv_heads", c.kv_heads},
      {"head_dim", c.head_dim},
      {"v_head_dim", c.v_head_dim},
      {"causal", c.causal},
      {"alignment", to_string(c.alignment)},
      {"mask_left", m.left},
      {"mask_right", m.right},
      {"scale", c.softmax_scale()},
      {"backward", c.backward()},
      {"total_q", g.total_q},
      {"seqs", seqs},
      {"flash_args",
       {{"cu_seqlens_q", a.cu_seqlens_q},
        {"cu_seqlens_k", a.cu_seqlens_k},
        {"seqused_k", a.seqused_k},
        {"max_seqlen_q", a.max_seqlen_q},
        {"max_seqlen_k", a.max_seqlen_k},
        {"window_left", a.window_left},
        {"window_right", a.window_right}}},
  };
  return spec.dump(1);
}

std::string render_repro_script(const std::string& template_text, const ReproInput& in) {
  (void)kernel_of(in);
  if (template_text.find("@@SPEC@@") == std::string::npos || template_text.find("@@HEADER@@") == std::string::npos)
    throw std::runtime_error("the repro template lacks its @@SPEC@@ or @@HEADER@@ marker");
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
      for (std::string n; names >> n;) keep = keep || n == in.kernel;
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
       "sequences by cu_seqlens; dout for a backward case). Values are exact in the case's dtype.\n\n";
  s += "## Reproduce\n\n```sh\npython3 repro.py             # exit 1: the bug reproduces; 0: it does not\n"
       "python3 repro.py --markdown  # the environment and the observed values, for this issue\n```\n\n"
       "The script needs only torch. It calls the kernel as flashcheck's adapter does and compares it with an fp64 "
       "reference written in torch in the script.\n\n";
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
