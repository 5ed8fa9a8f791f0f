#include "kernels/device_errors.h"

#include <cstdio>
#include <fstream>
#include <unistd.h>

namespace flashcheck {
namespace {

std::string& note_path() {
  static std::string path;
  return path;
}

}  // namespace

void set_device_error_note(const std::string& path) { note_path() = path; }
const std::string& device_error_note() { return note_path(); }

void exit_on_sticky_error(const Kernel& k) {
  const std::string why = k.sticky_error();
  if (why.empty()) return;
  std::fprintf(stderr, "flashcheck: %s in %s; exiting this worker\n", why.c_str(), std::string(k.name()).c_str());
  if (!note_path().empty()) std::ofstream(note_path(), std::ios::trunc) << why << "\n";
  std::fflush(nullptr);
  ::_exit(kStickyDeviceErrorExit);
}

}  // namespace flashcheck
