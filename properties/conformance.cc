#include "properties/conformance.h"

#include <chrono>
#include <exception>
#include <fmt/format.h>

#include "core/compare.h"
#include "core/geometry.h"
#include "kernels/device_errors.h"
#if defined(FLASHCHECK_HAVE_CUDA)
#include "properties/conformance_device.h"
#endif
#include "reference/host/attention.h"
#include "reference/host/baseline.h"

namespace flashcheck {

Verdict check_conformance(Kernel& k, const KernelCase& c, const CaseTensors& t, const ConformanceOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  Verdict v;
  v.kernel = std::string(k.name());
  v.property = "conformance";
  auto finish = [&]() -> Verdict {
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return v;
  };
  const ContractCheck support = k.check(c);
  const std::string unavailable = k.unavailable_reason();
  if (!unavailable.empty() || (!support.supported && !opt.ignore_contract)) {
    v.kind = VerdictKind::kUnsupported;
    v.reason = support.reason;
    return finish();
  }
#if defined(FLASHCHECK_HAVE_CUDA)
  if (k.on_device()) {
    Verdict dv = check_conformance_device(k, c, &t);
    dv.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return dv;
  }
#endif
  const CaseGeometry g = geometry(c);
  OutputBuffer out = output_buffer_for(c, g);
  try {
    k.run(c, t, out);
  } catch (const std::exception& e) {
    exit_on_sticky_error(k);
    v.kind = VerdictKind::kError;
    v.reason = kernel_error_reason(e);
    return finish();
  }
  const EmptyRow convention = k.contract().empty_row;
  const AttentionResult truth = reference::host_attention(c, t, convention);
  const AttentionResult baseline = reference::low_precision_baseline(c, t, convention);
  const Comparison cmp = compare(c, out.to_result(), truth, baseline, convention, tolerance_for(c));
  v.cmp = cmp;
  v.reason = failure_reason(cmp);
  if (const std::int64_t damage = out.canary_damage(); damage > 0 && v.reason.empty())
    v.reason = fmt::format("{} canary element{} beyond the output overwritten", damage, damage > 1 ? "s" : "");
  v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
  return finish();
}

}  // namespace flashcheck
