// The isolated worker protocol: the one way the harness runs kernels. A worker is a child process that
// runs a body (a fuzz run, a list of replay jobs) and reports to its parent over a pipe, one message a
// line. The body marks each item (a case, a job) with begin/end, so that when the child crashes, hangs
// past the item limit or hits a sticky device error, the parent knows which item it died in and carries on
// with a fresh worker: a crashing kernel never takes the harness, or the records before it, down.
//
// The parent only forks and reads: it must not have started threads (LibTorch's OpenMP pool, a CUDA
// context) before forking, so every kernel call, reference and oracle runs inside a body.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

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
};

struct WorkerOptions {
  bool isolate = true;        // false: the body runs in this process (debuggers, sanitizers)
  double item_timeout = 300;  // seconds one item may take; <= 0: no limit
};

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

}  // namespace flashcheck
