// Which keys each query may attend under transformers' eager masking (research/hf.md §6 A1-A4), and
// which query rows the oracle cannot compare (A11, A12). Shared by the eager oracle, the fp64 check of
// it, and the integration property.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/model_case.h"

namespace flashcheck::hf {

enum class RowFlag : std::uint8_t {
  kComparable,   // a real query with at least one allowed key
  kNoKey,        // sees no key: eager returns about the mean of V over every column (A11)
  kPaddedQuery,  // a padding token (its column is invalid in the 2D mask) that still sees keys (A12)
};
std::string_view to_string(RowFlag f);

struct EagerMask {
  std::int64_t batch = 0, q_len = 0, kv_len = 0;
  std::vector<std::uint8_t> allowed;  // [B][Lq][Lk], 1 = attend
  std::vector<RowFlag> rows;          // [B][Lq]
  bool segments = false;              // packed sequences were detected (A3)

  bool at(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return allowed[static_cast<std::size_t>((b * q_len + i) * kv_len + j)] != 0;
  }
  RowFlag row(std::int64_t b, std::int64_t i) const { return rows[static_cast<std::size_t>(b * q_len + i)]; }
};

EagerMask eager_mask(const ModelCase& m);

}  // namespace flashcheck::hf
