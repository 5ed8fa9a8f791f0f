// Device memory for the GPU path: named, grow-only slots reused from case to case, so that a fuzz loop
// does not pay cudaMalloc per case; plus the error check every CUDA call goes through. Host-callable,
// no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace flashcheck::device {

// A CUDA error. `sticky` errors (illegal address, launch failure, ...) leave the context unusable: the
// process must record its case and exit, never go on shrinking in it: after a sticky error every later
// CUDA call fails the same way (CUDA Runtime API, "Error Handling": sticky errors corrupt the context).
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& what, bool sticky) : std::runtime_error(what), sticky_(sticky) {}
  bool sticky() const { return sticky_; }

 private:
  bool sticky_;
};

// Whether `code` (a cudaError_t) leaves the context unusable.
bool is_sticky(int code);
// Throws CudaError when `code` (a cudaError_t) is not cudaSuccess; `what` names the call.
void check(int code, const char* what);
// Checks the last launch error and, with `sync`, everything queued before it.
void check_last(const char* what, bool sync = false);

// Streams: every launch and copy of the harness goes to the calling thread's harness stream, by default
// cudaStreamPerThread. That stream synchronizes with the legacy default stream, where torch and plugins
// work unless told otherwise, so one thread needs nothing more. Threads that keep cases in flight side by
// side each set a stream of their own (kernels/devices.h puts torch on it too), after which synchronize()
// waits for that stream only instead of the whole device.
void* stream();  // the calling thread's harness stream, a cudaStream_t
void set_thread_stream(void* stream);

// A grow-only device buffer per slot name and thread; pointers stay valid until the slot grows again.
void* slot(const std::string& name, std::size_t bytes);
template <typename T>
T* slot_of(const std::string& name, std::size_t count) {
  return static_cast<T*>(slot(name, count * sizeof(T) + 16));
}

void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void synchronize();
bool available();  // a CUDA device is present and usable
int count();       // CUDA devices this process sees (after CUDA_VISIBLE_DEVICES), counted without initializing CUDA here

}  // namespace flashcheck::device
