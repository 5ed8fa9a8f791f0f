#include "properties/grad_conformance_device.h"

#include <exception>
#include <fmt/format.h>
#include <optional>
#include <vector>

#include "core/compare.h"
#include "core/defined_memory.h"
#include "core/device/device_case.h"
#include "core/device/device_memory.h"
#include "core/device/device_output.h"
#include "core/tolerance.h"
#include "kernels/device_errors.h"
#include "kernels/grad_buffer.h"
#include "properties/stage_profile.h"
#include "reference/device/gradient_compare.h"
#include "reference/device/gradients.h"

namespace flashcheck {
namespace {

// Each stage synchronized and timed when the profile is on (properties/stage_profile.h).
class Stage : public ScopedStage {
 public:
  explicit Stage(const char* name) : ScopedStage(name, &device::synchronize) {}
};

// A gradient buffer framed as GradBuffer frames it on the host, poisoned.
device::DeviceOutput gradient_buffer(std::int64_t rows, std::int64_t heads, std::int64_t dim, const char* slot) {
  return device::DeviceOutput(rows * heads * dim, 0, grad_canary_margin(heads, dim), slot);
}

}  // namespace

void check_grad_conformance_device(Kernel& k, const KernelCase& c, Verdict& v) {
  if (stage_profile().on) ++stage_profile().cases;
  std::optional<device::DeviceCase> dc;
  {
    const Stage s("inputs");
    dc.emplace(c, "grad.case");
  }
  const CaseGeometry& g = dc->geometry();
  std::optional<device::DeviceOutput> dq, dk, dv;
  {
    const Stage s("output");
    dq.emplace(gradient_buffer(g.q_rows, c.heads, c.head_dim, "grad.out.dq"));
    dk.emplace(gradient_buffer(g.kv_rows, c.kv_heads, c.head_dim, "grad.out.dk"));
    dv.emplace(gradient_buffer(g.kv_rows, c.kv_heads, c.v_head_dim, "grad.out.dv"));
  }
  try {
    const Stage s("kernel");
    k.run_backward_device(*dc, *dq, *dk, *dv);
    device::synchronize();
  } catch (const std::exception& e) {
    exit_on_sticky_error(k);
    v.kind = VerdictKind::kError;
    v.reason = fmt::format("backward: {}", kernel_error_reason(e));
    return;
  }
  device::DeviceGradientReference ref;
  {
    const Stage s("reference+baseline");
    ref = device::device_reference_gradients(*dc);
  }
  GradientComparisons cmp;
  {
    // compare_gradients (core/compare_gradients.cc) with the tensors on the device.
    const Stage s("compare");
    const bool zeroes = k.contract().backward.zeroes_unused_keys;
    const std::vector<RowSpan> queries = query_rows(g), keys = key_rows(g, zeroes);
    const device::DeviceOutput* got[3] = {&*dq, &*dk, &*dv};
    const device::DeviceGradientTensor t[3] = {
        {"dq", g.q_rows, c.heads, c.head_dim, queries, got[0]->out(), ref.truth[0], ref.baseline[0], ref.noise[0], ref.terms[0]},
        {"dk", g.kv_rows, c.kv_heads, c.head_dim, keys, got[1]->out(), ref.truth[1], ref.baseline[1], ref.noise[1], ref.terms[1]},
        {"dv", g.kv_rows, c.kv_heads, c.v_head_dim, keys, got[2]->out(), ref.truth[2], ref.baseline[2], ref.noise[2], ref.terms[2]}};
    cmp = device::device_compare_gradients(c.dtype, c.softcap > 0, t[0], t[1], t[2], tolerance::k_max(c.softcap > 0));
  }
  v.cmp = cmp.decisive();
  v.reason = failure_reason(cmp);
  std::int64_t damage = 0;
  {
    const Stage s("canaries");
    damage = device::canary_damage({&*dq, &*dk, &*dv});
  }
  if (damage > 0 && v.reason.empty())
    v.reason = fmt::format("{} canary element{} around dQ/dK/dV overwritten", damage, damage > 1 ? "s" : "");
  v.kind = v.reason.empty() ? VerdictKind::kPass : VerdictKind::kFail;
}

}  // namespace flashcheck
