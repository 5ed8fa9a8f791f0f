// The integration property as a Property: one HF path (the flash path, or with HfPath::kSdpa the SDPA path) of
// one profile (and, for the mutation self-test, one deliberate defect of it) judged on model-level cases by
// check_integration / check_sdpa_integration (properties/integration.h). The flash path's property is named
// "integration", the SDPA path's "integration-sdpa"; both run once per --profile.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "oracles/hf_flash_path.h"
#include "properties/property.h"

namespace flashcheck {

std::unique_ptr<Property> integration_property(hf::Profile profile, hf::PathDefect defect = hf::PathDefect::kNone,
                                               hf::HfPath path = hf::HfPath::kFlash);

// "integration" or "integration-sdpa".
std::string_view integration_property_name(hf::HfPath path);
// The path a property name selects, or nullopt for any other name.
std::optional<hf::HfPath> integration_path(std::string_view property_name);

// The property that `find_property("integration")` (or "integration-sdpa") returns.
const Property& integration_on_hf_main(hf::HfPath path = hf::HfPath::kFlash);

}  // namespace flashcheck
