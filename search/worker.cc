#include "search/worker.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <poll.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

#include "core/files.h"
#include "kernels/device_errors.h"

namespace flashcheck {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Child side: each message is "<tag> <payload>\n"; 'B' and 'E' frame items.
class PipeChannel : public WorkerChannel {
 public:
  explicit PipeChannel(int fd) : fd_(fd) {}
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

 private:
  int fd_;
};

// In-process side: messages go straight to the handler.
class DirectChannel : public WorkerChannel {
 public:
  explicit DirectChannel(const WorkerHandler& h) : h_(h) {}
  void begin(std::string_view) override {}
  void end() override {}
  void send(char tag, std::string_view payload) override { h_(tag, std::string(payload)); }

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

}  // namespace

WorkerExit run_worker(const WorkerBody& body, const WorkerHandler& on_message, const WorkerOptions& o) {
  WorkerExit x;
  if (!o.isolate) {
    DirectChannel channel(on_message);
    try {
      body(channel);
    } catch (const std::exception& e) {
      x.clean = false;
      x.error = e.what();
    }
    return x;
  }

  static std::atomic<int> serial{0};
  const std::string note = (std::filesystem::temp_directory_path() /
                            fmt::format("flashcheck-worker-{}-{}.note", ::getpid(), serial++)).string();
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(fmt::format("pipe failed: {}", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::close(fds[0]);
    set_device_error_note(note);
    PipeChannel channel(fds[1]);
    try {
      body(channel);
    } catch (const std::exception& e) {
      std::string what = e.what();
      std::replace(what.begin(), what.end(), '\n', ' ');
      channel.send('X', what);
    }
    ::_exit(0);
  }
  ::close(fds[1]);

  std::string buffer;
  std::optional<std::string> in_flight;
  auto item_start = Clock::now();
  for (;;) {
    int wait_ms = -1;
    if (in_flight && o.item_timeout > 0) {
      const double left = o.item_timeout - since(item_start);
      wait_ms = left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
    }
    pollfd pf{fds[0], POLLIN, 0};
    const int ready = ::poll(&pf, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {  // the item in flight ran past its limit
      ::kill(pid, SIGKILL);
      x.timed_out = true;
      break;
    }
    char chunk[65536];
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the worker finished or died
    buffer.append(chunk, static_cast<std::size_t>(n));
    std::size_t eol;
    while ((eol = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, eol);
      buffer.erase(0, eol + 1);
      if (line.size() < 2) continue;
      const char tag = line[0];
      std::string payload = line.substr(2);
      if (tag == 'B') {
        in_flight = std::move(payload);
        item_start = Clock::now();
      } else if (tag == 'E') {
        in_flight.reset();
      } else if (tag == 'X') {
        x.clean = false;
        x.error = std::move(payload);
      } else {
        on_message(tag, payload);
      }
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string reason = x.timed_out ? fmt::format("no result within {} s; process killed", o.item_timeout)
                                         : exit_reason(status, note);
  remove_file(note);
  if (in_flight) {
    x.clean = false;
    x.died_in = std::move(in_flight);
    x.reason = reason;
  } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    x.clean = false;
    x.reason = reason;
  }
  return x;
}

}  // namespace flashcheck
