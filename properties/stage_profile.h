// Wall time per stage of a case: the device conformance path (properties/conformance_device.cc) and grad-conformance
// (properties/gradient_properties.cc) time each stage. FLASHCHECK_PROFILE=1 turns it on and prints it at exit;
// `flashcheck bench --mix realistic` turns it on and reads it per shape. Host-only: the CPU build has it too.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace flashcheck {

struct StageProfile {
  bool on = false;
  std::map<std::string, double> seconds;  // stage -> summed seconds
  std::int64_t cases = 0;
  void clear() {
    seconds.clear();
    cases = 0;
  }
  ~StageProfile();  // prints the table when FLASHCHECK_PROFILE asked for it
};

StageProfile& stage_profile();

// Adds the time from its construction to its destruction to stage `name` when the profile is on; `sync` (the
// device's synchronize, for stages that leave work queued) runs first.
class ScopedStage {
 public:
  explicit ScopedStage(const char* name, void (*sync)() = nullptr);
  ~ScopedStage();
  ScopedStage(const ScopedStage&) = delete;
  ScopedStage& operator=(const ScopedStage&) = delete;

 private:
  const char* name_;
  void (*sync_)();
  double start_;
};

}  // namespace flashcheck
