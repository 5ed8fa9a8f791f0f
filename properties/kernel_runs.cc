#include "properties/kernel_runs.h"

#include <exception>
#include <fmt/format.h>

#include "core/geometry.h"
#include "kernels/device_errors.h"

namespace flashcheck::detail {

Verdict make_verdict(const Kernel& k, std::string_view property) {
  Verdict v;
  v.kernel = std::string(k.name());
  v.property = std::string(property);
  return v;
}

bool in_contract(const Kernel& k, const KernelCase& c, Verdict& v, const char* which) {
  const ContractCheck cc = k.check(c);
  if (cc.supported) return true;
  v.kind = VerdictKind::kUnsupported;
  v.reason = fmt::format("{}: {}", which, cc.reason);
  return false;
}

bool run_kernel(Kernel& k, const KernelCase& c, const CaseTensors& t, Run& run, Verdict& v) {
  const CaseGeometry g = geometry(c);
  run.buffer = output_buffer_for(c, g);
  try {
    k.run(c, t, run.buffer);
  } catch (const std::exception& e) {
    exit_on_sticky_error(k);
    v.kind = VerdictKind::kError;
    v.reason = kernel_error_reason(e);
    return false;
  }
  run.result = run.buffer.to_result();
  return true;
}

bool run_backward(Kernel& k, const KernelCase& c, const CaseTensors& t, BackwardRun& run, Verdict& v) {
  run.fwd = output_buffer_for(c, geometry(c));
  run.grads = GradBuffer(c);
  const char* pass = "forward";
  try {
    k.run(c, t, run.fwd);
    pass = "backward";
    k.run_backward(c, t, run.fwd, run.grads);
  } catch (const std::exception& e) {
    exit_on_sticky_error(k);
    v.kind = VerdictKind::kError;
    v.reason = fmt::format("{}: {}", pass, kernel_error_reason(e));
    return false;
  }
  run.result = run.grads.to_result();
  return true;
}

}  // namespace flashcheck::detail
