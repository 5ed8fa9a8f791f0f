// GPU tests (label gpu) of the tensor-core gradient reference (gradients_tc.h) against the fp64 host one, judged by
// reference/gradient_agreement.h at fp32 accuracy, on hand-built cases that reach every switch a bf16 backward case
// has, at L = 2048 and with head dims of 128; and of the choice between it and the fp64 SIMT kernels. The broad check
// over generated cases is the device-gradient-reference property under the same switch.
#include "reference/device/gradients_tc.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <gtest/gtest.h>

#include "core/device/device_case.h"
#include "core/geometry.h"
#include "reference/device/gradients.h"
#include "reference/gradient_agreement.h"
#include "reference/host/gradients.h"

namespace flashcheck {
namespace {

// The default route (FLASHCHECK_REFERENCE unset), whatever the test's environment; a test that switches to the SIMT
// kernels sets it back.
class TcGradientsGpu : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("FLASHCHECK_REFERENCE"); }
  void TearDown() override { ::unsetenv("FLASHCHECK_REFERENCE"); }
};

KernelCase backward_case() {
  KernelCase c;
  c.dtype = DType::kBF16;
  c.heads = 6;
  c.kv_heads = 2;
  c.head_dim = 48;
  c.v_head_dim = 32;
  c.dout = DoutRecipe{};
  c.data.seed = 43;
  return c;
}

struct Computed {
  GradientResult host_truth, host_base;
  device::DeviceGradients device;
};

Computed compute(const KernelCase& c) {
  EXPECT_TRUE(validate(c).empty());
  const CaseTensors t = materialize(c);
  return {reference::host_gradients(c, t), reference::low_precision_gradients(c, t),
          device::device_gradients_and_baseline(c, t, "tc.test")};
}

void expect_agreement(const KernelCase& c) {
  const Computed r = compute(c);
  ASSERT_TRUE(r.device.tensor_cores) << "the case should take the tensor-core path";
  EXPECT_EQ(reference::gradient_disagreement(c, r.host_truth, r.host_base, r.device.truth, r.device.baseline,
                                             reference::GradientAccuracy::kFp32),
            "");
}

TEST_F(TcGradientsGpu, CausalWindowSoftcapGqaVarlenSlackLeftpad) {
  KernelCase c = backward_case();
  c.causal = true;
  c.window = {5, 0};
  c.softcap = 20;
  c.data.q_scale = 20;
  c.slack = {.q_rows = 3, .kv_rows = 4};
  c.seqs = {{.q_len = 7, .k_len = 30, .leftpad_k = 2}, {.q_len = 9, .k_len = 4}, {.q_len = 0, .k_len = 3},
            {.q_len = 5, .k_len = 11, .seqused_k = 6}, {.q_len = 70, .k_len = 130}};
  expect_agreement(c);
}

TEST_F(TcGradientsGpu, RowsWithoutKeysMqaScaledDout) {
  KernelCase c = backward_case();
  c.heads = 4;
  c.kv_heads = 1;
  c.head_dim = 64;
  c.v_head_dim = 64;
  c.causal = true;
  c.alignment = Alignment::kBottomRight;  // q_len > k_len: the first rows see no key
  c.seqs = {{.q_len = 12, .k_len = 5}, {.q_len = 3, .k_len = 40}, {.q_len = 100, .k_len = 67}};
  c.dout = DoutRecipe{.kind = DoutKind::kNormal, .scale = 100.0};
  expect_agreement(c);
}

TEST_F(TcGradientsGpu, HeadDim128PartialTilesBothWindows) {
  KernelCase c = backward_case();
  c.heads = 4;
  c.kv_heads = 4;
  c.head_dim = 128;
  c.v_head_dim = 128;
  c.window = {40, 17};
  c.seqs = {{.q_len = 200, .k_len = 150}, {.q_len = 1, .k_len = 65}};
  expect_agreement(c);
}

TEST_F(TcGradientsGpu, Length2048Causal) {
  KernelCase c = backward_case();
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.v_head_dim = 64;
  c.causal = true;
  c.seqs = {{.q_len = 2048, .k_len = 2048}};
  expect_agreement(c);
}

// fp16: the products of an fp16 operand with the bf16 pieces go through its two exact bf16 pieces.
TEST_F(TcGradientsGpu, Fp16) {
  KernelCase c = backward_case();
  c.dtype = DType::kF16;
  c.causal = true;
  c.window = {9, 0};
  c.softcap = 30;
  c.seqs = {{.q_len = 70, .k_len = 130}, {.q_len = 12, .k_len = 5}};
  expect_agreement(c);
  KernelCase big = backward_case();
  big.dtype = DType::kF16;
  big.heads = 4;
  big.kv_heads = 1;
  big.head_dim = big.v_head_dim = 128;
  big.alignment = Alignment::kBottomRight;
  big.causal = true;
  big.seqs = {{.q_len = 700, .k_len = 1100}};
  big.dout = DoutRecipe{.kind = DoutKind::kNormal, .scale = 100.0};
  expect_agreement(big);
}

