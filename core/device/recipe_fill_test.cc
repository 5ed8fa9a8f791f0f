// GPU test (label gpu): data generated on the device is bit-identical to the host's materialization.
#include <cstring>
#include <gtest/gtest.h>

#include "core/case_tensors.h"
#include "core/device/recipe_fill.h"

namespace flashcheck {
namespace {

TEST(DeviceRecipeGpu, SameBitsAsTheHostForEveryRecipeAndDtype) {
  for (Distribution dist : {Distribution::kNormal, Distribution::kUniform, Distribution::kIntegers, Distribution::kLarge})
    for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
      KernelCase c;
      c.heads = 3;
      c.kv_heads = 3;
      c.head_dim = 40;
      c.v_head_dim = 40;
      c.dtype = dt;
      c.seqs = {{.q_len = 5, .k_len = 7}, {.q_len = 33, .k_len = 2}};
      c.data.dist = dist;
      c.data.q_scale = 1.7;
      c.data.seed = 0xC0FFEE1234ull;
      const CaseTensors host = materialize(c);
      // Sequence 1's queries: packed rows 5..37.
      const std::vector<float> dev =
          device::recipe_rows_via_device(c.data, TensorId::kQ, c.data.q_scale, dt, 1, 0, 33, 3, 40, false);
      ASSERT_EQ(std::memcmp(dev.data(), host.q.data.data() + 5 * 3 * 40, dev.size() * sizeof(float)), 0)
          << to_string(dist) << " " << to_string(dt);
    }
}

}  // namespace
}  // namespace flashcheck
