#include "properties/stage_profile.h"

#include <cstdio>
#include <cstdlib>

namespace flashcheck {

StageProfile::~StageProfile() {
  if (std::getenv("FLASHCHECK_PROFILE") == nullptr || cases == 0) return;
  std::fprintf(stderr, "device conformance profile over %lld cases (ms per case):\n", static_cast<long long>(cases));
  for (const auto& [stage, s] : seconds) std::fprintf(stderr, "  %-20s %8.3f\n", stage.c_str(), 1e3 * s / static_cast<double>(cases));
}

StageProfile& stage_profile() {
  static StageProfile p{.on = std::getenv("FLASHCHECK_PROFILE") != nullptr};
  return p;
}

}  // namespace flashcheck
