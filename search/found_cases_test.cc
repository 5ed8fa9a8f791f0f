// What a run leaves on disk (issue 15): an earlier run's in-flight record is kept, a found fixture that
// exists is not rewritten, and a tiny --timeout still ends an isolated run of N cases after N cases.
#include "search/found_cases.h"

#include <filesystem>
#include <fstream>
#include <new>
#include <gtest/gtest.h>
#include <unistd.h>

#include "core/error.h"
#include "core/files.h"
#include "search/fuzz.h"
#include "core/test_temp_dir.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;


std::string text_of(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Kernel& kernel(const char* name) { return *builtin_registry().find(name); }

TEST(FoundCases, AnEarlierRunsInflightRecordIsKeptNotOverwritten) {
  const testing::TempDir d("fc_found");
  const std::string inflight = inflight_path(d.str(), kernel("tiled-cpu"), *find_property("conformance"));
  std::ofstream(inflight) << "{\"case\": \"the case a killed run died in\"}";
  FuzzOptions o;
  o.cases = 3;
  o.out_dir = d.str();
  run_fuzz(kernel("tiled-cpu"), *find_property("conformance"), o);
  EXPECT_FALSE(path_exists(inflight));  // this run's own record is gone once it ends
  EXPECT_EQ(text_of(inflight + ".kept-1"), "{\"case\": \"the case a killed run died in\"}");
}

TEST(FoundCases, AFixtureThatExistsIsNotRewritten) {
  const testing::TempDir d("fc_found");
  Finding f;
  f.minimized.seqs = {{.q_len = 1, .k_len = 1}};
  f.verdict.kind = VerdictKind::kFail;
  f.verdict.reason = "found";
  const std::string path = save_finding(d.str(), kernel("tiled-cpu"), *find_property("conformance"), 1, f);
  ASSERT_FALSE(path.empty());
  std::ofstream(path) << "annotated by hand";
  EXPECT_EQ(save_finding(d.str(), kernel("tiled-cpu"), *find_property("conformance"), 2, f), path);
  EXPECT_EQ(text_of(path), "annotated by hand");
}

// A case that outlives a timeout of a microsecond is a finding and is counted, and the run still ends after
// the cases it was asked for (it once looped, writing a fixture per worker).
TEST(FoundCases, ATinyTimeoutStillEndsARunOfNCases) {
  const testing::TempDir d("fc_found");
  FuzzOptions o;
  o.cases = 4;
  o.out_dir = d.str();
  const FuzzReport r = run_fuzz_isolated(kernel("tiled-cpu"), *find_property("conformance"), o, 1e-6);
  EXPECT_EQ(r.cases, 4);
  EXPECT_GE(r.crashes, 1);  // the cases that outlived the microsecond (a fast one may not)
  std::int64_t fixtures = 0;
  for (const auto& e : fs::directory_iterator(d.str())) fixtures += e.path().extension() == ".json";
  EXPECT_LE(fixtures, 4);
}

TEST(FoundCases, AnUnwritableOutputFolderIsAnError) {
  FuzzOptions o;
  o.cases = 1;
  o.out_dir = "/dev/null/found";
  EXPECT_THROW(run_fuzz(kernel("tiled-cpu"), *find_property("conformance"), o), OutputError);
  EXPECT_THROW(run_fuzz_isolated(kernel("tiled-cpu"), *find_property("conformance"), o), OutputError);
}

// A property whose own allocations fail: the harness's memory, not the kernel's (issue 29, item 7).
class RunsOutOfMemory : public Property {
 public:
  std::string_view name() const override { return "runs-out-of-memory"; }
  std::string_view description() const override { return "throws std::bad_alloc as the harness would"; }
  Verdict check(Kernel&, const KernelCase&) const override { throw std::bad_alloc(); }
};

TEST(FoundCases, TheHarnessRunningOutOfMemoryStopsTheRunAndIsNoFinding) {
  FuzzOptions o;
  o.cases = 3;
  try {
    run_fuzz(kernel("tiled-cpu"), RunsOutOfMemory{}, o);
    ADD_FAILURE() << "the run went on";
  } catch (const FuzzAborted& e) {
    EXPECT_NE(std::string(e.what()).find("the harness ran out of memory judging a case (b"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a kernel finding"), std::string::npos) << e.what();
    EXPECT_TRUE(e.report.findings.empty());
  }
}

}  // namespace
}  // namespace flashcheck
