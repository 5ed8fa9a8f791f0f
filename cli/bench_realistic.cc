// `flashcheck bench --mix realistic`: each fixed shape of realistic_mix (search/samples.h) checked a few
// times, with the time of every stage of the device conformance path (properties/stage_profile.h) next to
// the kernel's own, so that the harness's cost per case reads as a multiple of the kernel's.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/geometry.h"
#include "properties/property.h"
#include "properties/stage_profile.h"
#include "search/samples.h"

namespace flashcheck::cli {

int run_bench_realistic(const BenchOptions& o, Kernel& k, const Property& p) {
  // Cases of 16384 tokens and more take tens of milliseconds each: a few runs per shape give a stable mean.
  const std::int64_t reps = std::min<std::int64_t>(o.cases, 20), warmup = std::min<std::int64_t>(o.warmup, 2);
  StageProfile& prof = stage_profile();
  const bool was_on = prof.on;
  prof.on = true;
  const char* ref_env = std::getenv("FLASHCHECK_REFERENCE");
  nlohmann::json rows = nlohmann::json::array();
  bool all_ok = true;
  if (!o.json)
    fmt::print("{} / {} on the realistic mix (bf16, GQA 4:1, d 128, causal), "
               "FLASHCHECK_REFERENCE={}; ms per case, mean of {} runs after {} warm-up\n"
               "{:<26} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8} {:>9} {:>8} {:>8}  verdicts\n",
               k.name(), p.name(), ref_env ? ref_env : "(unset: tensor cores where they apply)", reps, warmup, "shape",
               "inputs", "output", "kernel", "ref+base", "compare", "canary", "harness", "h/kernel", "total");
  for (KernelCase c : realistic_mix(o.seed)) {
    if (is_gradient_property(p)) c.dout = DoutRecipe{};  // the backward's timing: the same shapes with dO
    for (std::int64_t i = 0; i < warmup; ++i) p.check(k, c);
    prof.clear();
    std::int64_t pass = 0, fail = 0, other = 0;
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < reps; ++i) {
      const Verdict v = p.check(k, c);
      pass += v.kind == VerdictKind::kPass;
      fail += v.kind == VerdictKind::kFail;
      other += v.kind != VerdictKind::kPass && v.kind != VerdictKind::kFail;
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(reps);
    const auto ms = [&](const char* stage) {
      const auto it = prof.seconds.find(stage);
      return it == prof.seconds.end() || prof.cases == 0 ? 0.0 : 1e3 * it->second / static_cast<double>(prof.cases);
    };
    const double kernel = ms("kernel");
    // The harness: everything of a case but the kernel (inputs, references, comparison, output buffer, canaries).
    double harness = 0;
    for (const auto& [stage, s] : prof.seconds)
      if (stage != "kernel" && prof.cases > 0) harness += 1e3 * s / static_cast<double>(prof.cases);
    const std::string shape =
        fmt::format("L {} B {} H {}{}", c.seqs[0].q_len, c.seqs.size(), c.heads, c.window.left >= 0 ? " win 1024" : "");
    all_ok = all_ok && fail + other == 0;
    rows.push_back({{"shape", shape},         {"inputs_ms", ms("inputs")},    {"output_ms", ms("output")},
                    {"kernel_ms", kernel},    {"reference_baseline_ms", ms("reference+baseline")},
                    {"compare_ms", ms("compare")}, {"canaries_ms", ms("canaries")}, {"harness_ms", harness},
                    {"harness_over_kernel", kernel > 0 ? harness / kernel : 0.0}, {"total_ms", 1e3 * total},
                    {"pass", pass},           {"fail", fail},                 {"other", other}});
    if (!o.json)
      fmt::print("{:<26} {:>8.2f} {:>8.2f} {:>8.2f} {:>10.2f} {:>8.2f} {:>8.2f} {:>9.2f} {:>8.1f} {:>8.2f}  {} pass {} fail {} other\n",
                 shape, ms("inputs"), ms("output"), kernel, ms("reference+baseline"), ms("compare"), ms("canaries"), harness,
                 kernel > 0 ? harness / kernel : 0.0, 1e3 * total, pass, fail, other);
    std::cout.flush();
  }
  if (!o.json && prof.seconds.empty())
    fmt::print("(no stage times: this kernel does not take the device conformance path)\n");
  prof.clear();
  prof.on = was_on;
  if (o.json) std::cout << nlohmann::json{{"kernel", k.name()}, {"property", p.name()}, {"mix", "realistic"}, {"runs_per_shape", reps}, {"shapes", rows}}.dump(2) << "\n";
  return all_ok ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
