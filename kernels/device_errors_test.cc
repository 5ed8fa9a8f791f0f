#include "kernels/device_errors.h"

#include <gtest/gtest.h>
#include <stdexcept>

namespace flashcheck {
namespace {

TEST(KernelErrorReason, DropsTheBacktraceThatC10Appends) {
  // The form of c10::Error::what(): the message, then where it was raised and the frames.
  const std::runtime_error c10_style(
      "shape '[1, 1, 2, 8]' is invalid for input of size 32\n"
      "Exception raised from infer_size_impl at /pytorch/aten/src/ATen/InferSize.h:99 (most recent call first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9d\n");
  EXPECT_EQ(kernel_error_reason(c10_style), "shape '[1, 1, 2, 8]' is invalid for input of size 32");
  EXPECT_EQ(kernel_error_reason(std::runtime_error("plain message")), "plain message");
  EXPECT_EQ(kernel_error_reason(std::runtime_error("two\nlines kept\n")), "two\nlines kept");
}

}  // namespace
}  // namespace flashcheck
