// The integration property as a Property: one HF flash-path profile (and, for the mutation self-test, one
// deliberate defect of it) judged on model-level cases by check_integration (properties/integration.h).
#pragma once

#include <memory>

#include "oracles/hf_flash_path.h"
#include "properties/property.h"

namespace flashcheck {

std::unique_ptr<Property> integration_property(hf::Profile profile, hf::PathDefect defect = hf::PathDefect::kNone);

// The property that `find_property("integration")` returns.
const Property& integration_on_hf_main();

}  // namespace flashcheck
