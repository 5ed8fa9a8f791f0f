#include "search/worker.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <poll.h>
#include <set>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <stdexcept>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/files.h"
#include "kernels/device_errors.h"

namespace flashcheck {
namespace {

using Clock = std::chrono::steady_clock;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// A harness allocation (not a kernel's: those fail inside the kernel's call and are its error) that failed.
std::string out_of_memory_message() {
  return worker_memory_limit() > 0 ? fmt::format("the harness ran out of memory under {} (--worker-memory raises it; "
                                                 "smaller cases need less)",
                                                 worker_memory_limit_text())
                                   : std::string("the harness ran out of memory");
}

void limit_memory(std::int64_t bytes) {
  if (bytes <= 0 || kAddressSanitizer) return;
  const rlimit r{static_cast<rlim_t>(bytes), static_cast<rlim_t>(bytes)};
  ::setrlimit(RLIMIT_AS, &r);
}

// Child side: each message is "<tag> <payload>\n"; 'B' and 'E' frame items. Requests from the parent
// arrive one a line on a second pipe.
class PipeChannel : public WorkerChannel {
 public:
  PipeChannel(int to_parent, int from_parent) : fd_(to_parent), in_(from_parent) {}
  void begin(std::string_view item) override { send('B', item); }
  void end() override { send('E', ""); }
  void send(char tag, std::string_view payload) override {
    std::string line;
    line.reserve(payload.size() + 3);
    line += tag;
    line += ' ';
    line += payload;
    line += '\n';
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(3);  // the parent is gone: nobody is left to report to
      done += static_cast<std::size_t>(n);
    }
  }
  std::optional<std::string> receive() override {
    for (;;) {
      if (const std::size_t eol = buffer_.find('\n'); eol != std::string::npos) {
        std::string line = buffer_.substr(0, eol);
        buffer_.erase(0, eol + 1);
        return line;
      }
      char chunk[4096];
      const ssize_t n = ::read(in_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_, in_;
  std::string buffer_;
};

// In-process side: messages go straight to the handler.
class DirectChannel : public WorkerChannel {
 public:
  explicit DirectChannel(const WorkerHandler& h) : h_(h) {}
  void begin(std::string_view) override {}
  void end() override {}
  void send(char tag, std::string_view payload) override { h_(tag, std::string(payload)); }
  std::optional<std::string> receive() override { return std::nullopt; }

 private:
  const WorkerHandler& h_;
};

std::string exit_reason(int status, const std::string& note_path) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("process killed by signal {} ({})", sig, strsignal(sig));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kStickyDeviceErrorExit) {
    std::ifstream note(note_path);
    std::string line;
    std::getline(note, line);
    return line.empty() ? "sticky device error: the CUDA context was lost (the worker's stderr has the message)" : line;
  }
  if (WIFEXITED(status)) return fmt::format("process exited with status {}", WEXITSTATUS(status));
  return "process ended abnormally";
}

double now_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// The parent's ends of the pipes of every worker alive: a worker forked later closes them, so that one
// worker never holds another's pipe open (its parent would then never see that worker end).
std::set<int>& parent_fds() {
  static std::set<int> fds;
  return fds;
}

}  // namespace

WorkerProcess::WorkerProcess(const WorkerBody& body, const WorkerOptions& o) : item_timeout_(o.item_timeout) {
  static std::atomic<int> serial{0};
  // A worker gone before reading what it was told must not take the parent down with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  note_ = (std::filesystem::temp_directory_path() / fmt::format("flashcheck-worker-{}-{}.note", ::getpid(), serial++)).string();
  int up[2], down[2];
  if (::pipe(up) != 0 || ::pipe(down) != 0) throw std::runtime_error(fmt::format("pipe failed: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  std::fflush(stdout);  // what the parent printed so far must not be printed again by the child
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(3);  // the parent died before prctl took effect
    // Its own process group: whatever a kernel leaves running (a forked child, a subprocess) dies with the worker
    // (finish(), kill_hung()) instead of holding the pipe or the terminal open after it.
    ::setpgid(0, 0);
    std::signal(SIGPIPE, SIG_DFL);
    for (const int fd : parent_fds()) ::close(fd);
    ::close(up[0]);
    ::close(down[1]);
    // A program a kernel starts does not inherit the protocol's pipes; what a kernel prints goes to stderr, so that
    // the harness's stdout (a --json report) stays the harness's.
    ::fcntl(up[1], F_SETFD, FD_CLOEXEC);
    ::fcntl(down[0], F_SETFD, FD_CLOEXEC);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    for (const auto& [name, value] : o.env) ::setenv(name.c_str(), value.c_str(), 1);
    limit_memory(o.memory_limit);
    set_device_error_note(note_);
    PipeChannel channel(up[1], down[0]);
    try {
      body(channel);
    } catch (const std::bad_alloc&) {
      channel.send('X', out_of_memory_message());
    } catch (const std::exception& e) {
      std::string what = e.what();
      std::replace(what.begin(), what.end(), '\n', ' ');
      channel.send('X', what);
    }
    ::_exit(0);
  }
  ::setpgid(pid_, pid_);  // also here: no race with the child's own call
  ::close(up[1]);
  ::close(down[0]);
  from_child_ = up[0];
  to_child_ = down[1];
  parent_fds().insert(from_child_);
  parent_fds().insert(to_child_);
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    finish();
  }
}

bool WorkerProcess::pump(const WorkerHandler& on_message) {
  char chunk[65536];
  ssize_t n;
  do {
    n = ::read(from_child_, chunk, sizeof chunk);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;  // the worker finished or died
  buffer_.append(chunk, static_cast<std::size_t>(n));
  std::size_t eol, from = 0;
  while ((eol = buffer_.find('\n', from)) != std::string::npos) {
    const std::string_view line(buffer_.data() + from, eol - from);
    from = eol + 1;
    if (line.size() < 2) continue;
    const char tag = line[0];
    std::string payload(line.substr(2));
    if (tag == 'B') {
      in_flight_ = std::move(payload);
      item_start_ = now_seconds();
    } else if (tag == 'E') {
      in_flight_.reset();
    } else if (tag == 'X') {
      exit_.clean = false;
      exit_.error = std::move(payload);
    } else {
      on_message(tag, payload);
    }
  }
  buffer_.erase(0, from);
  return true;
}

std::optional<double> WorkerProcess::item_time_left() const {
  if (!in_flight_ || item_timeout_ <= 0 || timed_out_) return std::nullopt;
  return std::max(0.0, item_timeout_ - (now_seconds() - item_start_));
}

void WorkerProcess::kill_hung() {
  ::kill(-pid_, SIGKILL);  // the worker's group: what its kernel started too
  ::kill(pid_, SIGKILL);
  timed_out_ = true;
}

void WorkerProcess::tell(std::string_view line) {
  std::string l(line);
  l += '\n';
  std::size_t done = 0;
  while (done < l.size()) {
    const ssize_t n = ::write(to_child_, l.data() + done, l.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the worker is gone; its end shows up in pump()
    done += static_cast<std::size_t>(n);
  }
}

WorkerExit WorkerProcess::finish() {
  if (pid_ <= 0) return exit_;
  for (const int fd : {from_child_, to_child_}) {
    parent_fds().erase(fd);
    ::close(fd);
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  ::kill(-pid_, SIGKILL);  // anything the worker's kernels left running
  pid_ = -1;
  const std::string reason = timed_out_ ? fmt::format("no result within {} s; process killed", item_timeout_)
                                        : exit_reason(status, note_);
  remove_file(note_);
  exit_.timed_out = timed_out_;
  if (in_flight_) {
    exit_.clean = false;
    exit_.died_in = std::move(in_flight_);
    exit_.reason = reason;
  } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    exit_.clean = false;
    exit_.reason = reason;
  }
  return exit_;
}

std::int64_t default_worker_memory(int workers) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<std::int64_t>(pages) * page / 4 * 3 / std::max(workers, 1);
}

std::int64_t worker_memory_bytes(double gib, int workers) {
  if (gib < 0) return default_worker_memory(workers);
  return static_cast<std::int64_t>(gib * static_cast<double>(std::int64_t{1} << 30));
}

WorkerExit run_worker(const WorkerBody& body, const WorkerHandler& on_message, const WorkerOptions& o) {
  if (!o.isolate) {
    WorkerExit x;
    DirectChannel channel(on_message);
    try {
      body(channel);
    } catch (const std::exception& e) {
      x.clean = false;
      x.error = e.what();
    }
    return x;
  }
  WorkerProcess w(body, o);
  // The worker's exit, seen directly (Linux pidfd): a process its kernel forked may hold the pipe open after it, and
  // the pipe's end would then wait for that process. Without pidfd (old kernels) only the pipe's end is seen.
  const int exited = static_cast<int>(::syscall(SYS_pidfd_open, w.pid(), 0));
  pollfd pf[2] = {{w.fd(), POLLIN, 0}, {exited, POLLIN, 0}};
  for (;;) {
    const std::optional<double> left = w.item_time_left();
    const int ready = ::poll(pf, 2, left ? static_cast<int>(*left * 1000) + 1 : -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {  // the item in flight ran past its limit
      w.kill_hung();
      continue;
    }
    if (pf[1].fd >= 0 && pf[1].revents != 0) {
      ::kill(-w.pid(), SIGKILL);  // the worker is gone: what it left running goes too, and the pipe ends
      pf[1].fd = -1;
      continue;
    }
    if (pf[0].revents != 0 && !w.pump(on_message)) break;
  }
  if (exited >= 0) ::close(exited);
  return w.finish();
}

}  // namespace flashcheck
