#include "properties/integration_property.h"

#include <fmt/format.h>

#include "properties/integration.h"

namespace flashcheck {
namespace {

class Integration : public Property {
 public:
  Integration(hf::Profile profile, hf::PathDefect defect, hf::HfPath path) : profile_(profile), defect_(defect), path_(path) {}

  std::string_view name() const override { return integration_property_name(path_); }
  std::string_view description() const override {
    return path_ == hf::HfPath::kSdpa
               ? "transformers' SDPA path (torch's SDPA under the release's mask or is_causal shortcut) ~ exact "
                 "attention, as close as transformers' eager attention"
               : "transformers' flash path on the kernel ~ exact attention, as close as transformers' eager attention";
  }
  CaseLevel level() const override { return CaseLevel::kModel; }
  std::string label() const override { return fmt::format("{}/{}", name(), hf::to_string(profile_)); }
  std::string_view profile() const override { return hf::to_string(profile_); }
  bool demands_model_coverage() const override { return hf::profile_spec(profile_).model_coverage_required; }

  Judgement judge(Kernel& k, const AnyCase& c) const override {
    const ModelCase* m = std::get_if<ModelCase>(&c);
    if (!m) return Property::judge(k, c);
    IntegrationResult r = path_ == hf::HfPath::kSdpa ? check_sdpa_integration(profile_, k, *m, defect_)
                                                     : check_integration(profile_, k, *m, defect_);
    return {std::move(r.verdict), r.known ? r.known->id : ""};
  }

 private:
  hf::Profile profile_;
  hf::PathDefect defect_;
  hf::HfPath path_;
};

}  // namespace

std::string_view integration_property_name(hf::HfPath path) {
  return path == hf::HfPath::kSdpa ? "integration-sdpa" : "integration";
}

std::optional<hf::HfPath> integration_path(std::string_view property_name) {
  for (hf::HfPath p : {hf::HfPath::kFlash, hf::HfPath::kSdpa})
    if (integration_property_name(p) == property_name) return p;
  return std::nullopt;
}

std::unique_ptr<Property> integration_property(hf::Profile profile, hf::PathDefect defect, hf::HfPath path) {
  return std::make_unique<Integration>(profile, defect, path);
}

const Property& integration_on_hf_main(hf::HfPath path) {
  static const Integration flash(hf::Profile::kHfMain, hf::PathDefect::kNone, hf::HfPath::kFlash);
  static const Integration sdpa(hf::Profile::kHfMain, hf::PathDefect::kNone, hf::HfPath::kSdpa);
  return path == hf::HfPath::kSdpa ? sdpa : flash;
}

}  // namespace flashcheck
