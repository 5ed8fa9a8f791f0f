// Text inside XML attributes and elements (the JUnit reports of the gate and of campaign merges).
#pragma once

#include <string>
#include <string_view>

namespace flashcheck {

inline std::string xml_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

}  // namespace flashcheck
