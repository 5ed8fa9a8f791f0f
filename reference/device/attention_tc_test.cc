// GPU tests (label gpu) of the tensor-core reference (attention_tc.cu): it takes the cases it claims, agrees
// with the fp64 host reference within the device-reference property's bound (8 u of each element's
// sensitivity), stays far below the tolerance floor at lengths in the thousands, agrees with the SIMT
// kernels, and gives the same bits whether the reference and baseline are asked for together or apart.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/device/device_case.h"
#include "core/tolerance.h"
#include "reference/device/attention.h"
#include "reference/device/attention_tc.h"
#include "reference/host/attention.h"
#include "reference/host/baseline.h"

namespace flashcheck {
namespace {

constexpr double u = tolerance::kUnitRoundoff32;

// Every feature the SIMT kernels honour, at head dims the tensor-core path takes.
KernelCase featured_case(DType dt) {
  KernelCase c;
  c.heads = 6;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.v_head_dim = 32;
  c.dtype = dt;
  c.causal = true;
  c.window = {40, 0};
  c.softcap = 20;
  c.kv_cache = true;
  c.kv_storage = KvStorage::kPaged;
  c.paging = {.page_size = 5, .extra_pages = 2, .table_seed = 9};
  c.seqs = {{.q_len = 70, .k_len = 150, .leftpad_k = 2, .cache_len = 100, .new_len = 30},
            {.q_len = 90, .k_len = 20, .cache_len = 12, .new_len = 8},
            {.q_len = 0, .k_len = 3, .cache_len = 3, .new_len = 0}};
  c.data.seed = 77;
  c.data.q_scale = 3;
  return c;
}

KernelCase long_case(DType dt, std::int64_t len, bool causal, std::int64_t d, std::int64_t dv) {
  KernelCase c;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = d;
  c.v_head_dim = dv;
  c.dtype = dt;
  c.causal = causal;
  if (!causal) c.window = {700, 300};
  c.seqs = {{.q_len = len, .k_len = len}};
  c.data.seed = 4242;
  return c;
}

// The largest |device - host| over the device-reference property's bound (attention_test.cc and
// properties/device_reference_property.cc): above 1 fails that property. Also the largest error over the
// dtype part of the tolerance floor (2 ulp of the dtype at |truth| + 0.3).
struct Agreement {
  double worst_ratio = 0, worst_floor_ratio = 0, worst_lse_ratio = 0;
  std::int64_t nan_mismatches = 0, compared = 0;
};
Agreement agreement(const KernelCase& c, const AttentionResult& host, const AttentionResult& dev) {
  Agreement a;
  const detail::FloatFormat f = detail::format_of(c.dtype);
  for (std::size_t i = 0; i < host.out.size(); ++i) {
    const double h = host.out[i], d = dev.out[i];
    if (std::isnan(h) || std::isnan(d)) {
      a.nan_mismatches += std::isnan(h) != std::isnan(d);
      continue;
    }
    ++a.compared;
    const double bound = tolerance::kNoiseLambda * u * host.noise[i] + u * std::fabs(h) + std::numeric_limits<float>::min();
    a.worst_ratio = std::max(a.worst_ratio, std::fabs(h - d) / bound);
    const double floor = tolerance::kFloorSpacings * tolerance::spacing(h, f.mantissa_bits, f.min_normal_exp);
    a.worst_floor_ratio = std::max(a.worst_floor_ratio, std::fabs(h - d) / floor);
  }
  for (std::size_t cell = 0; cell < host.lse.size(); ++cell)
    if (!host.empty[cell])
      a.worst_lse_ratio = std::max(a.worst_lse_ratio, std::fabs(host.lse[cell] - dev.lse[cell]) / (tolerance::kNoiseLambda * u * host.lse_noise[cell]));
  return a;
}

TEST(TensorCoreReferenceGpu, TakesSixteenBitCasesAndLeavesTheRestToSimt) {
  const device::DeviceCase bf16(featured_case(DType::kBF16));
  EXPECT_EQ(device::tc_unsupported_reason(bf16), "");
  KernelCase c = featured_case(DType::kF32);
  EXPECT_NE(device::tc_unsupported_reason(device::DeviceCase(c)), "");
  c = featured_case(DType::kF16);
  EXPECT_EQ(device::tc_unsupported_reason(device::DeviceCase(c)), "");
  c = featured_case(DType::kBF16);
  c.head_dim = 40;
  EXPECT_NE(device::tc_unsupported_reason(device::DeviceCase(c)), "");
  c = featured_case(DType::kBF16);
  c.data.dist = Distribution::kLarge;
  c.data.v_scale = 1e17;  // 1e17 * 2^7 * 3.46 is past 2^60: huge V, which the tensor cores are not given
  EXPECT_NE(device::tc_unsupported_reason(device::DeviceCase(c)), "");
  ASSERT_EQ(setenv("FLASHCHECK_REFERENCE", "simt", 1), 0);
  EXPECT_NE(device::tc_unsupported_reason(bf16), "");
  ASSERT_EQ(unsetenv("FLASHCHECK_REFERENCE"), 0);
  EXPECT_EQ(device::tc_unsupported_reason(bf16), "");
}

// fp16 through the tensor cores: S and the baseline's P.V on
// fp16 MMAs, the reference's P.V with V in two exact bf16 pieces. The first fp16 version failed on outputs made only
// of tiny weights (tc_unsupported_reason): the third case gives every row such outputs, V nonzero only on keys the
// rows barely weigh.
TEST(TensorCoreReferenceGpu, Fp16) {
  KernelCase tiny = long_case(DType::kF16, 300, false, 64, 64);
  tiny.data.q_scale = 12;  // peaked rows: most weights far below fp16's range
  std::vector<KernelCase> cases = {featured_case(DType::kF16), long_case(DType::kF16, 2048, true, 128, 128), tiny};
  for (const KernelCase& c : cases) {
    const CaseTensors t = materialize(c);
    const device::DeviceCase dc(c);
    ASSERT_EQ(device::tc_unsupported_reason(dc), "");
    for (EmptyRow conv : {EmptyRow::kZero, EmptyRow::kUniform}) {
      const AttentionResult host = reference::host_attention(c, t, conv);
      const auto [truth, base] = device::device_reference_and_baseline(dc, conv);
      const AttentionResult dev = device::download(dc, truth);
      const Agreement a = agreement(c, host, dev);
      std::printf("fp16 %s L %lld: worst error / property bound %.3g, / dtype floor %.3g, LSE %.3g\n",
                  std::string(to_string(conv)).c_str(), static_cast<long long>(c.seqs[0].q_len), a.worst_ratio,
                  a.worst_floor_ratio, a.worst_lse_ratio);
      EXPECT_EQ(a.nan_mismatches, 0);
      EXPECT_GT(a.compared, 0);
      EXPECT_LE(a.worst_ratio, 1.0);
      EXPECT_LE(a.worst_lse_ratio, 1.0);
      // The baseline as the host's: fp16 products exact, sums in another order; within an ulp of fp16 but rarely.
      const AttentionResult hb = reference::low_precision_baseline(c, t, conv);
      const AttentionResult db = device::download(dc, base);
      const detail::FloatFormat f = detail::format_of(c.dtype);
      std::int64_t far = 0;
      for (std::size_t i = 0; i < hb.out.size(); ++i)
        if (!std::isnan(hb.out[i]) &&
            std::fabs(hb.out[i] - db.out[i]) > 2 * tolerance::spacing(hb.out[i], f.mantissa_bits, f.min_normal_exp))
          ++far;
      EXPECT_LE(far, static_cast<std::int64_t>(hb.out.size() / 1000)) << "baseline elements more than 2 ulp apart";
    }
  }
}

TEST(TensorCoreReferenceGpu, MatchesTheHostReferenceOnEveryFeature) {
  for (DType dt : {DType::kBF16})
    for (EmptyRow conv : {EmptyRow::kZero, EmptyRow::kNaN, EmptyRow::kUniform}) {
      const KernelCase c = featured_case(dt);
      ASSERT_TRUE(validate(c).empty());
      const CaseTensors t = materialize(c);
      const device::DeviceCase dc(c);
      ASSERT_EQ(device::tc_unsupported_reason(dc), "");
      const AttentionResult host = reference::host_attention(c, t, conv);
      const AttentionResult dev = device::download(dc, device::device_reference(dc, conv));
      ASSERT_EQ(host.empty, dev.empty);
      EXPECT_GT(std::count(host.empty.begin(), host.empty.end(), 1), 0);  // empty rows are exercised
      const Agreement a = agreement(c, host, dev);
      EXPECT_EQ(a.nan_mismatches, 0) << to_string(dt);
      EXPECT_GT(a.compared, 0);
      EXPECT_LE(a.worst_ratio, 1.0) << to_string(dt) << " " << to_string(conv);
      EXPECT_LE(a.worst_lse_ratio, 1.0) << to_string(dt) << " " << to_string(conv);
      // The device noise is the same formula as the host's: close to it wherever the host's is not tiny.
      for (std::size_t i = 0; i < host.noise.size(); ++i)
        if (!std::isnan(host.noise[i]) && host.noise[i] > 1e-3) {
          EXPECT_GT(dev.noise[i], 0.5 * host.noise[i]) << i;
          EXPECT_LT(dev.noise[i], 2.0 * host.noise[i]) << i;
        }
    }
}

TEST(TensorCoreReferenceGpu, FarBelowTheToleranceFloorAtThousandsOfTokens) {
  struct Shape {
    DType dt;
    std::int64_t len;
    bool causal;
    std::int64_t d, dv;
  };
  for (const Shape& s : {Shape{DType::kBF16, 3072, true, 128, 128}, Shape{DType::kBF16, 2048, false, 64, 128},
                         Shape{DType::kBF16, 1500, false, 256, 256}}) {
    const KernelCase c = long_case(s.dt, s.len, s.causal, s.d, s.dv);
    const CaseTensors t = materialize(c);
    const device::DeviceCase dc(c);
    ASSERT_EQ(device::tc_unsupported_reason(dc), "");
    const AttentionResult host = reference::host_attention(c, t, EmptyRow::kZero);
    const AttentionResult dev = device::download(dc, device::device_reference(dc, EmptyRow::kZero));
    const Agreement a = agreement(c, host, dev);
    std::printf("L %lld d %lld dv %lld %s: worst error / property bound %.3g, / dtype floor %.3g, LSE %.3g\n",
                static_cast<long long>(s.len), static_cast<long long>(s.d), static_cast<long long>(s.dv),
                std::string(to_string(s.dt)).c_str(), a.worst_ratio, a.worst_floor_ratio, a.worst_lse_ratio);
    EXPECT_EQ(a.nan_mismatches, 0);
    EXPECT_LE(a.worst_ratio, 1.0);
    EXPECT_LE(a.worst_lse_ratio, 1.0);
    // docs/TOLERANCE.md: the reference's error is at most a hundredth of the dtype floor.
    EXPECT_LE(a.worst_floor_ratio, 1e-2);
  }
}

TEST(TensorCoreReferenceGpu, AgreesWithTheSimtKernels) {
  const KernelCase c = featured_case(DType::kBF16);
  const CaseTensors t = materialize(c);
  const device::DeviceCase dc(c);
  const AttentionResult host = reference::host_attention(c, t, EmptyRow::kUniform);
  const AttentionResult tc = device::download(dc, device::device_reference(dc, EmptyRow::kUniform, "tc"));
  const AttentionResult simt = device::download(dc, device::device_reference_simt(dc, EmptyRow::kUniform));
  // Both within the bound of the host: then within twice that bound of each other.
  const Agreement a = agreement(c, host, tc), b = agreement(c, host, simt);
  EXPECT_LE(a.worst_ratio, 1.0);
  EXPECT_LE(b.worst_ratio, 1.0);
  for (std::size_t i = 0; i < tc.out.size(); ++i) {
    if (std::isnan(host.out[i])) continue;
    EXPECT_LE(std::fabs(tc.out[i] - simt.out[i]), 2 * (tolerance::kNoiseLambda * u * host.noise[i] + u * std::fabs(host.out[i])) + 1e-37) << i;
  }
  // The baselines: the same rounding steps in other summation orders, errors of the same size.
  const AttentionResult hb = reference::low_precision_baseline(c, t, EmptyRow::kUniform);
  const AttentionResult tb = device::download(dc, device::device_baseline(dc, EmptyRow::kUniform, "tcb"));
  const AttentionResult sb = device::download(dc, device::device_baseline_simt(dc, EmptyRow::kUniform));
  double host_err = 0, tc_err = 0, simt_err = 0;
  for (std::size_t i = 0; i < host.out.size(); ++i) {
    EXPECT_EQ(tb.out[i], round_to(c.dtype, tb.out[i]));  // rounded to the dtype
    host_err = std::max(host_err, std::fabs(hb.out[i] - host.out[i]));
    tc_err = std::max(tc_err, std::fabs(tb.out[i] - host.out[i]));
    simt_err = std::max(simt_err, std::fabs(sb.out[i] - host.out[i]));
  }
  EXPECT_GT(host_err, 0);
  EXPECT_GT(tc_err, host_err / 4);
  EXPECT_LT(tc_err, host_err * 4);
  EXPECT_GT(tc_err, simt_err / 4);
  EXPECT_LT(tc_err, simt_err * 4);
}

TEST(TensorCoreReferenceGpu, TogetherOrApartTheSameBits) {
  const KernelCase c = featured_case(DType::kBF16);
  const device::DeviceCase dc(c);
  const auto [truth, base] = device::device_reference_and_baseline(dc, EmptyRow::kZero, "both.t", "both.b");
  const AttentionResult t2 = device::download(dc, truth), b2 = device::download(dc, base);
  const AttentionResult t1 = device::download(dc, device::device_reference(dc, EmptyRow::kZero, "apart.t"));
  const AttentionResult b1 = device::download(dc, device::device_baseline(dc, EmptyRow::kZero, "apart.b"));
  auto same = [](const std::vector<double>& x, const std::vector<double>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
  };
  EXPECT_TRUE(same(t1.out, t2.out));
  EXPECT_TRUE(same(t1.noise, t2.noise));
  EXPECT_TRUE(same(t1.lse, t2.lse));
  EXPECT_TRUE(same(b1.out, b2.out));
  EXPECT_TRUE(same(b1.lse, b2.lse));
  EXPECT_FALSE(same(t1.out, b1.out));  // and the two results are different computations
}

// Cases of different head dims in flight on two threads (bench --in-flight): d 64 and d 128, both with dv 128,
// share a kernel instantiation (its column chunk follows dv) but not a shared-memory size (Q's rows follow d).
// The cap on that size belongs to the function for the whole process; set per launch, one thread's smaller case
// lowered it under the other's larger launch (cudaErrorLaunchOutOfResources on the H200). Each thread runs on its
// own per-thread stream and slots.
TEST(TensorCoreReferenceGpu, ThreadsWithDifferentHeadDimsLaunchSideBySide) {
  std::vector<std::string> errors[2];
  auto run = [&errors](int t) {
    const std::int64_t d = t == 0 ? 128 : 64;
    const device::DeviceCase dc(long_case(DType::kBF16, 96, true, d, 128));
    ASSERT_EQ(device::tc_unsupported_reason(dc), "");
    for (int i = 0; i < 300; ++i) {
      try {
        device::download(dc, device::device_reference_and_baseline(dc, EmptyRow::kZero, "side.t", "side.b").first);
      } catch (const std::exception& e) {
        errors[t].push_back(e.what());
      }
    }
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  for (int t = 0; t < 2; ++t) EXPECT_TRUE(errors[t].empty()) << errors[t].size() << " errors, the first: " << errors[t].front();
}

}  // namespace
}  // namespace flashcheck
