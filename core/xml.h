// Text for XML attributes and elements (the JUnit reports, report/junit.h). Kernel messages reach these reports
// verbatim, so what XML 1.0 cannot carry at all, even escaped (control characters other than tab, newline and carriage
// return; bytes that are not well-formed UTF-8; surrogates; U+FFFE and U+FFFF), becomes '?'; the XML library escapes
// markup.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashcheck {

namespace detail {

// The length of the well-formed UTF-8 sequence at s[i] encoding a character XML 1.0 allows, or 0.
inline std::size_t xml_char_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char u = byte(i);
  if (u < 0x80) return (u >= 0x20 || u == '\t' || u == '\n' || u == '\r') ? 1 : 0;
  const std::size_t n = u >= 0xC2 && u <= 0xDF ? 2 : u >= 0xE0 && u <= 0xEF ? 3 : u >= 0xF0 && u <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  std::uint32_t cp = u & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  const std::uint32_t least = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
  if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}

}  // namespace detail

// What XML 1.0 cannot carry replaced by '?', nothing escaped: for an XML library, which escapes markup itself.
inline std::string xml_text(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = detail::xml_char_length(s, i);
    o.append(n == 0 ? std::string_view("?") : s.substr(i, n));
    i += n == 0 ? 1 : n;
  }
  return o;
}

}  // namespace flashcheck
