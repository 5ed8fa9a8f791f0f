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

TEST(XmlText, MarkupIsLeftToTheXmlLibrary) { EXPECT_EQ(xml_text(R"(a<b>&"c'd)"), R"(a<b>&"c'd)"); }

TEST(XmlText, ControlCharactersFromAKernelMessageAreReplaced) {
  // A Python kernel's ValueError("\x1b[31m...\x01"): once copied into junit.xml verbatim, which no parser accepted.
  const std::string got = xml_text("\x1b[31mred\x01 end\x7f");
  EXPECT_EQ(got, "?[31mred? end\x7f");
  EXPECT_TRUE(well_formed_chars(got));
  EXPECT_EQ(xml_text("tab\tnewline\nreturn\r"), "tab\tnewline\nreturn\r");
  EXPECT_EQ(xml_text(std::string("nul\0here", 8)), "nul?here");
}

TEST(XmlText, InvalidUtf8IsReplacedValidUtf8Kept) {
  EXPECT_EQ(xml_text("\xff\xfe"), "??");
  EXPECT_EQ(xml_text("\xc0\xaf"), "??");            // overlong '/'
  EXPECT_EQ(xml_text("\xed\xa0\x80"), "???");       // a surrogate
  EXPECT_EQ(xml_text("\xef\xbf\xbf"), "???");       // U+FFFF
  EXPECT_EQ(xml_text("\xf4\x90\x80\x80"), "????");  // past U+10FFFF
  EXPECT_EQ(xml_text("cut \xe2\x82"), "cut ??");    // a sequence cut short
  EXPECT_EQ(xml_text("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace flashcheck
