#include "properties/stage_profile.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace flashcheck {

StageProfile::~StageProfile() {
  if (std::getenv("FLASHCHECK_PROFILE") == nullptr || cases == 0) return;
  std::fprintf(stderr, "stage profile over %lld cases (ms per case):\n", static_cast<long long>(cases));
  for (const auto& [stage, s] : seconds) std::fprintf(stderr, "  %-20s %8.3f\n", stage.c_str(), 1e3 * s / static_cast<double>(cases));
}

StageProfile& stage_profile() {
  static StageProfile p{.on = std::getenv("FLASHCHECK_PROFILE") != nullptr};
  return p;
}

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

ScopedStage::ScopedStage(const char* name, void (*sync)()) : name_(name), sync_(sync), start_(now()) {}

ScopedStage::~ScopedStage() {
  if (!stage_profile().on) return;
  if (sync_) sync_();
  stage_profile().seconds[name_] += now() - start_;
}

}  // namespace flashcheck
