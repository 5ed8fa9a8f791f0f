// `flashcheck export`: model-level cases with the C++ oracle's results, for tools/hf_crosscheck/crosscheck.py to check
// against transformers itself. The format is that script's input (its docstring and README's
// "Cross-check" section): DIR/manifest.json plus one safetensors file per case (cli/export_cases.h).
#include <fmt/format.h>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/export_cases.h"
#include "cli/option_checks.h"
#include "core/error.h"

namespace flashcheck::cli {

int run_export(const ExportOptions& o) {
  if (!check_count("export", "--generated", o.generated, 0, kMaxPreGeneratedCases)) return kExitUsage;
  const auto profile = hf::parse_profile(o.profile);
  if (!profile) {
    fmt::print(stderr, "flashcheck export: unknown profile '{}' ({})\n", o.profile, hf::profile_name_list());
    return kExitUsage;
  }
  std::vector<NamedModelCase> cases;
  try {
    cases = collect_model_cases(o.fixtures, o.generated, o.seed);
    write_export(o.out, cases, *profile, o.force);
  } catch (const InputError& e) {
    fmt::print(stderr, "flashcheck export: {}\n", e.what());
    return kExitUsage;
  } catch (const std::runtime_error& e) {
    fmt::print(stderr, "flashcheck export: {}\n", e.what());
    return kExitUsage;
  }
  fmt::print("exported {} model cases ({} from fixtures, {} generated) to {}\n", cases.size(), cases.size() - o.generated,
             o.generated, o.out);
  return kExitOk;
}

}  // namespace flashcheck::cli
