#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/report.h"
#include "properties/property.h"
#include "search/samples.h"

namespace flashcheck::cli {

// Throughput of one property on one kernel over pre-generated cases of the standard varlen mix (or of
// the kernel's own generator): cases are drawn first, so the figure is the harness's per-case cost
// (data generation, kernel, reference, baseline, comparison) and not RapidCheck's.
int run_bench(const BenchOptions& o) {
  // The cases are generated and held before timing: their count is bounded.
  if (!check_count("bench", "--cases", o.cases, 1, kMaxPreGeneratedCases) ||
      !check_count("bench", "--warmup", o.warmup, 0, kMaxPreGeneratedCases))
    return kExitUsage;
  std::vector<Kernel*> kernels;
  if (!resolve_kernels({o.kernel}, kernels)) return kExitUsage;
  std::vector<const Property*> props;
  if (!resolve_properties({o.property}, props)) return kExitUsage;
  Kernel& k = *kernels[0];
  const Property& p = *props[0];
  if (o.mix == "realistic") return run_bench_realistic(o, k, p);
  const std::vector<KernelCase> cases = o.mix == "standard" ? sample_standard_mix(o.cases, o.seed)
                                                             : sample_kernel_cases(k.contract(), p.requirements(), o.cases, o.seed);
  // Warm-up: module loading, handle creation and allocator growth stay out of the figure.
  for (std::int64_t i = 0; i < std::min<std::int64_t>(o.warmup, o.cases); ++i) p.check(k, cases[static_cast<std::size_t>(i)]);
  std::int64_t pass = 0, fail = 0, unsupported = 0, other = 0;
  double tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const KernelCase& c : cases) {
    const Verdict v = p.check(k, c);
    pass += v.kind == VerdictKind::kPass;
    fail += v.kind == VerdictKind::kFail;
    unsupported += v.kind == VerdictKind::kUnsupported;
    other += v.kind == VerdictKind::kError || v.kind == VerdictKind::kCrash || v.kind == VerdictKind::kTimeout;
    for (const Sequence& s : c.seqs) tokens += static_cast<double>(s.q_len);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nlohmann::json j = {{"kernel", k.name()}, {"property", p.name()}, {"mix", o.mix},     {"cases", o.cases},
                            {"seconds", seconds},  {"cases_per_s", o.cases / seconds},     {"pass", pass},
                            {"fail", fail},        {"unsupported", unsupported},           {"error", other},
                            {"query_tokens_per_case", tokens / std::max<std::int64_t>(o.cases, 1)}};
  if (o.json) std::cout << j.dump(2) << "\n";
  else
    fmt::print("{} / {} on the {} mix: {} cases in {:.2f} s = {:.1f} cases/s ({} pass, {} fail, {} unsupported, {} error); "
               "{:.0f} query tokens per case\n",
               k.name(), p.name(), o.mix, o.cases, seconds, o.cases / seconds, pass, fail, unsupported, other,
               tokens / std::max<std::int64_t>(o.cases, 1));
  return fail + other == 0 ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
