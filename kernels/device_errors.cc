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
  const bool allocation = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                          why.find("can't allocate memory") != std::string::npos ||
                          why.find("out of memory") != std::string::npos;
  if (allocation && worker_memory_limit() > 0)
    why += fmt::format(" (an allocation failed under {}; --worker-memory raises it)", worker_memory_limit_text());
  return why;
}

std::int64_t worker_memory_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<std::int64_t>(r.rlim_cur);
}

std::string worker_memory_limit_text() {
  const std::int64_t limit = worker_memory_limit();
  return limit > 0 ? fmt::format("the worker's memory limit of {:.3g} GiB", static_cast<double>(limit) / (1 << 30)) : "";
}

}  // namespace flashcheck
