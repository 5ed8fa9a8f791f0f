// The generator a property's search draws from: kernel cases inside the kernel's contract and the
// property's requirements, or model cases for model-level properties. One generator type for the driver.
#pragma once

#include <rapidcheck.h>

#include "kernels/kernel.h"
#include "properties/property.h"
#include "search/limits.h"

namespace flashcheck {

// The contract a run draws from: the kernel's, narrowed by the run's dtypes and head dims.
Contract run_contract(const Kernel& k, const GenLimits& lim);

// Why the narrowing leaves nothing of the kernel's contract ("" when something is left).
std::string narrowing_unmet(const Kernel& k, const GenLimits& lim);

rc::Gen<AnyCase> case_gen(const Property& p, const Kernel& k, const GenLimits& lim, const ModelGenLimits& model_lim);

}  // namespace flashcheck
