#include "kernels/output_buffer.h"

#include <cstring>

#include "core/geometry.h"

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

OutputBuffer::OutputBuffer(std::int64_t out_elems, std::int64_t lse_elems, std::int64_t margin)
    : out_elems_(out_elems),
      lse_elems_(lse_elems),
      margin_(margin),
      out_(static_cast<std::size_t>(out_elems + 2 * margin)),
      lse_(static_cast<std::size_t>(lse_elems + 2 * margin)) {
  poison();
}

void OutputBuffer::poison() {
  const float unwritten = from_bits(kUnwrittenBits), canary = from_bits(kCanaryBits);
  for (auto* v : {&out_, &lse_}) {
    std::fill(v->begin(), v->end(), unwritten);
    std::fill(v->begin(), v->begin() + margin_, canary);
    std::fill(v->end() - margin_, v->end(), canary);
  }
  lse_written = false;
}

std::int64_t OutputBuffer::canary_damage() const {
  std::int64_t n = 0;
  for (const auto* v : {&out_, &lse_}) {
    for (std::int64_t i = 0; i < margin_; ++i) {
      n += bits_of((*v)[static_cast<std::size_t>(i)]) != kCanaryBits;
      n += bits_of((*v)[v->size() - 1 - static_cast<std::size_t>(i)]) != kCanaryBits;
    }
  }
  return n;
}

OutputBuffer output_buffer_for(const KernelCase& c, const CaseGeometry& g) {
  return OutputBuffer(g.q_rows * c.heads * c.v_head_dim, g.q_rows * c.heads, canary_margin(c));
}

bool OutputBuffer::unwritten(float x) { return bits_of(x) == kUnwrittenBits; }

AttentionResult OutputBuffer::to_result() const {
  AttentionResult r;
  r.out.assign(out(), out() + out_elems_);
  if (lse_written) r.lse.assign(lse(), lse() + lse_elems_);
  return r;
}

}  // namespace flashcheck
