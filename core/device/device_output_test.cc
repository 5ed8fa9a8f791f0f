// GPU test (label gpu): a device output buffer's canaries count the margin elements a kernel overwrote, one buffer at
// a time and several together, and its poison counts the elements nobody wrote.
#include "core/device/device_output.h"

#include <gtest/gtest.h>

#include "core/device/device_memory.h"

namespace flashcheck {
namespace {

class DeviceOutputGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!device::available()) GTEST_SKIP() << "no CUDA device";
  }
};

void write(float* at, float value) {
  device::copy_to_device(at, &value, sizeof value);
  device::synchronize();
}

TEST_F(DeviceOutputGpu, CanariesCountOverwrittenMarginsAloneAndTogether) {
  device::DeviceOutput a(100, 10, 8, "test.a"), b(50, 0, 4, "test.b"), c(7, 3, 2, "test.c");
  EXPECT_EQ(device::canary_damage({&a, &b, &c}), 0);
  EXPECT_EQ(a.unwritten(), 100);
  write(a.out() - 1, 0.0f);            // just before the output
  write(a.lse() + a.lse_elems(), 1.0f);  // just after the LSE
  write(b.out() + b.out_elems() + 3, 2.0f);  // the last margin element
  write(c.out() - 2, 3.0f);            // the first margin element
  write(c.out() + 3, 4.0f);            // inside the output: no damage
  EXPECT_EQ(a.canary_damage(), 2);
  EXPECT_EQ(b.canary_damage(), 1);
  EXPECT_EQ(c.canary_damage(), 1);
  EXPECT_EQ(c.unwritten(), 6);
  EXPECT_EQ(device::canary_damage({&a, &b, &c}), 4);
  EXPECT_EQ(device::canary_damage({&b}), 1);
  EXPECT_EQ(device::canary_damage({}), 0);
  a.poison();
  EXPECT_EQ(device::canary_damage({&a, &b}), 1);
}

}  // namespace
}  // namespace flashcheck
