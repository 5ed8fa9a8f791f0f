// The `device-reference` and `device-gradient-reference` properties (CUDA builds): the fp32 device reference agrees
// with the fp64 host reference on generated cases, and the device gradients and their baseline with the host's. They
// judge the references, not a kernel; they run only with tiled-cpu, whose contract reaches every feature of the case
// model.
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "core/device/device_case.h"
#include "core/device/device_memory.h"
#include "core/tolerance.h"
#include "properties/property.h"
#include "reference/device/attention.h"
#include "reference/device/gradients.h"
#include "reference/gradient_agreement.h"
#include "reference/host/attention.h"
#include "reference/host/gradients.h"

namespace flashcheck {
namespace {

class DeviceReferenceAgreement : public Property {
 public:
  std::string_view name() const override { return "device-reference"; }
  bool uses_device() const override { return true; }
  std::string_view description() const override {
    return "the fp32 device reference matches the fp64 host reference within 8 u of each element's sensitivity";
  }
  std::string unsupported_reason(const Kernel& k) const override {
    if (k.name() != "tiled-cpu") return "checks the device reference itself; run it with --kernel tiled-cpu";
    return device::available() ? "" : "no CUDA device on this machine";
  }
  Verdict check(Kernel& k, const KernelCase& c) const override {
    const auto start = std::chrono::steady_clock::now();
    Verdict v;
    v.kernel = std::string(k.name());
    v.property = std::string(name());
    const CaseTensors t = materialize(c);
    for (EmptyRow conv : {EmptyRow::kZero, EmptyRow::kNaN, EmptyRow::kUniform}) {
      const AttentionResult host = reference::host_attention(c, t, conv);
      const device::DeviceCase dc(c, t, "refcheck");
      const AttentionResult dev = device::download(dc, device::device_reference(dc, conv, "refcheck.truth"));
      const std::string why = disagreement(c, host, dev);
      if (!why.empty()) {
        v.kind = VerdictKind::kFail;
        v.reason = fmt::format("empty rows as {}: {}", to_string(conv), why);
        break;
      }
    }
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return v;
  }

 private:
  static std::string disagreement(const KernelCase& c, const AttentionResult& host, const AttentionResult& dev) {
    using tolerance::kNoiseLambda;
    using tolerance::kUnitRoundoff32;
    const std::int64_t dv = c.v_head_dim;
    for (std::size_t cell = 0; cell < host.empty.size(); ++cell) {
      if (host.empty[cell] != dev.empty[cell])
        return fmt::format("cell {}: empty {} on the host, {} on the device", cell, host.empty[cell], dev.empty[cell]);
      for (std::int64_t x = 0; x < dv; ++x) {
        const std::size_t at = cell * static_cast<std::size_t>(dv) + static_cast<std::size_t>(x);
        const double h = host.out[at], d = dev.out[at];
        if (std::isnan(h) || std::isnan(d)) {
          if (std::isnan(h) != std::isnan(d)) return fmt::format("element {}: host {} device {}", at, h, d);
          continue;
        }
        // The device computes in fp32 and its own sensitivity bounds its rounding: the host's
        // sensitivity times the same lambda the tolerance rule uses, plus one rounding of the value.
        // Below fp32's normal range the device result may flush to zero or a subnormal.
        const double bound = kNoiseLambda * kUnitRoundoff32 * host.noise[at] + kUnitRoundoff32 * std::fabs(h) +
                              std::numeric_limits<float>::min();
        if (!(std::fabs(h - d) <= bound))
          return fmt::format("element {}: host {:.9g} device {:.9g}, difference {:.3g} > {:.3g}", at, h, d, std::fabs(h - d), bound);
      }
      if (!host.empty[cell]) {
        const double bound = kNoiseLambda * kUnitRoundoff32 * host.lse_noise[cell];
        if (!(std::fabs(host.lse[cell] - dev.lse[cell]) <= bound))
          return fmt::format("LSE of cell {}: host {:.9g} device {:.9g}", cell, host.lse[cell], dev.lse[cell]);
      }
    }
    return "";
  }
};

class DeviceGradientReferenceAgreement : public Property {
 public:
  std::string_view name() const override { return "device-gradient-reference"; }
  bool uses_device() const override { return true; }
  std::string_view description() const override {
    return "the device gradient reference and baseline match the fp64 host ones (reference/gradient_agreement.h)";
  }
  CaseRequirements requirements() const override { return {.backward = true}; }
  std::string unsupported_reason(const Kernel& k) const override {
    if (k.name() != "tiled-cpu") return "checks the device gradient reference itself; run it with --kernel tiled-cpu";
    return device::available() ? "" : "no CUDA device on this machine";
  }
  Verdict check(Kernel& k, const KernelCase& c) const override {
    const auto start = std::chrono::steady_clock::now();
    Verdict v;
    v.kernel = std::string(k.name());
    v.property = std::string(name());
    if (!c.backward()) {
      v.kind = VerdictKind::kError;
      v.reason = "harness error: device-gradient-reference needs a backward case (a \"dout\" recipe)";
    } else {
      const CaseTensors t = materialize(c);
      const device::DeviceGradients dg = device::device_gradients_and_baseline(c, t, "refcheck.grad");
      v.reason = reference::gradient_disagreement(
          c, reference::host_gradients(c, t), reference::low_precision_gradients(c, t), dg.truth, dg.baseline,
          dg.tensor_cores ? reference::GradientAccuracy::kFp32 : reference::GradientAccuracy::kFp64);
      v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
    }
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return v;
  }
};

}  // namespace

const Property& device_reference_property() {
  static const DeviceReferenceAgreement p;
  return p;
}

const Property& device_gradient_reference_property() {
  static const DeviceGradientReferenceAgreement p;
  return p;
}

}  // namespace flashcheck
