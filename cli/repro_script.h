// `flashcheck repro`: a fixture's case as something a kernel's maintainers can run without flashcheck: a standalone
// Python script (torch and the kernel's own package only) that calls the kernel as flashcheck's adapter does, checks it
// against an fp64 reference under flash-attention's test rule and exits 1 when the bug reproduces; the case's tensors in
// a safetensors file beside it; and an issue body in Markdown. The script is tools/repro/repro_template.py with the
// sections of other kernels left out and the case's description filled in.
#pragma once

#include <string>
#include <vector>

#include "core/fixture.h"

namespace flashcheck::cli {

// Why `kernel` cannot get a reproducer ("" when it can): flashcheck's own kernels have no upstream, and the Python
// adapters' kernels (py:...) and plugins are not written as scripts yet.
std::string repro_unsupported_kernel(const std::string& kernel);
// Why this case cannot be written for `kernel` ("" when it can): layouts the script does not lay out (paged K/V, a
// KV-cache append, non-contiguous K/V strides), or a dense kernel given sequences of different lengths.
std::string repro_unsupported_case(const KernelCase& c, const std::string& kernel);
// The kernels a script can be written for, for messages and --help.
std::vector<std::string> repro_kernels();

struct ReproInput {
  const Fixture* fixture = nullptr;
  std::size_t case_index = 0;
  std::string kernel;
  std::string tensors_file = "case.safetensors";  // the name the script loads, beside it
  std::string generated_by;                       // "flashcheck 0.1.0 (commit ...)"
};

// The case description the script reads (its SPEC), as JSON text.
std::string repro_spec_json(const ReproInput& in);
// The script: `template_text` with the sections for other kernels removed and the SPEC and header filled in.
// Throws std::runtime_error when the template lacks its markers.
std::string render_repro_script(const std::string& template_text, const ReproInput& in);
// ISSUE.md: title, the minimal case, expected and actual, the rule, how to run the script, where the environment goes.
std::string render_issue_body(const ReproInput& in);

}  // namespace flashcheck::cli
