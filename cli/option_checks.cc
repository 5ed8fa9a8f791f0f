#include "cli/option_checks.h"

#include <cmath>
#include <fmt/format.h>

namespace flashcheck::cli {

bool check_count(std::string_view command, std::string_view option, std::int64_t value, std::int64_t lo, std::int64_t hi) {
  if (value >= lo && value <= hi) return true;
  fmt::print(stderr, "flashcheck {}: {} {} is outside [{}, {}]\n", command, option, value, lo, hi);
  return false;
}

bool check_seconds(std::string_view command, std::string_view option, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return true;
  fmt::print(stderr, "flashcheck {}: {} {} is not a number of seconds in [{}, {}]\n", command, option, value, lo, hi);
  return false;
}

bool check_timeout(std::string_view command, double value) {
  if (std::isfinite(value) && value > 0 && value <= kMaxSeconds) return true;
  fmt::print(stderr, "flashcheck {}: --timeout {} is not a number of seconds in (0, {}]\n", command, value, kMaxSeconds);
  return false;
}

}  // namespace flashcheck::cli
