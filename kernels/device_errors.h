// What a worker does after a sticky device error: the CUDA context is unusable, every later call fails
// the same way, and shrinking in it would walk to a bogus minimum (every candidate fails alike). The
// worker records the message next to its in-flight case and exits with a code of its own; the parent
// process turns that into a crash finding for the in-flight case.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "kernels/kernel.h"

namespace flashcheck {

inline constexpr int kStickyDeviceErrorExit = 86;

// Where the message goes before the process exits ("" = stderr only). Set by the fuzz worker.
void set_device_error_note(const std::string& path);
const std::string& device_error_note();

// Exits the process (after writing the note) when the kernel reports a sticky device error.
void exit_on_sticky_error(const Kernel& k);

// The reason an `error` verdict gives for a kernel's exception: its message without the C++ backtrace that
// PyTorch's c10::Error appends ("Exception raised from ..."), which would bury the message in reports.
std::string kernel_error_reason(const std::exception& e);

// The address-space limit this process runs under (0: none): an isolated worker's (search/worker.h,
// WorkerOptions::memory_limit).
std::int64_t worker_memory_limit();
// "the worker's memory limit of 1.5 GiB", for messages about a failed allocation; "" without a limit.
std::string worker_memory_limit_text();

}  // namespace flashcheck
