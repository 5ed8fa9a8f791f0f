// Plugins that are wrong on purpose, for the loader's and the workers' tests (cli/CMakeLists.txt): built
// once per defect. Each must be refused with a message naming it, or, for the crash, become a `crash`
// verdict while the harness carries on.
#include <csignal>
#include <cstdio>

#include "flashcheck/plugin.h"

namespace {

#if defined(TEST_PLUGIN_BAD_CONTRACT)
const char* kContract = R"({"dtypes": ["bf16"], "features": {"causal": "native"}})";
#else
const char* kContract = R"({"dtypes": ["fp32"], "features": {"varlen": "native"}})";
#endif

int run(const FlashcheckKernel*, const FlashcheckRunArgs* a, char* error, size_t error_size) {
#if defined(TEST_PLUGIN_CRASH)
  if (a->max_seqlen_k > 7) std::raise(SIGSEGV);  // an out-of-bounds read on longer sequences
#endif
  std::snprintf(error, error_size, "test plugin: not a real kernel");
  return FLASHCHECK_ERROR;
}

const FlashcheckKernel kKernels[] = {{"test-plugin-kernel", kContract, run, nullptr}};
#if defined(TEST_PLUGIN_ABI_MISMATCH)
constexpr unsigned kAbi = FLASHCHECK_PLUGIN_ABI_VERSION + 1;
#else
constexpr unsigned kAbi = FLASHCHECK_PLUGIN_ABI_VERSION;
#endif
const FlashcheckPlugin kPlugin = {kAbi, "test-plugin", 1, kKernels, nullptr, nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) const FlashcheckPlugin* flashcheck_plugin(void) { return &kPlugin; }