// The first device run of the property (H100, 2026-12-06, seed 27) failed this case: large fp16 inputs make every row's
// softmax one-hot, the other keys' weights near e^-500, and dK near 1e-229 in fp64 comes out 0 here (fp32's range).
// It passes by the fp32 accuracy's floor (reference/gradient_agreement.h), not by a weaker value bound.
TEST_F(TcGradientsGpu, Fp16OneHotSoftmaxLosesOnlyWhatNoVerdictSees) {
  KernelCase c;
  c.dtype = DType::kF16;
  c.head_dim = c.v_head_dim = 16;
  c.alignment = Alignment::kBottomRight;
  c.seqs = {{.q_len = 1, .k_len = 3}};
  c.data.dist = Distribution::kLarge;
  c.data.seed = 176250061595;
  c.dout = DoutRecipe{};
  const Computed r = compute(c);
  ASSERT_TRUE(r.device.tensor_cores);
  EXPECT_EQ(reference::gradient_disagreement(c, r.host_truth, r.host_base, r.device.truth, r.device.baseline,
                                             reference::GradientAccuracy::kFp32),
            "");
}

// The judge at fp32 accuracy is not vacuous: one dQ element of the device's moved by twice its bound is named.
TEST_F(TcGradientsGpu, AMovedElementIsNamed) {
  KernelCase c = backward_case();
  c.seqs = {{.q_len = 20, .k_len = 20}};
  Computed r = compute(c);
  ASSERT_TRUE(r.device.tensor_cores);
  std::size_t at = 0;
  for (std::size_t i = 0; i < r.device.truth.dq.size(); ++i)
    if (std::abs(r.host_truth.dq[i]) > std::abs(r.host_truth.dq[at])) at = i;
  r.device.truth.dq[at] = r.host_truth.dq[at] + std::ldexp(8 * r.host_truth.dq_noise[at] + std::abs(r.host_truth.dq[at]), -23);
  const std::string why = reference::gradient_disagreement(c, r.host_truth, r.host_base, r.device.truth,
                                                           r.device.baseline, reference::GradientAccuracy::kFp32);
  EXPECT_NE(why.find("dq element " + std::to_string(at)), std::string::npos) << why;
}

TEST_F(TcGradientsGpu, TwoRunsGiveTheSameBits) {
  KernelCase c = backward_case();
  c.causal = true;
  c.seqs = {{.q_len = 70, .k_len = 90}, {.q_len = 33, .k_len = 20}};
  const CaseTensors t = materialize(c);
  const device::DeviceGradients a = device::device_gradients_and_baseline(c, t, "tc.a");
  const device::DeviceGradients b = device::device_gradients_and_baseline(c, t, "tc.b");
  ASSERT_TRUE(a.tensor_cores);
  using Part = std::vector<double> GradientResult::*;
  for (const Part part : {&GradientResult::dq, &GradientResult::dk, &GradientResult::dv}) {
    ASSERT_EQ((a.truth.*part).size(), (b.truth.*part).size());
    EXPECT_EQ(std::memcmp((a.truth.*part).data(), (b.truth.*part).data(), (a.truth.*part).size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp((a.baseline.*part).data(), (b.baseline.*part).data(),
                          (a.baseline.*part).size() * sizeof(double)),
              0);
  }
}

// The cases the kernels do not take go to the SIMT kernels, each with its reason.
TEST_F(TcGradientsGpu, OtherCasesTakeTheSimtKernels) {
  struct Other {
    const char* what;
    void (*change)(KernelCase&);
  };
  const Other others[] = {
      {"fp32", [](KernelCase& c) { c.dtype = DType::kF32; }},
      {"head dim 40", [](KernelCase& c) { c.head_dim = 40; }},
      {"head dim 256", [](KernelCase& c) { c.head_dim = c.v_head_dim = 256; }},
  };
  for (const Other& o : others) {
    KernelCase c = backward_case();
    c.seqs = {{.q_len = 9, .k_len = 9}};
    o.change(c);
    const CaseTensors t = materialize(c);
    const device::DeviceCase dc(c, t, "tc.route");
    EXPECT_NE(device::tc_gradient_unsupported_reason(dc), "") << o.what;
    const Computed r = compute(c);
    EXPECT_FALSE(r.device.tensor_cores) << o.what;
    EXPECT_EQ(reference::gradient_disagreement(c, r.host_truth, r.host_base, r.device.truth, r.device.baseline), "")
        << o.what;
  }
  ::setenv("FLASHCHECK_REFERENCE", "simt", 1);
  KernelCase c = backward_case();
  c.seqs = {{.q_len = 9, .k_len = 9}};
  EXPECT_FALSE(compute(c).device.tensor_cores);
}

}  // namespace
}  // namespace flashcheck
