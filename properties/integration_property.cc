#include "properties/integration_property.h"

#include <fmt/format.h>

#include "properties/integration.h"

namespace flashcheck {
namespace {

class Integration : public Property {
 public:
  Integration(hf::Profile profile, hf::PathDefect defect, IntegrationKind kind)
      : profile_(profile), defect_(defect), kind_(kind), name_(integration_property_name(kind)) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override {
    if (kind_.backward)
      return kind_.path == hf::HfPath::kSdpa
                 ? "training through transformers' SDPA path: dQ, dK, dV of torch's autograd ~ exact gradients, as close "
                   "as eager's autograd"
                 : "training through transformers' flash path: the kernel's backward, gathered and scattered as the path's "
                   "autograd does, ~ exact gradients, as close as eager's autograd";
    return kind_.path == hf::HfPath::kSdpa
               ? "transformers' SDPA path (torch's SDPA under the release's mask or is_causal shortcut) ~ exact "
                 "attention, as close as transformers' eager attention"
               : "transformers' flash path on the kernel ~ exact attention, as close as transformers' eager attention";
  }
  // The flash path's backward runs the kernel's backward; the SDPA path's runs torch's, wherever the kernel is.
  CaseRequirements requirements() const override {
    return {.backward = kind_.backward && kind_.path == hf::HfPath::kFlash, .training = kind_.backward};
  }
  CaseLevel level() const override { return CaseLevel::kModel; }
  std::string label() const override { return fmt::format("{}/{}", name(), hf::to_string(profile_)); }
  std::string_view profile() const override { return hf::to_string(profile_); }
  bool demands_model_coverage() const override { return hf::profile_spec(profile_).model_coverage_required; }

  Judgement judge(Kernel& k, const AnyCase& c) const override {
    const ModelCase* m = std::get_if<ModelCase>(&c);
    if (!m) return Property::judge(k, c);
    IntegrationResult r = kind_.backward                    ? check_integration_backward(profile_, k, *m, kind_.path, defect_)
                          : kind_.path == hf::HfPath::kSdpa ? check_sdpa_integration(profile_, k, *m, defect_)
                                                            : check_integration(profile_, k, *m, defect_);
    return {std::move(r.verdict), r.known ? r.known->id : ""};
  }

 private:
  hf::Profile profile_;
  hf::PathDefect defect_;
  IntegrationKind kind_;
  std::string name_;
};

}  // namespace

std::string integration_property_name(IntegrationKind kind) {
  return std::string(kind.path == hf::HfPath::kSdpa ? "integration-sdpa" : "integration") + (kind.backward ? "-backward" : "");
}

std::optional<IntegrationKind> integration_kind(std::string_view property_name) {
  for (hf::HfPath p : {hf::HfPath::kFlash, hf::HfPath::kSdpa})
    for (bool backward : {false, true})
      if (integration_property_name({p, backward}) == property_name) return IntegrationKind{p, backward};
  return std::nullopt;
}

std::optional<hf::HfPath> integration_path(std::string_view property_name) {
  if (const auto kind = integration_kind(property_name)) return kind->path;
  return std::nullopt;
}

std::unique_ptr<Property> integration_property(hf::Profile profile, hf::PathDefect defect, IntegrationKind kind) {
  return std::make_unique<Integration>(profile, defect, kind);
}

const Property& integration_on_hf_main(IntegrationKind kind) {
  static const Integration flash(hf::Profile::kHfMain, hf::PathDefect::kNone, {hf::HfPath::kFlash, false});
  static const Integration sdpa(hf::Profile::kHfMain, hf::PathDefect::kNone, {hf::HfPath::kSdpa, false});
  static const Integration flash_bw(hf::Profile::kHfMain, hf::PathDefect::kNone, {hf::HfPath::kFlash, true});
  static const Integration sdpa_bw(hf::Profile::kHfMain, hf::PathDefect::kNone, {hf::HfPath::kSdpa, true});
  if (kind.backward) return kind.path == hf::HfPath::kSdpa ? sdpa_bw : flash_bw;
  return kind.path == hf::HfPath::kSdpa ? sdpa : flash;
}

}  // namespace flashcheck
