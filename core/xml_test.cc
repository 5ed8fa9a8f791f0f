#include "core/xml.h"

#include <gtest/gtest.h>

namespace flashcheck {
namespace {

// Every byte an XML 1.0 parser would reject: C0 controls other than tab/newline/return.
bool well_formed_chars(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = detail::xml_char_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

TEST(XmlEscape, MarkupBecomesEntities) {
  EXPECT_EQ(xml_escape(R"(a<b>&"c'd)"), "a&lt;b&gt;&amp;&quot;c&apos;d");
}

TEST(XmlEscape, ControlCharactersFromAKernelMessageAreReplaced) {
  // A Python kernel's ValueError("\x1b[31m...\x01"): once copied into junit.xml verbatim, which no parser accepted.
  const std::string got = xml_escape("\x1b[31mred\x01 end\x7f");
  EXPECT_EQ(got, "?[31mred? end\x7f");
  EXPECT_TRUE(well_formed_chars(got));
  EXPECT_EQ(xml_escape("tab\tnewline\nreturn\r"), "tab\tnewline\nreturn\r");
  EXPECT_EQ(xml_escape(std::string("nul\0here", 8)), "nul?here");
}

TEST(XmlEscape, InvalidUtf8IsReplacedValidUtf8Kept) {
  EXPECT_EQ(xml_escape("\xff\xfe"), "??");
  EXPECT_EQ(xml_escape("\xc0\xaf"), "??");            // overlong '/'
  EXPECT_EQ(xml_escape("\xed\xa0\x80"), "???");       // a surrogate
  EXPECT_EQ(xml_escape("\xef\xbf\xbf"), "???");       // U+FFFF
  EXPECT_EQ(xml_escape("\xf4\x90\x80\x80"), "????");  // past U+10FFFF
  EXPECT_EQ(xml_escape("cut \xe2\x82"), "cut ??");    // a sequence cut short
  EXPECT_EQ(xml_escape("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace flashcheck
