// The device path of grad-conformance against the host path: the same verdicts and statistics on the same cases
// (FLASHCHECK_GRAD_PATH=host sends a check to the host path, which takes the same device reference through the
// host's tensors), the same again with cases in flight on several threads, and a planted wrong gradient caught on
// the device. Needs a GPU (skipped without one).
#include "properties/grad_conformance_device.h"

#include <cmath>
#include <cstdlib>
#include <gtest/gtest.h>
#include <limits>
#include <string>
#include <vector>

#include "core/device/device_memory.h"
#include "core/device/device_output.h"
#include "properties/property.h"
#include "properties/varied_device_cases.h"

namespace flashcheck {
namespace {

// The varied cases of the device tests with the batch made uniform (the dense ops take them too), windows, and dO.
std::vector<KernelCase> backward_cases() {
  std::vector<KernelCase> cases = varied_device_cases(24, 300);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    KernelCase& c = cases[i];
    for (Sequence& s : c.seqs) s = c.seqs[0];
    if (i % 4 == 1) c.window = {17, 0};
    c.dout = DoutRecipe{.kind = i % 7 == 3 ? DoutKind::kZeroRows : DoutKind::kNormal};
  }
  return cases;
}

struct HostPath {
  HostPath() { ::setenv("FLASHCHECK_GRAD_PATH", "host", 1); }
  ~HostPath() { ::unsetenv("FLASHCHECK_GRAD_PATH"); }
};

// Within `relative` of each other: 1e-12 for a statistic of single elements, n 2^-52 for a mean over n elements,
// which the two paths sum in different orders (the H100 run of 2026-12-06 saw 1.2e-12 on means over 10^5).
void expect_close(double a, double b, const char* what, double relative = 1e-12) {
  if (std::isinf(a) || std::isinf(b)) {
    EXPECT_EQ(a, b) << what;
    return;
  }
  EXPECT_NEAR(a, b, relative * std::max(std::fabs(a), std::fabs(b)) + 1e-300) << what;
}

TEST(GradConformanceDevice, GivesTheHostPathsVerdictsAndStatistics) {
  if (!device::available()) GTEST_SKIP() << "no CUDA device";
  const Property* p = find_property("grad-conformance");
  ASSERT_NE(p, nullptr);
  int judged = 0;
  // The deterministic kernel gives the same gradients twice, so every statistic must agree; the others must agree
  // on the verdict and on everything taken from the reference alone (the bound).
  for (const char* name : {"flash-fwd-varlen-deterministic", "flash-fwd-varlen", "efficient-fwd-varlen", "cudnn-fwd"}) {
    Kernel* k = builtin_registry().find(name);
    ASSERT_NE(k, nullptr) << name;
    ASSERT_TRUE(k->has_device_backward()) << name;
    const bool exact = std::string(name) == "flash-fwd-varlen-deterministic";
    for (const KernelCase& c : backward_cases()) {
      if (!k->check(c).supported) continue;
      SCOPED_TRACE(std::string(name) + " " + summary(c));
      const Verdict dev = p->check(*k, c);
      Verdict host;
      {
        const HostPath on_host;
        host = p->check(*k, c);
      }
      ASSERT_EQ(dev.kind, host.kind) << dev.reason << " / " << host.reason;
      ASSERT_TRUE(dev.cmp && host.cmp) << dev.reason << " / " << host.reason;
      const Comparison &a = *dev.cmp, &b = *host.cmp;
      EXPECT_EQ(a.tensor, b.tensor);
      expect_close(a.bound, b.bound, "bound");
      expect_close(a.base_max, b.base_max, "base_max");
      expect_close(a.floor, b.floor, "floor");
      EXPECT_EQ(a.compared, b.compared);
      const double summed = std::max(1e-12, std::ldexp(static_cast<double>(a.compared), -52));
      expect_close(a.mean_bound, b.mean_bound, "mean_bound", summed);
      if (exact) {
        EXPECT_EQ(a.err_max, b.err_max);
        expect_close(a.err_mean, b.err_mean, "err_mean", summed);
        EXPECT_EQ(a.mismatches, b.mismatches);
        EXPECT_EQ(a.worst.b, b.worst.b);
        EXPECT_EQ(a.worst.h, b.worst.h);
        EXPECT_EQ(a.worst.i, b.worst.i);
        EXPECT_EQ(a.worst.d, b.worst.d);
      }
      ++judged;
    }
  }
  EXPECT_GT(judged, 40);
}

// Cases in flight (bench --in-flight): threads that each put their work on their own stream give the verdicts and,
// with FA2's deterministic backward, the statistics of one thread, to the bit. A race on the per-thread device
// buffers of the backward (dO, the gradient buffers, the reference's slots) shows here.
TEST(GradConformanceDevice, ThreadsOnTheirOwnStreamsGiveTheVerdictsOfOneThread) {
  if (!device::available()) GTEST_SKIP() << "no CUDA device";
  Kernel* k = builtin_registry().find("flash-fwd-varlen-deterministic");
  ASSERT_NE(k, nullptr);
  const Property* p = find_property("grad-conformance");
  ASSERT_NE(p, nullptr);
  std::vector<KernelCase> cases;
  for (const KernelCase& c : backward_cases())
    if (k->check(c).supported) cases.push_back(c);
  ASSERT_GT(cases.size(), 10u);
  std::vector<Verdict> alone;
  for (const KernelCase& c : cases) alone.push_back(p->check(*k, c));

  const std::vector<Verdict> together = judged_in_flight(cases, [&](const KernelCase& c) { return p->check(*k, c); });

  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(summary(cases[i]));
    EXPECT_EQ(together[i].kind, alone[i].kind) << together[i].reason << " / " << alone[i].reason;
    ASSERT_TRUE(alone[i].cmp.has_value()) << alone[i].reason;
    ASSERT_TRUE(together[i].cmp.has_value()) << together[i].reason;
    const Comparison &a = *alone[i].cmp, &b = *together[i].cmp;
    EXPECT_GT(a.compared, 0);
    EXPECT_EQ(b.tensor, a.tensor);
    EXPECT_EQ(b.err_max, a.err_max);
    EXPECT_EQ(b.base_max, a.base_max);
    EXPECT_EQ(b.bound, a.bound);
    EXPECT_EQ(b.compared, a.compared);
  }
}

