// Comma-separated command-line values ("gqa=3,leftpad,causal", "1x7,3x3"): the items in order, empty ones kept so
// that the caller can refuse "a,,b" by name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashcheck {

inline std::vector<std::string> comma_list(std::string_view spec) {
  std::vector<std::string> items;
  for (std::size_t at = 0;;) {
    const std::size_t end = spec.find(',', at);
    items.emplace_back(spec.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return items;
    at = end + 1;
  }
}

}  // namespace flashcheck
