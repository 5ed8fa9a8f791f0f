// `flashcheck repro`: a fixture's case as something a kernel's maintainers can run without flashcheck: a standalone
// Python script (torch and the kernel's own package only) that calls the kernel as flashcheck's adapter does, checks it
// against an fp64 reference under flash-attention's test rule and exits 1 when the bug reproduces; the case's tensors in
// a safetensors file beside it; and an issue body in Markdown. The script is tools/repro/repro_template.py with the
// sections of other kernels left out and the case's description (and a Python kernel's adapter) filled in.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/fixture.h"

namespace flashcheck::cli {

// Why `kernel` cannot get a reproducer ("" when it can): flashcheck's own kernels have no upstream, and plugins (.so)
// are not written as scripts. A Python kernel (py:package.module:function) is: its adapter's source goes into it.
std::string repro_unsupported_kernel(const std::string& kernel);
// Why this case cannot be written for `kernel` ("" when it can): layouts the script does not lay out for that kernel
// (paged K/V and a KV-cache append for the packed aten calls, non-contiguous K/V strides, a backward over pages or a
// cache), or a dense kernel given sequences of different lengths.
std::string repro_unsupported_case(const KernelCase& c, const std::string& kernel);
// Whether the script gives `kernel` paged or appended keys in logical order, each sequence's keys one after another
// (k_logical and v_logical beside the case's tensors): the Python adapters' reference reads them, and the per-sequence
// calls (the SDPA adapters, which gather each sequence's keys) take them as the adapter does.
bool repro_keys_in_logical_order(const std::string& kernel);
// Whether `kernel` is a Python kernel's name (py:...), resolved through the Python bridge.
inline bool is_python_kernel(const std::string& kernel) { return kernel.rfind("py:", 0) == 0; }
// Whether a fixture records a failure (fail, error, crash or timeout): what a reproducer reproduces.
inline bool records_a_failure(const Expectation& e) {
  return e.verdict != VerdictKind::kPass && e.verdict != VerdictKind::kUnsupported;
}
// The kernels a script can be written for, for messages and --help.
std::vector<std::string> repro_kernels();

// Python modules as a script embeds them: a module and the modules it imports that are found on the search path, in
// the order they must run (dependencies first), and the top-level packages it imports from elsewhere (the kernel's
// own, transformers), whose versions the script prints.
struct EmbeddedModules {
  std::vector<std::pair<std::string, std::string>> sources;  // (module name, source text)
  std::vector<std::string> packages;
};

// Module `module` and what it imports from `search_path`'s folders; throws std::runtime_error naming a module that is
// not found or cannot be embedded (the script holds each in a raw triple-quoted string).
EmbeddedModules embed_modules(const std::string& module, const std::vector<std::string>& search_path);

// A Python kernel's adapter as the script embeds it, and what its contract says the script needs.
struct ReproAdapter {
  std::string module, function;  // py:MODULE:FUNCTION
  std::string device;            // the contract's: "cpu" or "cuda"
  bool returns_lse = false;
  EmbeddedModules code;
};

// The adapter of py:MODULE:FUNCTION with its sources found under `search_path` (FLASHCHECK_PYTHONPATH's folders);
// throws std::runtime_error naming the module that is not found or cannot be embedded.
ReproAdapter find_repro_adapter(const std::string& kernel, const std::vector<std::string>& search_path);

struct ReproInput {
  const Fixture* fixture = nullptr;
  std::size_t case_index = 0;
  std::string kernel;
  std::string tensors_file = "case.safetensors";  // the name the script loads, beside it
  std::string generated_by;                       // "flashcheck 0.1.0 (commit ...)"
  std::optional<ReproAdapter> adapter;            // a Python kernel's (set for py:... kernels)
  // Earlier cases of the fixture the script runs first, forward and unjudged, with their tensors in the same file under
  // "preludeI." (a Python kernel: replay runs a fixture's cases in one process, and state can carry over).
  std::vector<std::size_t> prelude;
};

// The case description the script reads (its SPEC), as JSON text.
std::string repro_spec_json(const ReproInput& in);
// The script: `template_text` with the sections for other kernels removed and the SPEC and header filled in.
// Throws std::runtime_error when the template lacks its markers.
std::string render_repro_script(const std::string& template_text, const ReproInput& in);
// ISSUE.md: title, the minimal case, expected and actual, the rule, how to run the script, where the environment goes.
std::string render_issue_body(const ReproInput& in);

// A model-level (transformers) case: the script runs the attention layer through the installed release's own code
// with flashcheck's driver (tools/hf_live) embedded, and the case exported beside it (`flashcheck export`'s format).
struct ModelReproInput {
  const Fixture* fixture = nullptr;
  std::size_t model_index = 0;
  std::string case_dir = "case";  // the export folder, beside the script
  EmbeddedModules driver;         // tools/hf_live/live.py and what it imports
  std::string generated_by;
};
std::string render_model_repro_script(const std::string& template_text, const ModelReproInput& in);
std::string render_model_issue_body(const ModelReproInput& in);

}  // namespace flashcheck::cli
