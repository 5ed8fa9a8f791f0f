// Cases in flight: threads that each put their work on their own stream (kernels/devices.h,
// use_thread_stream) must give the verdicts one thread gives, to the bit, failures included. A race on
// the per-case device buffers or a missing wait between a case's stages shows here as a changed error or
// verdict. Needs a GPU (skipped without one).
#include "properties/conformance_device.h"

#include <gtest/gtest.h>
#include <vector>

#include "core/device/device_memory.h"
#include "kernels/kernel.h"
#include "properties/varied_device_cases.h"

namespace flashcheck {
namespace {

// Varied varlen cases, different in size so that the threads' cases overlap at different stages.
std::vector<KernelCase> varied_cases() {
  std::vector<KernelCase> cases = varied_device_cases(48, 700);
  // FA2's window defect (fixtures/found/flash-window-more-queries-than-keys.json): must fail on every thread.
  KernelCase bad;
  bad.dtype = DType::kF16;
  bad.heads = bad.kv_heads = 1;
  bad.head_dim = bad.v_head_dim = 8;
  bad.window = {0, -1};
  bad.seqs = {{.q_len = 3, .k_len = 1}};
  bad.data.seed = 888923666406;
  cases.insert(cases.begin() + 20, bad);
  return cases;
}

TEST(ConformanceInFlight, ThreadsOnTheirOwnStreamsGiveTheVerdictsOfOneThread) {
  if (!device::available()) GTEST_SKIP() << "no CUDA device";
  Kernel* k = builtin_registry().find("flash-fwd-varlen");
  ASSERT_NE(k, nullptr);
  const std::vector<KernelCase> cases = varied_cases();
  std::vector<Verdict> alone;
  for (const KernelCase& c : cases) alone.push_back(check_conformance_device(*k, c, nullptr));
  ASSERT_EQ(alone[20].kind, VerdictKind::kFail) << "the planted window case must fail";

  const std::vector<Verdict> together =
      judged_in_flight(cases, [&](const KernelCase& c) { return check_conformance_device(*k, c, nullptr); });

  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(together[i].kind, alone[i].kind) << together[i].reason << " / " << alone[i].reason;
    ASSERT_TRUE(alone[i].cmp.has_value()) << alone[i].reason;
    ASSERT_TRUE(together[i].cmp.has_value()) << together[i].reason;
    const Comparison &a = *alone[i].cmp, &b = *together[i].cmp;
    EXPECT_GT(a.compared + a.empty_rows, 0);
    EXPECT_EQ(b.err_max, a.err_max);
    EXPECT_EQ(b.base_max, a.base_max);
    EXPECT_EQ(b.compared, a.compared);
    EXPECT_EQ(b.empty_wrong, a.empty_wrong);
    EXPECT_EQ(b.lse_err, a.lse_err);
  }
}

}  // namespace
}  // namespace flashcheck
