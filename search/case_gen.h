// The generator a property's search draws from: kernel cases inside the kernel's contract and the
// property's requirements, or model cases for model-level properties. One generator type for the driver.
#pragma once

#include <rapidcheck.h>

#include "kernels/kernel.h"
#include "properties/property.h"
#include "search/limits.h"

namespace flashcheck {

rc::Gen<AnyCase> case_gen(const Property& p, const Kernel& k, const GenLimits& lim, const ModelGenLimits& model_lim);

}  // namespace flashcheck
