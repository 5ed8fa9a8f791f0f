#include "core/device/device_output.h"

#include <cuda_runtime.h>

#include <vector>

#include "core/device/device_memory.h"
#include "core/device/harness_stream.cuh"

namespace flashcheck::device {
namespace {

// The bit patterns of kernels/output_buffer.cc, so that host and device reports read alike.
constexpr std::uint32_t kUnwrittenBits = 0x7FD1CEADu;
constexpr std::uint32_t kCanaryBits = 0x7FCA0A0Au;

__global__ void pattern_kernel(std::uint32_t* p, std::int64_t total, std::int64_t margin) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    p[i] = (i < margin || i >= total - margin) ? kCanaryBits : kUnwrittenBits;
}

__global__ void count_kernel(const std::uint32_t* p, std::int64_t begin, std::int64_t end, std::uint32_t bits,
                             bool equal, unsigned long long* n) {
  unsigned long long local = 0;
  for (std::int64_t i = begin + blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < end;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    local += ((p[i] == bits) == equal) ? 1 : 0;
  if (local) atomicAdd(n, local);
}

// Margin elements of both buffers whose bits are not the canary's, in one launch.
__global__ void canary_kernel(const std::uint32_t* out, std::int64_t out_total, const std::uint32_t* lse,
                              std::int64_t lse_total, std::int64_t margin, unsigned long long* n) {
  unsigned long long local = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < 4 * margin;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t which = i / margin, at = i % margin;
    const std::uint32_t* base = which < 2 ? out : lse;
    const std::int64_t total = which < 2 ? out_total : lse_total;
    const std::int64_t index = which % 2 == 0 ? at : total - margin + at;
    local += base[index] != kCanaryBits;
  }
  if (local) atomicAdd(n, local);
}

unsigned blocks(std::int64_t n) { return static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256 + 1, 4096)); }

std::int64_t count(const float* base, std::int64_t begin, std::int64_t end, std::uint32_t bits, bool equal) {
  if (end <= begin) return 0;
  auto* n = slot_of<unsigned long long>("output.count", 1);
  check(cudaMemsetAsync(n, 0, sizeof(unsigned long long), harness_stream()), "cudaMemsetAsync");
  count_kernel<<<blocks(end - begin), 256, 0, harness_stream()>>>(reinterpret_cast<const std::uint32_t*>(base), begin, end, bits, equal, n);
  check_last("output buffer count");
  unsigned long long host = 0;
  copy_to_host(&host, n, sizeof host);
  return static_cast<std::int64_t>(host);
}

}  // namespace

DeviceOutput::DeviceOutput(std::int64_t out_elems, std::int64_t lse_elems, std::int64_t margin, const std::string& slot)
    : out_elems_(out_elems), lse_elems_(lse_elems), margin_(margin) {
  out_ = slot_of<float>(slot + ".out", static_cast<std::size_t>(out_elems + 2 * margin));
  lse_ = slot_of<float>(slot + ".lse", static_cast<std::size_t>(lse_elems + 2 * margin));
  poison();
}

void DeviceOutput::poison() {
  pattern_kernel<<<blocks(out_elems_ + 2 * margin_), 256, 0, harness_stream()>>>(reinterpret_cast<std::uint32_t*>(out_), out_elems_ + 2 * margin_, margin_);
  pattern_kernel<<<blocks(lse_elems_ + 2 * margin_), 256, 0, harness_stream()>>>(reinterpret_cast<std::uint32_t*>(lse_), lse_elems_ + 2 * margin_, margin_);
  check_last("output buffer poison");
  lse_written = false;
}

void DeviceOutput::queue_canary_count(unsigned long long* n) const {
  canary_kernel<<<blocks(4 * margin_), 256, 0, harness_stream()>>>(reinterpret_cast<const std::uint32_t*>(out_), out_elems_ + 2 * margin_,
                                              reinterpret_cast<const std::uint32_t*>(lse_), lse_elems_ + 2 * margin_, margin_, n);
}

std::int64_t DeviceOutput::canary_damage() const { return device::canary_damage({this}); }

std::int64_t canary_damage(std::initializer_list<const DeviceOutput*> outputs) {
  auto* n = slot_of<unsigned long long>("output.canaries", 1);
  check(cudaMemsetAsync(n, 0, sizeof(unsigned long long), harness_stream()), "cudaMemsetAsync");
  for (const DeviceOutput* o : outputs) o->queue_canary_count(n);
  check_last("output buffer canaries");
  unsigned long long host = 0;
  copy_to_host(&host, n, sizeof host);
  return static_cast<std::int64_t>(host);
}

std::int64_t DeviceOutput::unwritten() const { return count(out_, margin_, margin_ + out_elems_, kUnwrittenBits, true); }

AttentionResult DeviceOutput::download() const {
  AttentionResult r;
  std::vector<float> f(static_cast<std::size_t>(out_elems_));
  copy_to_host(f.data(), out(), f.size() * sizeof(float));
  r.out.assign(f.begin(), f.end());
  if (lse_written) {
    f.resize(static_cast<std::size_t>(lse_elems_));
    copy_to_host(f.data(), lse(), f.size() * sizeof(float));
    r.lse.assign(f.begin(), f.end());
  }
  return r;
}

}  // namespace flashcheck::device
