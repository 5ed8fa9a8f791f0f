#include "search/replay.h"

#include <fmt/format.h>
#include <algorithm>
#include <optional>

#include "core/error.h"
#include "core/files.h"
#include "core/kernel_case.h"
#include "oracles/hf_flash_path.h"
#include "properties/conformance.h"
#include "properties/integration_property.h"
#include "properties/property.h"

namespace flashcheck {

namespace {

// A kernel run on a case its contract excludes, for a fixture that says so (a known crash or defect): the
// kernel itself, with a check() that lets every case through unless the kernel cannot run on this machine.
class OutsideContract : public Kernel {
 public:
  explicit OutsideContract(Kernel& k) : k_(k) {}
  std::string_view name() const override { return k_.name(); }
  const Contract& contract() const override { return k_.contract(); }
  std::string unavailable_reason() const override { return k_.unavailable_reason(); }
  ContractCheck check(const KernelCase& c) const override {
    if (std::string why = k_.unavailable_reason(); !why.empty()) return {false, std::move(why), {}};
    (void)c;
    return {};
  }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override { k_.run(c, in, out); }
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, GradBuffer& g) override {
    k_.run_backward(c, in, fwd, g);
  }
  bool on_device() const override { return k_.on_device(); }
  std::string_view device() const override { return k_.device(); }
  void run_device(const device::DeviceCase& in, device::DeviceOutput& out) override { k_.run_device(in, out); }
  std::string sticky_error() const override { return k_.sticky_error(); }

 private:
  Kernel& k_;
};

}  // namespace

void judge(ReplayRecord& r) {
  const VerdictKind got = r.verdict.kind;
  const VerdictKind want = r.has_expectation ? r.expected.verdict : VerdictKind::kPass;
  const bool reason_ok =
      r.expected.reason_contains.empty() || r.verdict.reason.find(r.expected.reason_contains) != std::string::npos;
  if (got == want && (want == VerdictKind::kPass || reason_ok)) {
    r.as_expected = true;
    r.outcome = want == VerdictKind::kPass || want == VerdictKind::kUnsupported ? std::string(to_string(got)) : "xfail";
  } else if (got == VerdictKind::kUnsupported && !r.has_expectation) {
    r.as_expected = true;  // outside the contract: reported, never counted as a pass
    r.outcome = "unsupported";
  } else {
    r.as_expected = false;
    r.outcome = (got == VerdictKind::kPass && want != VerdictKind::kPass) ? "xpass" : std::string(to_string(got));
  }
}

std::vector<Fixture> load_fixtures(const std::vector<std::string>& paths) {
  std::vector<Fixture> fixtures;
  for (const std::string& p : paths) {
    if (!path_exists(p)) throw InputError(p, "", "no such file or directory");
    const std::vector<std::string> files = find_fixture_files(p);
    // An empty corpus is a wrong path, not a clean run.
    if (files.empty()) throw InputError(p, "", "no fixture files (*.json) in this folder");
    for (const std::string& file : files) {
      Fixture fx = load_fixture(file);
      const bool model_only = fx.cases.empty() && integration_path(fx.property).has_value();
      if (!model_only && !find_property(fx.property))
        throw InputError(file, "property", "unknown property \"" + fx.property + "\"");
      // Kernel cases are judged by kernel-level properties, model cases by the integration properties (any
      // fixture's model cases replay on the flash path unless its property names another integration property).
      if (!fx.cases.empty() && integration_path(fx.property))
        throw InputError(file, "property",
                         fmt::format("\"{}\" judges model cases (model_cases); kernel cases need a kernel-level property", fx.property));
      const Property* p = find_property(fx.property);
      const bool backward = p && is_gradient_property(*p);
      for (std::size_t i = 0; i < fx.cases.size(); ++i) {
        // A gradient property judges backward cases only; a forward one ignores a dout.
        if (backward && !fx.cases[i].kcase.backward())
          throw InputError(file, fmt::format("cases[{}].dout", i),
                           fmt::format("missing: property {} judges the backward, whose cases give the upstream gradient's "
                                       "recipe (\"dout\": {{\"dist\": \"normal\"}})", fx.property));
        for (const auto& [kernel, x] : fx.cases[i].expect) {
          if (!is_known_kernel_name(kernel))
            throw InputError(file, fmt::format("cases[{}].expect.{}", i, kernel),
                             "unknown kernel (flashcheck list shows this build's kernels; CUDA builds add the GPU ones)");
          const Kernel* k = builtin_registry().find_registered(kernel);
          if (backward && k && !k->contract().backward.available && x.verdict != VerdictKind::kUnsupported)
            throw InputError(file, fmt::format("cases[{}].expect.{}", i, kernel),
                             fmt::format("{} has no backward: a backward case can only expect `unsupported` of it", kernel));
        }
      }
      fixtures.push_back(std::move(fx));
    }
  }
  return fixtures;
}

