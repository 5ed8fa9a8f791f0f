// Every property on every CPU kernel under RapidCheck's own runner (RC_PARAMS applies: seed, max_success,
// reproduce). Test names are <Kernel>.<Property>, so --gtest_filter selects by either.
#include <cstdint>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "kernels/kernel.h"
#include "search/generators.h"
#include "properties/property.h"

namespace flashcheck {
namespace {

// Generates a case inside the kernel's contract and the property's requirements and asserts the verdict.
void check_property(const char* kernel_name, const char* property_name) {
  Kernel* k = builtin_registry().find(kernel_name);
  const Property* p = find_property(property_name);
  RC_ASSERT(k != nullptr);
  RC_ASSERT(p != nullptr);
  if (!p->unsupported_reason(*k).empty()) RC_SUCCEED("property not applicable: " + p->unsupported_reason(*k));
  // Small cases: ctest runs each of these in its own process, and CI has two cores.
  GenLimits limits;
  limits.work_budget = 5e5;
  const KernelCase c = *kernel_case_gen(generation_contract(k->contract(), p->requirements()), p->requirements(), limits);
  const Verdict v = p->check(*k, c);
  RC_PRE(v.kind != VerdictKind::kUnsupported);
  RC_LOG() << summary(c) << "\n" << describe(v) << "\n";
  RC_ASSERT(v.kind == VerdictKind::kPass);
}

#define FLASHCHECK_KERNEL_PROPERTIES(Suite, kernel)                                              \
  RC_GTEST_PROP(Suite, Conformance, ()) { check_property(kernel, "conformance"); }                \
  RC_GTEST_PROP(Suite, Determinism, ()) { check_property(kernel, "determinism"); }                \
  RC_GTEST_PROP(Suite, GqaRepeat, ()) { check_property(kernel, "gqa-repeat"); }                   \
  RC_GTEST_PROP(Suite, VarlenPadded, ()) { check_property(kernel, "varlen-padded"); }             \
  RC_GTEST_PROP(Suite, PagedContiguous, ()) { check_property(kernel, "paged-contiguous"); }       \
  RC_GTEST_PROP(Suite, BatchPermutation, ()) { check_property(kernel, "batch-permutation"); }     \
  RC_GTEST_PROP(Suite, PaddingInvariance, ()) { check_property(kernel, "padding-invariance"); }   \
  RC_GTEST_PROP(Suite, ChunkedPrefill, ()) { check_property(kernel, "chunked-prefill"); }         \
  RC_GTEST_PROP(Suite, Robustness, ()) { check_property(kernel, "robustness"); }                 \
  RC_GTEST_PROP(Suite, GradConformance, ()) { check_property(kernel, "grad-conformance"); }     \
  RC_GTEST_PROP(Suite, GradDeterminism, ()) { check_property(kernel, "grad-determinism"); }     \
  RC_GTEST_PROP(Suite, GradGqa, ()) { check_property(kernel, "grad-gqa"); }                     \
  RC_GTEST_PROP(Suite, GradVarlenPadded, ()) { check_property(kernel, "grad-varlen-padded"); }  \
  RC_GTEST_PROP(Suite, GradBatchPermutation, ()) { check_property(kernel, "grad-batch-permutation"); } \
  RC_GTEST_PROP(Suite, GradMaskedZero, ()) { check_property(kernel, "grad-masked-zero"); }      \
  RC_GTEST_PROP(Suite, GradRobustness, ()) { check_property(kernel, "grad-robustness"); }       \
  RC_GTEST_PROP(Suite, GradFiniteDifference, ()) { check_property(kernel, "grad-fd"); }

FLASHCHECK_KERNEL_PROPERTIES(TiledCpu, "tiled-cpu")
FLASHCHECK_KERNEL_PROPERTIES(TiledCpu16x32, "tiled-cpu-16x32")
FLASHCHECK_KERNEL_PROPERTIES(SdpaMathCpu, "sdpa-math-cpu")
FLASHCHECK_KERNEL_PROPERTIES(CpuFlash, "cpu-flash")

}  // namespace
}  // namespace flashcheck
