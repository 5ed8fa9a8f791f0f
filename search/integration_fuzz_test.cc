// The search driver on the model level: the integration property searched like any other, in this
// process and in isolated workers, where a crashing kernel becomes a `crash` finding with its model case
// saved, in fuzz and in replay.
#include <filesystem>
#include <gtest/gtest.h>
#include <csignal>

#include "core/fixture.h"
#include "kernels/kernel.h"
#include "properties/integration_property.h"
#include "search/fuzz.h"
#include "search/replay.h"

namespace flashcheck {
namespace {

using hf::Profile;

Kernel& tiled() { return *builtin_registry().find("tiled-cpu"); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(IntegrationFuzz, Hf455FindsIssue39814WithinAThousandCases) {
  FuzzOptions o;
  o.cases = 1000;
  o.seed = 1;
  o.stop_at_first_failure = false;
  o.shrink = {400, 60};
  const FuzzReport r = run_fuzz(tiled(), *integration_property(Profile::kHf455), o);
  const Finding* error = nullptr;  // the smallest of the findings with #39814's error
  auto size = [](const Finding& f) { return f.model_case->batch + f.model_case->q_len + f.model_case->past; };
  for (const Finding& f : r.findings)
    if (f.verdict.kind == VerdictKind::kError && contains(f.verdict.reason, "max(): Expected reduction dim") &&
        f.model_case && (!error || size(f) < size(*error)))
      error = &f;
  ASSERT_NE(error, nullptr) << r.findings.size() << " findings in " << r.cases << " cases";
  EXPECT_LE(error->case_index, 1000);
  EXPECT_FALSE(error->reproduce.empty());
  ASSERT_TRUE(error->model_case.has_value());
  const ModelCase& m = *error->model_case;
  EXPECT_EQ(m.q_len, 1) << summary(m);   // decode
  EXPECT_LE(m.past, 2) << summary(m);    // from a cache of a token or two
  EXPECT_LE(m.batch, 2) << summary(m);
  EXPECT_EQ(m.heads, 1) << summary(m);
}

TEST(IntegrationFuzz, MainIsCleanApartFromDocumentedDivergences) {
  FuzzOptions o;
  o.cases = 400;
  o.seed = 3;
  const FuzzReport r = run_fuzz(tiled(), *integration_property(Profile::kHfMain), o);
  EXPECT_TRUE(r.findings.empty()) << describe(r.findings[0].verdict);
  EXPECT_EQ(r.cases, 400);
  std::int64_t known = 0;
  for (const auto& [id, n] : r.known_divergences) known += n;
  EXPECT_GT(known, 0);  // the generator reaches them; they are counted, not hidden
  EXPECT_LT(r.worst_bound_use, 1.0);
}

// The training step: through the flash path on a correct kernel's backward, and through the SDPA path, clean on
// hf-main (documented divergences counted); only training calls are drawn.
TEST(IntegrationFuzz, BackwardOnMainIsCleanOnTrainingCalls) {
  for (const IntegrationKind kind : {IntegrationKind{hf::HfPath::kFlash, true}, IntegrationKind{hf::HfPath::kSdpa, true}}) {
    FuzzOptions o;
    o.cases = 300;
    o.seed = 5;
    std::int64_t not_training = 0;
    FuzzHooks hooks;
    hooks.on_judged = [&](const AnyCase& c, const Verdict&) {
      const ModelCase& m = std::get<ModelCase>(c);
      not_training += m.past > 0 || m.use_cache || m.via_generate;
    };
    const FuzzReport r = run_fuzz(tiled(), *integration_property(Profile::kHfMain, hf::PathDefect::kNone, kind), o, hooks);
    EXPECT_TRUE(r.findings.empty()) << integration_property_name(kind) << ": " << describe(r.findings[0].verdict);
    EXPECT_EQ(r.cases, 300);
    EXPECT_EQ(not_training, 0);
  }
}

// A kernel whose backward forgets the GQA sum is caught through transformers' flash path, with its forward
// correct (the verdict is about the gradients).
TEST(IntegrationFuzz, BackwardCatchesAKernelBackwardDefectThroughThePath) {
  FuzzOptions o;
  o.cases = 300;
  o.seed = 5;
  o.stop_at_first_failure = true;
  const FuzzReport r = run_fuzz(*builtin_registry().find("mutant-bw-gqa-first-head"),
                                *integration_property(Profile::kHfMain, hf::PathDefect::kNone, {hf::HfPath::kFlash, true}), o);
  ASSERT_EQ(r.findings.size(), 1u) << r.cases << " cases";
  EXPECT_TRUE(contains(r.findings[0].verdict.reason, "backward: d")) << r.findings[0].verdict.reason;
  EXPECT_FALSE(contains(r.findings[0].verdict.reason, "forward"));
}

// tiled-cpu, except that a call with a cache (k_len > q_len) kills the process, as a kernel with an
// out-of-bounds read would.
class CrashesOnCache : public Kernel {
 public:
  std::string_view name() const override { return "crashes-on-cache"; }
  const Contract& contract() const override { return tiled().contract(); }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override {
    for (const Sequence& s : c.seqs)
      if (s.k_len > s.q_len) std::raise(SIGSEGV);
    tiled().run(c, in, out);
  }
};

ModelCase decode_over_cache() {
  ModelCase m;
  m.q_len = 1;
  m.past = 3;
  m.use_cache = true;
  m.heads = m.kv_heads = 2;
  m.head_dim = 16;
  m.data.seed = 5;
  return m;
}

TEST(ModelLevelIsolation, FuzzTurnsAKernelCrashIntoACrashFindingWithTheModelCaseSaved) {
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / "flashcheck-model-crash-fuzz";
  fs::remove_all(out);
  CrashesOnCache k;
  FuzzOptions o;
  o.cases = 200;
  o.seed = 1;
  o.out_dir = out.string();
  o.stop_at_first_failure = true;
  const FuzzReport r = run_fuzz_isolated(k, *integration_property(Profile::kHfMain), o, 30);
  EXPECT_EQ(r.crashes, 1);
  ASSERT_EQ(r.findings.size(), 1u);
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.verdict.kind, VerdictKind::kCrash);
  EXPECT_TRUE(contains(f.verdict.reason, "signal 11")) << f.verdict.reason;
  ASSERT_TRUE(f.model_case.has_value());  // the in-flight model case, not a kernel case
  EXPECT_GT(f.model_case->past, 0) << summary(*f.model_case);
  ASSERT_FALSE(f.fixture.empty());
  const Fixture saved = load_fixture(f.fixture);
  ASSERT_EQ(saved.model_cases.size(), 1u);
  EXPECT_EQ(saved.model_cases[0].mcase, *f.model_case);
  EXPECT_EQ(saved.model_cases[0].expect.at("hf-main").verdict, VerdictKind::kCrash);
  fs::remove_all(out);
}

TEST(ModelLevelIsolation, ReplayTurnsAKernelCrashIntoACrashVerdictAndGoesOn) {
  CrashesOnCache k;
  Fixture fx;
  fx.path = "in-memory.json";
  fx.property = "integration";
  fx.profiles = {"hf-main"};
  ModelFixtureCase crashing, plain;
  crashing.mcase = decode_over_cache();
  plain.mcase = decode_over_cache();
  plain.mcase.past = 0;
  plain.mcase.use_cache = false;
  fx.model_cases = {crashing, plain};
  const std::vector<ReplayRecord> records = replay_fixtures({fx}, {&k}, IsolationOptions{});
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].verdict.kind, VerdictKind::kCrash);
  EXPECT_TRUE(contains(records[0].verdict.reason, "signal 11")) << records[0].verdict.reason;
  EXPECT_EQ(records[0].verdict.kernel, "hf-main@crashes-on-cache");
  EXPECT_FALSE(records[0].as_expected);
  EXPECT_EQ(records[1].verdict.kind, VerdictKind::kPass) << describe(records[1].verdict);
}

}  // namespace
}  // namespace flashcheck
