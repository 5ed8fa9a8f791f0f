#include "kernels/device_errors.h"

#include <cstdio>
#include <exception>
#include <unistd.h>

#include "core/files.h"

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
  if (!note_path().empty()) {
    try {
      write_file_atomic(note_path(), why + "\n", Overwrite::kReplace, /*durable=*/false);
    } catch (const std::exception&) {  // the worker's stderr still has the message
    }
  }
  std::fflush(nullptr);
  ::_exit(kStickyDeviceErrorExit);
}

std::string kernel_error_reason(const std::exception& e) {
  std::string why = e.what();
  if (const std::size_t at = why.find("Exception raised from "); at != std::string::npos) why.erase(at);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return why;
}

}  // namespace flashcheck