// flash-fwd-varlen-deterministic with one gradient element changed after its backward: NaN or an error of 1.
class PlantedGradient : public Kernel {
 public:
  PlantedGradient(Kernel& inner, int which, float value) : inner_(inner), which_(which), value_(value) {}
  std::string_view name() const override { return "planted-gradient"; }
  const Contract& contract() const override { return inner_.contract(); }
  ContractCheck check(const KernelCase& c) const override { return inner_.check(c); }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override { inner_.run(c, in, out); }
  std::string_view device() const override { return "cuda"; }
  bool has_device_backward() const override { return true; }
  void run_backward_device(const device::DeviceCase& dc, device::DeviceOutput& dq, device::DeviceOutput& dk,
                           device::DeviceOutput& dv) override {
    inner_.run_backward_device(dc, dq, dk, dv);
    device::DeviceOutput& g = which_ == 0 ? dq : which_ == 1 ? dk : dv;
    float x = 0;
    device::copy_to_host(&x, g.out(), sizeof x);  // row 0 is the first sequence's first row
    x = std::isnan(value_) ? value_ : x + value_;
    device::copy_to_device(g.out(), &x, sizeof x);
  }

 private:
  Kernel& inner_;
  int which_;
  float value_;
};

TEST(GradConformanceDevice, CatchesAPlantedWrongGradient) {
  if (!device::available()) GTEST_SKIP() << "no CUDA device";
  Kernel* inner = builtin_registry().find("flash-fwd-varlen-deterministic");
  ASSERT_NE(inner, nullptr);
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = c.v_head_dim = 64;
  c.dtype = DType::kBF16;
  c.seqs = {{.q_len = 40, .k_len = 70}, {.q_len = 9, .k_len = 9}};
  c.dout = DoutRecipe{};
  c.data.seed = 77;
  const Property* p = find_property("grad-conformance");
  ASSERT_NE(p, nullptr);
  {
    const Verdict clean = p->check(*inner, c);
    ASSERT_EQ(clean.kind, VerdictKind::kPass) << clean.reason;
  }
  for (int which = 0; which < 3; ++which)
    for (float value : {std::numeric_limits<float>::quiet_NaN(), 1.0f}) {
      PlantedGradient planted(*inner, which, value);
      const Verdict v = p->check(planted, c);
      SCOPED_TRACE(which);
      SCOPED_TRACE(value);
      EXPECT_EQ(v.kind, VerdictKind::kFail) << v.reason;
      ASSERT_TRUE(v.cmp.has_value());
      EXPECT_EQ(v.cmp->tensor, which == 0 ? "dq" : which == 1 ? "dk" : "dv");
      EXPECT_EQ(v.cmp->worst.b, 0);
      EXPECT_EQ(v.cmp->worst.i, 0);
      EXPECT_EQ(v.cmp->worst.h, 0);
      EXPECT_EQ(v.cmp->worst.d, 0);
    }
}

}  // namespace
}  // namespace flashcheck
