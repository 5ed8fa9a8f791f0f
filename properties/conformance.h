// The conformance check: one case on one kernel against the fp64 reference under the tolerance rule.
// The CLI's replay, the fuzz runner and the gtest properties all decide through this function.
#pragma once

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "core/verdict.h"
#include "kernels/kernel.h"

namespace flashcheck {

struct ConformanceOptions {
  bool ignore_contract = false;  // run even when the contract excludes the case (known-crash fixtures)
};

// Never throws for a kernel failure: errors from the kernel become an `error` verdict, cases outside
// the contract an `unsupported` one. Tensors must match the case (check_shapes).
Verdict check_conformance(Kernel& k, const KernelCase& c, const CaseTensors& t, const ConformanceOptions& opt = {});

}  // namespace flashcheck
