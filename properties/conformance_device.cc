#include "properties/conformance_device.h"

#include <exception>
#include <fmt/format.h>
#include <optional>

#include "core/compare.h"
#include "core/device/device_case.h"
#include "core/device/device_memory.h"
#include "core/device/device_output.h"
#include "kernels/output_buffer.h"
#include "properties/device_errors.h"
#include "reference/device/attention.h"
#include "reference/device/compare.h"

namespace flashcheck {

Verdict check_conformance_device(Kernel& k, const KernelCase& c, const CaseTensors* tensors) {
  Verdict v;
  v.kernel = std::string(k.name());
  v.property = "conformance";
  std::optional<device::DeviceCase> dc;
  if (tensors) dc.emplace(c, *tensors);
  else dc.emplace(c);
  const CaseGeometry& g = dc->geometry();
  device::DeviceOutput out(g.total_q * c.heads * c.v_head_dim, g.total_q * c.heads, canary_margin(c));
  try {
    k.run_device(*dc, out);
    device::synchronize();
  } catch (const std::exception& e) {
    exit_on_sticky_error(k);
    v.kind = VerdictKind::kError;
    v.reason = e.what();
    return v;
  }
  const EmptyRow conv = k.contract().empty_row;
  const device::DeviceResult truth = device::device_reference(*dc, conv);
  const device::DeviceResult base = device::device_baseline(*dc, conv);
  const Comparison cmp =
      device::device_compare(*dc, out.out(), out.lse_written ? out.lse() : nullptr, truth, base, conv, tolerance_for(c));
  v.cmp = cmp;
  v.reason = failure_reason(cmp);
  if (const std::int64_t damage = out.canary_damage(); damage > 0 && v.reason.empty())
    v.reason = fmt::format("{} canary element{} beyond the output overwritten", damage, damage > 1 ? "s" : "");
  v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
  return v;
}

}  // namespace flashcheck
