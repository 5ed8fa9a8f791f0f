#include "core/device/device_memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <sys/wait.h>
#include <unistd.h>

namespace flashcheck::device {
namespace {

bool sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

struct Slot {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

}  // namespace

bool is_sticky(int code) { return sticky(static_cast<cudaError_t>(code)); }

void check(int code, const char* what) {
  const auto e = static_cast<cudaError_t>(code);
  if (e == cudaSuccess) return;
  throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")", sticky(e));
}

void check_last(const char* what, bool sync) {
  check(cudaGetLastError(), what);
  if (sync) synchronize();
}

void* slot(const std::string& name, std::size_t bytes) {
  // Per thread: a thread's case owns its buffers while another thread's case is in flight.
  thread_local std::map<std::string, Slot> slots;
  Slot& s = slots[name];
  if (s.bytes < bytes) {
    if (s.ptr) check(cudaFree(s.ptr), "cudaFree");
    s.ptr = nullptr;
    s.bytes = 0;
    const std::size_t grown = bytes + bytes / 4;  // room to grow before the next reallocation
    check(cudaMalloc(&s.ptr, grown), "cudaMalloc");
    s.bytes = grown;
  }
  return s.ptr;
}

namespace {
thread_local cudaStream_t thread_stream = nullptr;  // set by set_thread_stream; null: cudaStreamPerThread
cudaStream_t current_stream() { return thread_stream ? thread_stream : cudaStreamPerThread; }
}  // namespace

void* stream() { return current_stream(); }
void set_thread_stream(void* s) { thread_stream = static_cast<cudaStream_t>(s); }

// A copy from pageable memory has taken the source when cudaMemcpyAsync returns, so only the download waits.
void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_stream()), "cudaMemcpyAsync to device");
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (!bytes) return;
  const cudaStream_t s = current_stream();
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync to host");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void synchronize() {
  if (thread_stream) check(cudaStreamSynchronize(thread_stream), "cudaStreamSynchronize");
  else check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

int count() {
  // Probed in a child process: initializing the CUDA runtime here would break every worker this process
  // forks afterwards (the runtime does not survive fork). Children inherit the cached answer.
  static const int devices = [] {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int n = 0;
      ::_exit(cudaGetDeviceCount(&n) == cudaSuccess ? std::min(n, 254) : 255);
    }
    if (pid < 0) return 0;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) != 255 ? WEXITSTATUS(status) : 0;
  }();
  return devices;
}

bool available() { return count() > 0; }

}  // namespace flashcheck::device
