// Errors about bad input and unwritable output: every message names where the input came from (or where
// the output was going), the field and the reason. Commands turn both into exit status 2.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>

namespace flashcheck {

// A message fit for a terminal: bytes outside printable ASCII (a hostile file's key, a path with control
// characters) become '?', and anything past `max` characters is cut.
inline std::string printable(std::string_view s, std::size_t max = 400) {
  std::string out;
  out.reserve(std::min(s.size(), max + 3));
  for (char ch : s) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(ch);
    out += (u >= 0x20 && u < 0x7f) ? ch : '?';
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
