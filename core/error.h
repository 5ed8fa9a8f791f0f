// Errors about bad input and unwritable output: every message names where the input came from (or where
// the output was going), the field and the reason. Commands turn both into exit status 2.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>

namespace flashcheck {

// A message fit for a terminal: control characters and bytes that are not UTF-8 (a hostile file's key, a
// path with escape sequences) become '?', and anything past `max` bytes is cut.
inline std::string printable(std::string_view s, std::size_t max = 400) {
  std::string out;
  out.reserve(std::min(s.size(), max + 3));
  for (std::size_t i = 0; i < s.size();) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(s[i]);
    // The length of a well-formed UTF-8 sequence starting here (RFC 3629), or 0.
    std::size_t n = u < 0x80 ? 1 : (u >= 0xC2 && u <= 0xDF) ? 2 : (u >= 0xE0 && u <= 0xEF) ? 3 : (u >= 0xF0 && u <= 0xF4) ? 4 : 0;
    for (std::size_t k = 1; k < n; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) n = 0;
    if (n == 1 && (u < 0x20 || u == 0x7f)) n = 0;
    if (n == 0) {
      out += '?';
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string field, std::string reason)
      : std::runtime_error(format(source, field, reason)),
        source_(std::move(source)),
        field_(std::move(field)),
        reason_(std::move(reason)) {}

  const std::string& source() const { return source_; }
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  static std::string format(const std::string& source, const std::string& field, const std::string& reason) {
    std::string m = source.empty() ? std::string("<input>") : printable(source);
    if (!field.empty()) m += ": " + printable(field, 200);
    return m + ": " + printable(reason, 600);
  }
  std::string source_, field_, reason_;
};

// A file or folder the harness must write cannot be written (a full disk, a read-only folder, an --out
// that is a file). Records already written stay; the message says which path and why.
class OutputError : public std::runtime_error {
 public:
  OutputError(const std::string& path, const std::string& reason)
      : std::runtime_error(printable(path) + ": " + printable(reason, 600)), path_(path) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace flashcheck
