#include "properties/integration_property.h"

#include <fmt/format.h>

#include "properties/integration.h"

namespace flashcheck {
namespace {

class Integration : public Property {
 public:
  Integration(hf::Profile profile, hf::PathDefect defect) : profile_(profile), defect_(defect) {}

  std::string_view name() const override { return "integration"; }
  std::string_view description() const override {
    return "transformers' flash path on the kernel ~ exact attention, as close as transformers' eager attention";
  }
  CaseLevel level() const override { return CaseLevel::kModel; }
  std::string label() const override { return fmt::format("integration/{}", hf::to_string(profile_)); }
  std::string_view profile() const override { return hf::to_string(profile_); }
  bool demands_model_coverage() const override { return hf::profile_spec(profile_).model_coverage_required; }

  Judgement judge(Kernel& k, const AnyCase& c) const override {
    const ModelCase* m = std::get_if<ModelCase>(&c);
    if (!m) return Property::judge(k, c);
    IntegrationResult r = check_integration(profile_, k, *m, defect_);
    return {std::move(r.verdict), r.known ? r.known->id : ""};
  }

 private:
  hf::Profile profile_;
  hf::PathDefect defect_;
};

}  // namespace

std::unique_ptr<Property> integration_property(hf::Profile profile, hf::PathDefect defect) {
  return std::make_unique<Integration>(profile, defect);
}

const Property& integration_on_hf_main() {
  static const Integration p(hf::Profile::kHfMain, hf::PathDefect::kNone);
  return p;
}

}  // namespace flashcheck
