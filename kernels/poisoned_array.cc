#include "kernels/poisoned_array.h"

#include <algorithm>
#include <cstring>

namespace flashcheck {
namespace {

// Quiet NaNs with payloads no arithmetic produces: a computed NaN never matches them bit for bit.
constexpr std::uint32_t kUnwrittenBits = 0x7FD1CEADu;
constexpr std::uint32_t kCanaryBits = 0x7FCA0A0Au;

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

PoisonedArray::PoisonedArray(std::int64_t elems, std::int64_t margin)
    : elems_(elems), margin_(margin), v_(static_cast<std::size_t>(elems + 2 * margin)) {
  poison();
}

void PoisonedArray::poison() {
  std::fill(v_.begin(), v_.end(), from_bits(kUnwrittenBits));
  std::fill(v_.begin(), v_.begin() + margin_, from_bits(kCanaryBits));
  std::fill(v_.end() - margin_, v_.end(), from_bits(kCanaryBits));
}

std::int64_t PoisonedArray::canary_damage() const {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < margin_; ++i) {
    n += bits_of(v_[static_cast<std::size_t>(i)]) != kCanaryBits;
    n += bits_of(v_[v_.size() - 1 - static_cast<std::size_t>(i)]) != kCanaryBits;
  }
  return n;
}

bool PoisonedArray::unwritten(float x) { return bits_of(x) == kUnwrittenBits; }

}  // namespace flashcheck
