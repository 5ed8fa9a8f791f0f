#include "core/comma_list.h"

#include <gtest/gtest.h>

namespace flashcheck {
namespace {

TEST(CommaList, ItemsInOrderWithEmptyOnesKept) {
  EXPECT_EQ(comma_list("gqa=3,leftpad,causal"), (std::vector<std::string>{"gqa=3", "leftpad", "causal"}));
  EXPECT_EQ(comma_list("1x7"), (std::vector<std::string>{"1x7"}));
  EXPECT_EQ(comma_list(""), (std::vector<std::string>{""}));
  EXPECT_EQ(comma_list("a,,b,"), (std::vector<std::string>{"a", "", "b", ""}));
}

}  // namespace
}  // namespace flashcheck
