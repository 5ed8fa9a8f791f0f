// Which keys each query may attend under transformers' eager masking (src/transformers/masking_utils.py:
// sdpa_mask's padding, causal, sliding-window and packed-sequence rules, find_packed_sequence_indices), and
// which query rows the oracle cannot compare with a flash kernel. Shared by the eager oracle, the fp64 check of
// it, and the integration property.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/hf_profiles.h"
#include "core/model_case.h"

namespace flashcheck::hf {

enum class RowFlag : std::uint8_t {
  kComparable,   // a real query with at least one allowed key
  kNoKey,        // sees no key: eager's finfo.min logits give about the mean of V over every column, flash 0
  kPaddedQuery,  // a padding token (its column invalid in the 2D mask) that still sees keys; flash zero-fills it
};
std::string_view to_string(RowFlag f);

struct EagerMask {
  std::int64_t batch = 0, q_len = 0, kv_len = 0;
  std::vector<std::uint8_t> allowed;  // [B][Lq][Lk], 1 = attend
  std::vector<RowFlag> rows;          // [B][Lq]
  bool segments = false;              // packed sequences were detected (find_packed_sequence_indices)

  bool at(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return allowed[static_cast<std::size_t>((b * q_len + i) * kv_len + j)] != 0;
  }
  RowFlag row(std::int64_t b, std::int64_t i) const { return rows[static_cast<std::size_t>(b * q_len + i)]; }
};

// Eager of the profile's release range (its eager_packed_segments switch).
EagerMask eager_mask(const ModelCase& m, Profile p = Profile::kHfMain);

}  // namespace flashcheck::hf
