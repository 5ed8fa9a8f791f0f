// Wall time per stage of the device conformance path (properties/conformance_device.cc times each stage,
// synchronized). FLASHCHECK_PROFILE=1 turns it on and prints it at exit; `flashcheck bench --mix
// realistic` turns it on and reads it per shape. Host-only: the CPU build has it too, and it stays empty.
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

}  // namespace flashcheck
