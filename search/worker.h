// The isolated worker protocol: the one way the harness runs kernels. A worker is a child process that
// runs a body (a fuzz run, a list of replay jobs) and reports to its parent over a pipe, one message a
// line. The body marks each item (a case, a job) with begin/end, so that when the child crashes, hangs
// past the item limit or hits a sticky device error, the parent knows which item it died in and carries on
// with a fresh worker: a crashing kernel never takes the harness, or the records before it, down.
//
// The parent only forks, reads and answers: it must not have started threads (LibTorch's OpenMP pool, a
// CUDA context) before forking, so every kernel call, reference and oracle runs inside a body. A body
// that serves many requests (a campaign worker) reads them from its parent with receive().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace flashcheck {

// What a body sends to its parent. Payloads hold no newline.
class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  virtual void begin(std::string_view item) = 0;  // an item starts: its limit runs from here
  virtual void end() = 0;                         // the item in flight finished
  // Anything else, for the caller's handler. 'B', 'E' and 'X' are the protocol's own (begin, end, the
  // body's exception).
  virtual void send(char tag, std::string_view payload) = 0;
  // The next line the parent told this worker (WorkerProcess::tell); nothing once the parent closed its
  // side, and always nothing in-process.
  virtual std::optional<std::string> receive() = 0;
};

struct WorkerOptions {
  bool isolate = true;        // false: the body runs in this process (debuggers, sanitizers)
  double item_timeout = 300;  // seconds one item may take; <= 0: no limit
  // Set in the child before the body runs, so before any CUDA call: CUDA_VISIBLE_DEVICES pins a worker to
  // its GPU (the CUDA runtime reads it once, when it initializes).
  std::vector<std::pair<std::string, std::string>> env;
  // > 0: the worker's address space (RLIMIT_AS) in bytes, so that an allocation past it fails inside the worker
  // (a kernel's error, or the harness's own: fuzz stops with a harness error) instead of the machine's OOM killer
  // taking the worker, or the whole machine, down. Only for workers that run host kernels: a CUDA context
  // reserves more address space than any sensible limit. Ignored under AddressSanitizer, which reserves terabytes.
  std::int64_t memory_limit = 0;
};

// The default memory limit of each of `workers` concurrent host-kernel workers: three quarters of the machine's
// physical memory, shared.
std::int64_t default_worker_memory(int workers = 1);
// "--worker-memory": GiB as given (0 disables the limit), or the default.
std::int64_t worker_memory_bytes(double gib, int workers = 1);

struct WorkerExit {
  bool clean = true;                   // the body returned and the worker exited normally
  std::optional<std::string> died_in;  // the item in flight when the worker died or was killed
  bool timed_out = false;              // killed for exceeding the item limit
  std::string reason;                  // signal, exit status, limit, or the sticky device error's message
  std::string error;                   // the body threw: its message (a harness error, not a kernel fault)
};

using WorkerBody = std::function<void(WorkerChannel&)>;
using WorkerHandler = std::function<void(char tag, const std::string& payload)>;

// Runs `body` once (in a child unless o.isolate is false), passing every message other than begin/end
// to `on_message` as it arrives.
WorkerExit run_worker(const WorkerBody& body, const WorkerHandler& on_message, const WorkerOptions& o);

// One isolated worker among several that the caller watches at once (a campaign's supervisor): poll fd(),
// pump() when it is readable, kill_hung() when item_time_left() runs out, finish() once pump() says the
// worker is gone. The child dies with its parent (a supervisor killed by SIGKILL leaves no worker behind).
class WorkerProcess {
 public:
  WorkerProcess(const WorkerBody& body, const WorkerOptions& o);
  ~WorkerProcess();  // kills and reaps a worker still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  int fd() const { return from_child_; }
  pid_t pid() const { return pid_; }
  // Reads what the worker sent and hands each message to `on_message`; false once the worker closed its end.
  bool pump(const WorkerHandler& on_message);
  // Seconds before the item in flight runs past its limit; nothing when no item is in flight or no limit.
  std::optional<double> item_time_left() const;
  void kill_hung();                  // the item in flight ran past its limit
  void tell(std::string_view line);  // a line for the body's receive(); lost if the worker is gone
  WorkerExit finish();               // after pump() returned false: reaps the worker and says how it ended

 private:
  double item_timeout_;
  pid_t pid_ = -1;
  int from_child_ = -1, to_child_ = -1;
  std::string note_, buffer_;
  std::optional<std::string> in_flight_;
  double item_start_ = 0;
  bool timed_out_ = false;
  WorkerExit exit_;
};

}  // namespace flashcheck
