#include <atomic>
#include <barrier>
#include <chrono>
#include <exception>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/option_checks.h"
#include "cli/report.h"
#include "kernels/devices.h"
#include "properties/property.h"
#include "properties/stage_profile.h"
#include "search/samples.h"

namespace flashcheck::cli {
namespace {

struct Tally {
  std::atomic<std::int64_t> pass{0}, fail{0}, unsupported{0}, other{0};
  void add(const Verdict& v) {
    pass += v.kind == VerdictKind::kPass;
    fail += v.kind == VerdictKind::kFail;
    unsupported += v.kind == VerdictKind::kUnsupported;
    other += v.kind == VerdictKind::kError || v.kind == VerdictKind::kCrash || v.kind == VerdictKind::kTimeout;
  }
};

// What --in-flight above 1 needs, checked before any case runs: the threads share one GPU through their own
// streams, which only the device paths of conformance and grad-conformance use; FLASHCHECK_PROFILE synchronizes the
// whole device per stage, which would serialize them again.
std::string in_flight_problem(const BenchOptions& o, const Kernel& k) {
  if (o.in_flight == 1) return "";
  if (!cuda_build()) return "needs the CUDA build (the cuda preset)";
  if (!k.on_device()) return fmt::format("needs a CUDA kernel; {} runs on the {}", k.name(), k.device());
  const bool conformance = o.property == "conformance" || (o.pass == "backward" && o.property == "grad-conformance");
  if (!conformance) return "runs the conformance property only (grad-conformance with --pass backward)";
  if (o.pass == "backward" && !k.has_device_backward())
    return fmt::format("needs a kernel whose backward runs on the device; {}'s backward takes the host path", k.name());
  if (o.mix == "realistic") return "does not apply to --mix realistic, which times one case at a time";
  if (stage_profile().on) return "cannot be combined with FLASHCHECK_PROFILE, which synchronizes the device per stage";
  return "";
}

// Runs the warm-up (module loading, handle creation and allocator growth stay out of the figure) and then
// the timed cases, returning the seconds they took. With one case in flight, one loop on this thread;
// with more, each thread moves to its own stream, runs its share of the warm-up (so that each grows its
// own device buffers), waits for the others, and then takes cases from a shared counter.
double run_cases(const BenchOptions& o, Kernel& k, const Property& p, const std::vector<KernelCase>& cases, Tally& tally) {
  const auto warmup = static_cast<std::size_t>(std::min<std::int64_t>(o.warmup, o.cases));
  if (o.in_flight == 1) {
    for (std::size_t i = 0; i < warmup; ++i) p.check(k, cases[i]);
    const auto start = std::chrono::steady_clock::now();
    for (const KernelCase& c : cases) tally.add(p.check(k, c));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const auto threads = static_cast<std::size_t>(o.in_flight);
  std::atomic<std::size_t> next{0};
  std::chrono::steady_clock::time_point start;
  std::barrier ready(static_cast<std::ptrdiff_t>(threads), [&]() noexcept { start = std::chrono::steady_clock::now(); });
  // A harness error in a thread (not the kernel's: that is a verdict) is counted and the others go on; an
  // exception must not leave a thread, which would end the process.
  auto judge = [&](std::size_t i, bool timed) {
    try {
      const Verdict v = p.check(k, cases[i]);
      if (timed) tally.add(v);
    } catch (const std::exception& e) {
      if (timed) ++tally.other;
      fmt::print(stderr, "flashcheck bench: case {}: {}\n", i, e.what());
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        use_thread_stream();
      } catch (const std::exception& e) {
        fmt::print(stderr, "flashcheck bench: thread {} could not take its own stream: {}\n", t, e.what());
        ready.arrive_and_drop();
        return;
      }
      for (std::size_t i = t; i < warmup; i += threads) judge(i, false);
      ready.arrive_and_wait();
      for (std::size_t i = next++; i < cases.size(); i = next++) judge(i, true);
    });
  for (std::thread& th : pool) th.join();
  // Cases no thread took (every thread failed to take its stream) count as errors, never as passes.
  if (const std::size_t taken = std::min(next.load(), cases.size()); taken < cases.size())
    tally.other += static_cast<std::int64_t>(cases.size() - taken);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// Throughput of one property on one kernel over pre-generated cases of the standard varlen mix (or of
// the kernel's own generator): cases are drawn first, so the figure is the harness's per-case cost
// (data generation, kernel, reference, baseline, comparison) and not RapidCheck's.
int run_bench(const BenchOptions& o) {
  // The cases are generated and held before timing: their count is bounded.
  if (!check_count("bench", "--cases", o.cases, 1, kMaxPreGeneratedCases) ||
      !check_count("bench", "--warmup", o.warmup, 0, kMaxPreGeneratedCases) ||
      !check_count("bench", "--in-flight", o.in_flight, 1, kMaxCasesInFlight))
    return kExitUsage;
  std::vector<Kernel*> kernels;
  if (!resolve_kernels({o.kernel}, kernels)) return kExitUsage;
  std::vector<const Property*> props;
  const bool backward = o.pass == "backward";
  if (!resolve_properties({backward && o.property == "conformance" ? std::string("grad-conformance") : o.property}, props))
    return kExitUsage;
  Kernel& k = *kernels[0];
  const Property& p = *props[0];
  if (is_gradient_property(p) != backward) {
    fmt::print(stderr, "flashcheck bench: --pass {} cannot time {}, a property of the {} pass\n", o.pass, p.name(),
               is_gradient_property(p) ? "backward" : "forward");
    return kExitUsage;
  }
  if (const std::string why = in_flight_problem(o, k); !why.empty()) {
    fmt::print(stderr, "flashcheck bench: --in-flight {} {}\n", o.in_flight, why);
    return kExitUsage;
  }
  if (o.mix == "realistic") return run_bench_realistic(o, k, p);
  std::vector<KernelCase> cases =
      o.mix == "standard" ? sample_standard_mix(o.cases, o.seed)
                          : sample_kernel_cases(generation_contract(k.contract(), p.requirements()), p.requirements(), o.cases, o.seed);
  // A gradient property times the backward: the standard mix's cases with the default upstream gradient.
  if (is_gradient_property(p))
    for (KernelCase& c : cases)
      if (!c.dout) c.dout = DoutRecipe{};
  Tally tally;
  const double seconds = run_cases(o, k, p, cases, tally);
  double tokens = 0;
  for (const KernelCase& c : cases)
    for (const Sequence& s : c.seqs) tokens += static_cast<double>(s.q_len);
  const std::int64_t pass = tally.pass, fail = tally.fail, unsupported = tally.unsupported, other = tally.other;
  const nlohmann::json j = {{"kernel", k.name()},
                            {"property", p.name()},
                            {"mix", o.mix},
                            {"cases", o.cases},
                            {"in_flight", o.in_flight},
                            {"seconds", seconds},
                            {"cases_per_s", o.cases / seconds},
                            {"pass", pass},
                            {"fail", fail},
                            {"unsupported", unsupported},
                            {"error", other},
                            {"query_tokens_per_case", tokens / std::max<std::int64_t>(o.cases, 1)}};
  if (o.json) std::cout << j.dump(2) << "\n";
  else
    fmt::print("{} / {} on the {} mix, {} in flight: {} cases in {:.2f} s = {:.1f} cases/s ({} pass, {} fail, {} unsupported, {} error); "
               "{:.0f} query tokens per case\n",
               k.name(), p.name(), o.mix, o.in_flight, o.cases, seconds, o.cases / seconds, pass, fail, unsupported, other,
               tokens / std::max<std::int64_t>(o.cases, 1));
  return fail + other == 0 ? kExitOk : kExitFailure;
}

}  // namespace flashcheck::cli
