// GPU tests (label gpu) of the device reference, baseline and comparator against their host versions.
// The broad agreement check over generated cases is the `device-reference` property
// (flashcheck fuzz --kernel tiled-cpu --property device-reference).
#include <cmath>
#include <gtest/gtest.h>

#include "core/compare.h"
#include "core/tolerance.h"
#include "core/device/device_case.h"
#include "core/device/device_memory.h"
#include "reference/device/attention.h"
#include "reference/device/compare.h"
#include "reference/host/attention.h"
#include "reference/host/baseline.h"

namespace flashcheck {
namespace {

KernelCase mixed_case() {
  KernelCase c;
  c.heads = 6;
  c.kv_heads = 2;
  c.head_dim = 40;
  c.v_head_dim = 24;
  c.dtype = DType::kBF16;
  c.causal = true;
  c.window = {5, 0};
  c.softcap = 20;
  c.kv_cache = true;
  c.kv_storage = KvStorage::kPaged;
  c.paging = {.page_size = 3, .extra_pages = 2, .table_seed = 9};
  c.seqs = {{.q_len = 7, .k_len = 30, .leftpad_k = 2, .cache_len = 12, .new_len = 7},
            {.q_len = 9, .k_len = 4, .cache_len = 2, .new_len = 2},
            {.q_len = 0, .k_len = 3, .cache_len = 3, .new_len = 0}};
  c.data.seed = 77;
  c.data.q_scale = 20;
  return c;
}

TEST(DeviceReferenceGpu, GeneratedDataEqualsUploadedHostData) {
  const KernelCase c = mixed_case();
  const CaseTensors host = materialize(c);
  const CaseTensors dev = device::DeviceCase(c).download();
  ASSERT_EQ(host.k.data.size(), dev.k.data.size());
  for (std::size_t i = 0; i < host.k.data.size(); ++i) {
    if (std::isnan(host.k.data[i])) ASSERT_TRUE(std::isnan(dev.k.data[i])) << i;
    else ASSERT_EQ(host.k.data[i], dev.k.data[i]) << i;
  }
  EXPECT_EQ(host.q.data, dev.q.data);
  EXPECT_EQ(host.v_new.data, dev.v_new.data);
}

TEST(DeviceReferenceGpu, MatchesTheHostReferenceWithinItsFp32Sensitivity) {
  const KernelCase c = mixed_case();
  const CaseTensors t = materialize(c);
  for (EmptyRow conv : {EmptyRow::kZero, EmptyRow::kNaN, EmptyRow::kUniform}) {
    const AttentionResult host = reference::host_attention(c, t, conv);
    const device::DeviceCase dc(c);
    const AttentionResult dev = device::download(dc, device::device_reference(dc, conv));
    ASSERT_EQ(host.empty, dev.empty);
    std::int64_t empties = 0;
    for (std::size_t i = 0; i < host.out.size(); ++i) {
      if (std::isnan(host.out[i])) {
        EXPECT_TRUE(std::isnan(dev.out[i]));
        continue;
      }
      // The device's fp32 rounding stays within the rule's noise term of the host's sensitivity, plus one
      // rounding of the value.
      constexpr double u = tolerance::kUnitRoundoff32;
      EXPECT_LE(std::fabs(host.out[i] - dev.out[i]), tolerance::kNoiseLambda * u * host.noise[i] + u * std::fabs(host.out[i])) << i;
    }
    for (std::uint8_t e : host.empty) empties += e;
    EXPECT_GT(empties, 0);  // the case has empty rows: more queries than keys under causal masking
  }
}

TEST(DeviceBaselineGpu, IsALowPrecisionComputationLikeTheHostOne) {
  const KernelCase c = mixed_case();
  const CaseTensors t = materialize(c);
  const AttentionResult truth = reference::host_attention(c, t, EmptyRow::kZero);
  const AttentionResult host = reference::low_precision_baseline(c, t, EmptyRow::kZero);
  const device::DeviceCase dc(c);
  const AttentionResult dev = device::download(dc, device::device_baseline(dc, EmptyRow::kZero));
  double host_err = 0, dev_err = 0;
  for (std::size_t i = 0; i < truth.out.size(); ++i) {
    EXPECT_EQ(dev.out[i], round_to(c.dtype, dev.out[i]));  // rounded to the dtype
    host_err = std::max(host_err, std::fabs(host.out[i] - truth.out[i]));
    dev_err = std::max(dev_err, std::fabs(dev.out[i] - truth.out[i]));
  }
  // Same rounding steps in another summation order: errors of the same size.
  EXPECT_GT(dev_err, host_err / 4);
  EXPECT_LT(dev_err, host_err * 4);
}

TEST(DeviceCompareGpu, AgreesWithTheHostComparator) {
  const KernelCase c = mixed_case();
  const CaseTensors t = materialize(c);
  const device::DeviceCase dc(c);
  const device::DeviceResult truth = device::device_reference(dc, EmptyRow::kZero, "t");
  const device::DeviceResult base = device::device_baseline(dc, EmptyRow::kZero, "b");
  // A candidate output: the baseline with one element pushed far off.
  AttentionResult cand = device::download(dc, base);
  cand.out[17] += 1.0;
  std::vector<float> f(cand.out.begin(), cand.out.end());
  float* dout = device::slot_of<float>("candidate", f.size());
  device::copy_to_device(dout, f.data(), f.size() * sizeof(float));
  const Comparison d = device::device_compare(dc, dout, nullptr, truth, base, EmptyRow::kZero, tolerance_for(c));
  const AttentionResult htruth = device::download(dc, truth), hbase = device::download(dc, base);
  const Comparison h = compare(c, cand, htruth, hbase, EmptyRow::kZero, tolerance_for(c));
  EXPECT_EQ(failure_reason(d).empty(), failure_reason(h).empty());
  EXPECT_NE(failure_reason(d), "");
  EXPECT_EQ(d.mismatches, h.mismatches);
  EXPECT_EQ(d.compared, h.compared);
  EXPECT_EQ(d.empty_rows, h.empty_rows);
  EXPECT_EQ(d.worst.b, h.worst.b);
  EXPECT_EQ(d.worst.h, h.worst.h);
  EXPECT_EQ(d.worst.i, h.worst.i);
  EXPECT_EQ(d.worst.d, h.worst.d);
  EXPECT_NEAR(d.err_max, h.err_max, 1e-6);
  EXPECT_NEAR(d.bound, h.bound, 1e-6 * h.bound + 1e-9);
}

}  // namespace
}  // namespace flashcheck
