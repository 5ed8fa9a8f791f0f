// Counter-based random numbers for tensor contents: a pure function of (seed, tensor, coordinates).
//
// Philox4x32-10 (Salmon et al., SC'11): the same bits on every machine, compiler, thread count and
// device, independent of the order in which elements are filled. Nothing here touches LibTorch's or the
// standard library's generators, whose streams differ between versions and devices.
#pragma once

#include <cstdint>

#include "core/portable.h"

namespace flashcheck {

struct Philox4 {
  std::uint32_t w[4];
};

FC_HD inline Philox4 philox4x32_10(Philox4 ctr, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * ctr.w[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * ctr.w[2];
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    ctr = Philox4{{hi1 ^ ctr.w[1] ^ key0, lo1, hi0 ^ ctr.w[3] ^ key1, lo0}};
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

// Identifies which tensor an element belongs to; part of the counter, so tensors never share streams.
enum class TensorId : std::uint32_t { kQ = 1, kK = 2, kV = 3, kDO = 4, kDORows = 5, kBlockTable = 6 };

// Tensors laid out like the queries (one row per query position and query head): Q and the upstream gradient.
FC_HD inline bool query_side(TensorId t) { return t == TensorId::kQ || t == TensorId::kDO; }

// The four random words of one logical element (sequence b, position, head, channel) of a tensor.
FC_HD inline Philox4 element_bits(std::uint64_t seed, TensorId tensor, std::uint32_t b, std::uint32_t pos,
                                  std::uint32_t head, std::uint32_t channel) {
  const Philox4 ctr{{channel | (head << 16), pos, b, static_cast<std::uint32_t>(tensor)}};
  return philox4x32_10(ctr, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// Uniform on [0, 1) with 24 random bits: exact in float and double.
FC_HD inline double unit_uniform(std::uint32_t w) { return static_cast<double>(w >> 8) * (1.0 / 16777216.0); }

// Standard-normal-shaped value: the standardized sum of four 24-bit uniforms (Irwin-Hall, n = 4), in
// [-2*sqrt(3), 2*sqrt(3)). Integer sum, one subtraction and one multiplication, each exact or correctly
// rounded in IEEE double, so host and device agree bit for bit (Box-Muller would need log and cos).
FC_HD inline double irwin_hall_normal(const Philox4& r) {
  const std::uint64_t s = static_cast<std::uint64_t>(r.w[0] >> 8) + (r.w[1] >> 8) + (r.w[2] >> 8) + (r.w[3] >> 8);
  // var(sum of four U(0,1)) = 1/3; the constant is sqrt(3) / 2^24.
  return portable::mul(static_cast<double>(static_cast<std::int64_t>(s) - (std::int64_t{1} << 25)),
                       1.7320508075688772 / 16777216.0);
}

}  // namespace flashcheck
