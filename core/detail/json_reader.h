// Strict reading of JSON objects with error messages that carry the path of the offending field.
// Internal to core/ (and the oracle's ModelCase reader): include only from .cc files.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/error.h"

namespace flashcheck::detail {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string source, std::string path)
      : j_(j), source_(std::move(source)), path_(std::move(path)) {
    if (!j_.is_object()) fail("", std::string("expected an object, found ") + j_.type_name());
  }

  [[noreturn]] void fail(std::string_view key, const std::string& reason) const {
    throw InputError(source_, field(key), reason);
  }
  std::string field(std::string_view key) const {
    if (key.empty()) return path_;
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  const std::string& source() const { return source_; }
  bool has(std::string_view key) const { return j_.contains(key) && !j_.at(std::string(key)).is_null(); }
  const nlohmann::json& at(std::string_view key) const {
    if (!j_.contains(key)) fail(key, "required field is missing");
    return j_.at(std::string(key));
  }

  std::int64_t integer(std::string_view key) const { return as_integer(at(key), key); }
  std::int64_t integer(std::string_view key, std::int64_t fallback) const {
    return has(key) ? as_integer(at(key), key) : fallback;
  }
  std::int64_t integer_in(std::string_view key, std::int64_t lo, std::int64_t hi) const {
    return as_integer(at(key), key, lo, hi);
  }
  std::int64_t integer_in(std::string_view key, std::int64_t lo, std::int64_t hi, std::int64_t fallback) const {
    return has(key) ? as_integer(at(key), key, lo, hi) : fallback;
  }
  std::uint64_t unsigned_integer(std::string_view key, std::uint64_t fallback) const {
    if (!has(key)) return fallback;
    const auto& v = at(key);
    if (!v.is_number_unsigned()) fail(key, std::string("expected a non-negative integer, found ") + describe(v));
    return v.get<std::uint64_t>();
  }
  double number(std::string_view key, double fallback) const {
    if (!has(key)) return fallback;
    const auto& v = at(key);
    if (!v.is_number()) fail(key, std::string("expected a number, found ") + describe(v));
    return v.get<double>();
  }
  bool boolean(std::string_view key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto& v = at(key);
    if (!v.is_boolean()) fail(key, std::string("expected true or false, found ") + describe(v));
    return v.get<bool>();
  }
  std::string string(std::string_view key) const { return as_string(at(key), key); }
  std::string string(std::string_view key, std::string fallback) const {
    return has(key) ? as_string(at(key), key) : fallback;
  }
  const nlohmann::json& array(std::string_view key) const {
    const auto& v = at(key);
    if (!v.is_array()) fail(key, std::string("expected an array, found ") + describe(v));
    return v;
  }
  JsonReader object(std::string_view key) const {
    const auto& v = at(key);
    if (!v.is_object()) fail(key, std::string("expected an object, found ") + describe(v));
    return JsonReader(v, source_, field(key));
  }

  // Rejects fields outside `known`, which catches misspelled options instead of ignoring them.
  void only(std::initializer_list<std::string_view> known) const {
    for (const auto& [k, v] : j_.items()) {
      bool ok = false;
      for (std::string_view n : known) ok = ok || n == k;
      if (!ok) fail(k, "unknown field");
    }
  }

  // An integer exactly as written: unsigned literals above 2^63 - 1 and floats outside int64 are errors,
  // never wrapped or truncated (2^64 - 1 is not -1). 4.0 is 4; 4.5 is an error.
  std::int64_t as_integer(const nlohmann::json& v, std::string_view key) const {
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        fail(key, std::string("integer out of range (at most 2^63 - 1): ") + describe(v));
      return static_cast<std::int64_t>(v.get<std::uint64_t>());
    }
    if (v.is_number_integer()) return v.get<std::int64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      // [-2^63, 2^63): the doubles whose conversion to int64 is defined.
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        fail(key, std::string("integer out of range: ") + describe(v));
      if (d == static_cast<double>(static_cast<std::int64_t>(d))) return static_cast<std::int64_t>(d);
    }
    fail(key, std::string("expected an integer, found ") + describe(v));
  }
  // An integer in [lo, hi], checked as it is read.
  std::int64_t as_integer(const nlohmann::json& v, std::string_view key, std::int64_t lo, std::int64_t hi) const {
    const std::int64_t x = as_integer(v, key);
    if (x < lo || x > hi) fail(key, std::to_string(x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  std::string as_string(const nlohmann::json& v, std::string_view key) const {
    if (!v.is_string()) fail(key, std::string("expected a string, found ") + describe(v));
    return v.get<std::string>();
  }
  // A short description of a value for messages: its type and, for scalars, its text (never a walk of a
  // large or deep container).
  static std::string describe(const nlohmann::json& v) {
    if (v.is_array()) return "array of " + std::to_string(v.size()) + " elements";
    if (v.is_object()) return "object of " + std::to_string(v.size()) + " fields";
    std::string d = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (d.size() > 40) d = d.substr(0, 37) + "...";
    return std::string(v.type_name()) + " " + d;
  }

 private:
  const nlohmann::json& j_;
  std::string source_;
  std::string path_;
};

}  // namespace flashcheck::detail
