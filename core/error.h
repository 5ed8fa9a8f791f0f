// Errors about bad input: every message names where the input came from, the field and the reason.
#pragma once

#include <stdexcept>
#include <string>

namespace flashcheck {

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
    std::string m = source.empty() ? std::string("<input>") : source;
    if (!field.empty()) m += ": " + field;
    return m + ": " + reason;
  }
  std::string source_, field_, reason_;
};

}  // namespace flashcheck
