#include "properties/conformance_device.h"
#include "properties/stage_profile.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <fmt/format.h>
#include <optional>
#include <tuple>

#include "core/compare.h"
#include "core/device/device_case.h"
#include "core/device/device_memory.h"
#include "core/device/device_output.h"
#include "kernels/output_buffer.h"
#include "kernels/device_errors.h"
#include "reference/device/attention.h"
#include "reference/device/compare.h"

namespace flashcheck {
namespace {

// Each stage is synchronized and timed into stage_profile() when it is on (properties/stage_profile.h).
StageProfile& profile() { return stage_profile(); }
class Stage : public ScopedStage {
 public:
  explicit Stage(const char* name) : ScopedStage(name, &device::synchronize) {}
};

}  // namespace

Verdict check_conformance_device(Kernel& k, const KernelCase& c, const CaseTensors* tensors) {
  Verdict v;
  v.kernel = std::string(k.name());
  v.property = "conformance";
  if (profile().on) ++profile().cases;  // unsynchronized: bench --in-flight refuses the profile
  std::optional<device::DeviceCase> dc;
  {
    const Stage s("inputs");
    if (tensors) dc.emplace(c, *tensors);
    else dc.emplace(c);
  }
  const CaseGeometry& g = dc->geometry();
  std::optional<device::DeviceOutput> out_buf;
  {
    const Stage s("output");
    // As the host buffer (output_buffer_for): slack rows belong to the kernel, canaries lie past them.
    out_buf.emplace(g.q_rows * c.heads * c.v_head_dim, g.q_rows * c.heads, canary_margin(c));
  }
  device::DeviceOutput& out = *out_buf;
  try {
    const Stage s("kernel");
    k.run_device(*dc, out);
    device::synchronize();
  } catch (const std::exception& e) {
    exit_on_sticky_error(k);
    v.kind = VerdictKind::kError;
    v.reason = kernel_error_reason(e);
    return v;
  }
  const EmptyRow conv = k.contract().empty_row;
  device::DeviceResult truth, base;
  {
    // One kernel for both on the tensor-core path (the stage is then their sum); two on the SIMT path.
    const Stage s("reference+baseline");
    std::tie(truth, base) = device::device_reference_and_baseline(*dc, conv);
  }
  Comparison cmp;
  {
    const Stage s("compare");
    cmp = device::device_compare(*dc, out.out(), out.lse_written ? out.lse() : nullptr, truth, base, conv, tolerance_for(c));
  }
  v.cmp = cmp;
  v.reason = failure_reason(cmp);
  std::int64_t damage = 0;
  {
    const Stage s("canaries");
    damage = out.canary_damage();
  }
  if (damage > 0 && v.reason.empty())
    v.reason = fmt::format("{} canary element{} beyond the output overwritten", damage, damage > 1 ? "s" : "");
  v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
  return v;
}

}  // namespace flashcheck
