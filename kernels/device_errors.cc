#include "kernels/device_errors.h"

#include <cstdio>
#include <exception>
#include <fmt/format.h>
#include <new>
#include <sys/resource.h>
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
  if (const std::size_t at = why.find("\nframe #0"); at != std::string::npos) why.erase(at);  // c10's enforce: a stack
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  // An allocation that failed under the isolated worker's limit (search/worker.h) says so: the limit is the harness's,
  // and the user can raise it.
  rlimit as{};
  const bool allocation = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                          why.find("can't allocate memory") != std::string::npos ||
                          why.find("out of memory") != std::string::npos;
  if (allocation && ::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    why += fmt::format(" (an allocation failed under the worker's memory limit of {:.1f} GiB; --worker-memory raises it)",
                       static_cast<double>(as.rlim_cur) / (1 << 30));
  return why;
}

}  // namespace flashcheck
