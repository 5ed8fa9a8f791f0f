// How a property runs a kernel on one case: into fresh poisoned buffers, a kernel's exception becoming an `error`
// verdict (after a sticky device error the worker exits, kernels/device_errors.h), a case outside the contract an
// `unsupported` one. Shared by the forward and the gradient properties; internal to properties/.
#pragma once

#include <string_view>

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "core/verdict.h"
#include "kernels/kernel.h"

namespace flashcheck::detail {

Verdict make_verdict(const Kernel& k, std::string_view property);

// Whether the case is inside the kernel's contract; sets an `unsupported` verdict naming `which` case when not.
bool in_contract(const Kernel& k, const KernelCase& c, Verdict& v, const char* which);

// One forward run into a fresh poisoned buffer; false (and an error verdict) when the kernel throws.
struct Run {
  OutputBuffer buffer;
  AttentionResult result;
};
bool run_kernel(Kernel& k, const KernelCase& c, const CaseTensors& t, Run& run, Verdict& v);

// A backward case's forward and backward runs, into fresh poisoned buffers; false (and an error verdict naming the
// pass that threw) when the kernel throws.
struct BackwardRun {
  OutputBuffer fwd;
  GradBuffer grads;
  GradientResult result;
};
bool run_backward(Kernel& k, const KernelCase& c, const CaseTensors& t, BackwardRun& run, Verdict& v);

}  // namespace flashcheck::detail
