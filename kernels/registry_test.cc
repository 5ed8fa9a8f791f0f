#include <gtest/gtest.h>

#include "kernels/kernel.h"
#include "kernels/torch/cuda_kernels.h"

namespace flashcheck {
namespace {

TEST(Registry, EveryRegisteredKernelIsAKnownName) {
  for (const std::string& n : builtin_registry().names(true)) EXPECT_TRUE(is_known_kernel_name(n)) << n;
  EXPECT_FALSE(is_known_kernel_name("flash-fwd-varlenn"));
  EXPECT_FALSE(is_known_kernel_name(""));
  // Answered by a resolver, not resolved: the registry does not grow.
  Registry r;
  int made = 0;
  r.add_resolver("py:", [&made](std::string_view) -> std::unique_ptr<Kernel> { ++made; return nullptr; });
  EXPECT_TRUE(r.resolvable("py:pkg.mod:fn"));
  EXPECT_FALSE(r.resolvable("py:"));
  EXPECT_FALSE(r.resolvable("tiled-cpu"));
  EXPECT_EQ(made, 0);
}

#if defined(FLASHCHECK_HAVE_CUDA)
// The CPU build knows the CUDA kernels by this list only: it must name exactly what the CUDA build registers.
TEST(Registry, TheListOfCudaKernelNamesIsWhatTheCudaBuildRegisters) {
  Registry r;
  register_cuda_kernels(r);
  EXPECT_EQ(r.names(true), cuda_kernel_names());
}
#endif

}  // namespace
}  // namespace flashcheck
