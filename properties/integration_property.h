// The integration property as a Property: one HF path (the flash path, or with HfPath::kSdpa the SDPA path) of
// one profile (and, for the mutation self-test, one deliberate defect of it) judged on model-level cases by
// check_integration / check_sdpa_integration, or on training calls by check_integration_backward
// (properties/integration.h). The flash path's property is named "integration", the SDPA path's
// "integration-sdpa", their backwards "integration-backward" and "integration-sdpa-backward"; each runs once per
// --profile.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "oracles/hf_flash_path.h"
#include "properties/property.h"

namespace flashcheck {

// Which integration property: the path (flash or SDPA), forward or backward (training).
struct IntegrationKind {
  hf::HfPath path = hf::HfPath::kFlash;
  bool backward = false;
  IntegrationKind() = default;
  IntegrationKind(hf::HfPath p, bool b = false) : path(p), backward(b) {}  // NOLINT: a path is its forward property
  bool operator==(const IntegrationKind&) const = default;
};

std::unique_ptr<Property> integration_property(hf::Profile profile, hf::PathDefect defect = hf::PathDefect::kNone,
                                               IntegrationKind kind = {});

// "integration", "integration-sdpa", "integration-backward" or "integration-sdpa-backward".
std::string integration_property_name(IntegrationKind kind);
// The kind a property name selects, or nullopt for any other name.
std::optional<IntegrationKind> integration_kind(std::string_view property_name);
// The path of an integration property's name, or nullopt for any other name.
std::optional<hf::HfPath> integration_path(std::string_view property_name);

// The property that `find_property("integration")` (or any other integration name) returns.
const Property& integration_on_hf_main(IntegrationKind kind = {});

}  // namespace flashcheck
