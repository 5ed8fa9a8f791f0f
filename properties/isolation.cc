#include "properties/isolation.h"

#include "properties/device_errors.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace flashcheck {
namespace {

// Child side: "B <i>\n" before job i, "R <i> <json array>\n" after it.
[[noreturn]] void child_loop(int fd, std::size_t from, std::size_t jobs, const IsolatedJob& job) {
  auto write_all = [fd](const std::string& s) {
    std::size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(3);
      done += static_cast<std::size_t>(n);
    }
  };
  for (std::size_t i = from; i < jobs; ++i) {
    write_all(fmt::format("B {}\n", i));
    nlohmann::json arr = nlohmann::json::array();
    try {
      for (const Verdict& v : job(i)) arr.push_back(to_json(v));
    } catch (const std::exception& e) {
      Verdict v;
      v.kind = VerdictKind::kError;
      v.reason = std::string("harness error: ") + e.what();
      arr.push_back(to_json(v));
    }
    write_all(fmt::format("R {} {}\n", i, arr.dump()));
  }
  ::_exit(0);
}

std::string signal_reason(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("process killed by signal {} ({})", sig, strsignal(sig));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kStickyDeviceErrorExit)
    return "sticky device error: the CUDA context was lost (the worker's stderr has the message)";
  if (WIFEXITED(status)) return fmt::format("process exited with status {} mid-case", WEXITSTATUS(status));
  return "process ended mid-case";
}

}  // namespace

std::vector<std::vector<Verdict>> run_isolated(std::size_t jobs, const IsolatedJob& job, const JobLabel& label,
                                               const IsolationOptions& opt) {
  std::vector<std::vector<Verdict>> results(jobs);
  if (!opt.enabled) {
    for (std::size_t i = 0; i < jobs; ++i) results[i] = job(i);
    return results;
  }
  std::size_t next = 0;
  while (next < jobs) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      child_loop(fds[1], next, jobs, job);
    }
    ::close(fds[1]);
    std::string buffer;
    long in_flight = -1;
    bool timed_out = false;
    auto started = std::chrono::steady_clock::now();
    for (;;) {
      int wait_ms = -1;
      if (in_flight >= 0 && opt.timeout_seconds > 0) {
        const double left = opt.timeout_seconds -
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        wait_ms = left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
      }
      pollfd p{fds[0], POLLIN, 0};
      const int ready = ::poll(&p, 1, wait_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {  // the job in flight ran past its limit
        ::kill(pid, SIGKILL);
        timed_out = true;
        break;
      }
      char chunk[65536];
      const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // child finished or died
      buffer.append(chunk, static_cast<std::size_t>(n));
      std::size_t eol;
      while ((eol = buffer.find('\n')) != std::string::npos) {
        const std::string line = buffer.substr(0, eol);
        buffer.erase(0, eol + 1);
        if (line.rfind("B ", 0) == 0) {
          in_flight = std::stol(line.substr(2));
          started = std::chrono::steady_clock::now();
        } else if (line.rfind("R ", 0) == 0) {
          const std::size_t sp = line.find(' ', 2);
          const auto i = static_cast<std::size_t>(std::stoul(line.substr(2, sp - 2)));
          for (const auto& v : nlohmann::json::parse(line.substr(sp + 1))) results[i].push_back(verdict_from_json(v));
          next = i + 1;
          in_flight = -1;
        }
      }
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (in_flight >= 0) {
      Verdict v = label(static_cast<std::size_t>(in_flight));
      v.kind = timed_out ? VerdictKind::kTimeout : VerdictKind::kCrash;
      v.reason = timed_out ? fmt::format("no result within {} s; process killed", opt.timeout_seconds) : signal_reason(status);
      results[static_cast<std::size_t>(in_flight)].push_back(v);
      next = static_cast<std::size_t>(in_flight) + 1;
    } else if (next < jobs && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      throw std::runtime_error("worker process failed between cases: " + signal_reason(status));
    }
  }
  return results;
}

}  // namespace flashcheck