std::vector<ReplayRecord> replay_fixtures(const std::vector<Fixture>& fixtures, const std::vector<Kernel*>& kernels,
                                          const IsolationOptions& iso) {
  struct Job {
    const Fixture* fixture;
    std::size_t case_index;
    Kernel* kernel;
    std::optional<hf::Profile> profile;  // set for model cases
  };
  std::vector<Job> jobs;
  for (const Fixture& f : fixtures) {
    for (std::size_t i = 0; i < f.cases.size(); ++i)
      for (Kernel* k : kernels) jobs.push_back({&f, i, k, std::nullopt});
    for (std::size_t i = 0; i < f.model_cases.size(); ++i)
      for (Kernel* k : kernels)
        for (hf::Profile p : hf::all_profiles())
          if (f.profiles.empty() || std::count(f.profiles.begin(), f.profiles.end(), hf::to_string(p)))
            jobs.push_back({&f, i, k, p});
  }

  auto label = [&](std::size_t j) {
    Verdict v;
    v.kernel = jobs[j].profile ? fmt::format("{}@{}", hf::to_string(*jobs[j].profile), jobs[j].kernel->name())
                               : std::string(jobs[j].kernel->name());
    return v;
  };
  auto run = [&](std::size_t j) -> std::vector<Verdict> {
    if (jobs[j].profile) {
      const AnyCase c = jobs[j].fixture->model_cases[jobs[j].case_index].mcase;
      // A fixture of "integration-sdpa" replays the SDPA path, "-backward" the training step; any other the flash path.
      const IntegrationKind kind = integration_kind(jobs[j].fixture->property).value_or(IntegrationKind{});
      return {integration_property(*jobs[j].profile, hf::PathDefect::kNone, kind)->judge(*jobs[j].kernel, c).verdict};
    }
    const FixtureCase& fc = jobs[j].fixture->cases[jobs[j].case_index];
    const auto it = fc.expect.find(std::string(jobs[j].kernel->name()));
    ConformanceOptions opt;
    opt.ignore_contract = it != fc.expect.end() && it->second.run_outside_contract;
    const std::string& property = jobs[j].fixture->property;
    if (property != "conformance") {
      const Property* p = find_property(property);
      if (!p) throw std::runtime_error("unknown property '" + property + "' in " + jobs[j].fixture->path);
      if (opt.ignore_contract) {
        OutsideContract outside(*jobs[j].kernel);
        return {p->check(outside, fc.kcase)};
      }
      return {p->check(*jobs[j].kernel, fc.kcase)};
    }
    const CaseTensors t = fc.tensors ? *fc.tensors : materialize(fc.kcase);
    return {check_conformance(*jobs[j].kernel, fc.kcase, t, opt)};
  };
  const auto verdicts = run_isolated(jobs.size(), run, label, iso);

  std::vector<ReplayRecord> records;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].profile) {
      const ModelFixtureCase& mc = jobs[j].fixture->model_cases[jobs[j].case_index];
      ReplayRecord r;
      r.fixture = jobs[j].fixture->path;
      r.case_index = jobs[j].case_index;
      r.model_case = true;
      r.case_summary = mc.mcase.name.empty() ? summary(mc.mcase) : mc.mcase.name + ": " + summary(mc.mcase);
      r.verdict = verdicts[j].front();
      const auto it = mc.expect.find(std::string(hf::to_string(*jobs[j].profile)));
      if (it != mc.expect.end()) {
        r.has_expectation = true;
        r.expected = it->second;
      }
      judge(r);
      // A kernel that cannot take the call has nothing to say about the integration: report, never fail.
      if (r.verdict.kind == VerdictKind::kUnsupported) {
        r.as_expected = true;
        r.outcome = "unsupported";
      }
      records.push_back(std::move(r));
      continue;
    }
    const FixtureCase& fc = jobs[j].fixture->cases[jobs[j].case_index];
    ReplayRecord r;
    r.fixture = jobs[j].fixture->path;
    r.case_index = jobs[j].case_index;
    r.case_summary = fc.kcase.name.empty() ? summary(fc.kcase) : fc.kcase.name + ": " + summary(fc.kcase);
    r.verdict = verdicts[j].front();
    const auto it = fc.expect.find(std::string(jobs[j].kernel->name()));
    if (it != fc.expect.end()) {
      r.has_expectation = true;
      r.expected = it->second;
    }
    judge(r);
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace flashcheck
