// Plugins that are wrong on purpose, for the loader's and the workers' tests (cli/CMakeLists.txt): built
// once per defect. Each must be refused with a message naming it, or, for the crash, become a `crash`
// verdict while the harness carries on; CTOR_EXIT, CTOR_CRASH and ENTRY_CRASH (and a truncated copy of a plugin, made
// by cli/CMakeLists.txt) must be refused while loading, without harm to the harness; FORK_AND_PRINT's stdout and the
// process it leaves must not reach the harness's stdout or outlive its worker. TEST_PLUGIN_ABI1 is not a defect: a plugin written against version 1
// of the ABI (no backward entry in its kernel table), which must still load, forward-only. OUT_OF_BOUNDS writes one
// element past its output: the canaries around the buffers a plugin is given must catch it.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "flashcheck/plugin.h"

namespace {

#if defined(TEST_PLUGIN_BAD_CONTRACT)
const char* kContract = R"({"dtypes": ["bf16"], "features": {"causal": "native"}})";
#else
const char* kContract = R"({"dtypes": ["fp32"], "features": {"varlen": "native"}})";
#endif

int run(const FlashcheckKernel*, const FlashcheckRunArgs* a, char* error, size_t error_size) {
#if defined(TEST_PLUGIN_FORK_AND_PRINT)
  // A kernel that talks on stdout and leaves a process behind (a helper it forked and forgot).
  std::printf("printed by the kernel\n");
  std::fflush(stdout);
  if (::fork() == 0) {
    ::sleep(120);
    ::_exit(0);
  }
#endif
#if defined(TEST_PLUGIN_CRASH)
  if (a->max_seqlen_k > 7) std::raise(SIGSEGV);  // an out-of-bounds read on longer sequences
#endif
#if defined(TEST_PLUGIN_OUT_OF_BOUNDS)
  // Zeros, and one element past the end of the output: the classic off-by-one row.
  float* out = static_cast<float*>(a->out->data);
  std::int64_t n = 1;
  for (int i = 0; i < a->out->ndim; ++i) n *= a->out->shape[i];
  for (std::int64_t i = 0; i <= n; ++i) out[i] = 0.0f;
  return FLASHCHECK_OK;
#endif
  std::snprintf(error, error_size, "test plugin: not a real kernel");
  return FLASHCHECK_ERROR;
}

#if defined(TEST_PLUGIN_ABI1)
// Version 1's table: two four-field entries, read with version 1's stride.
const FlashcheckKernelV1 kKernelsV1[] = {{"test-plugin-kernel", kContract, run, nullptr},
                                         {"test-plugin-kernel-2", kContract, run, nullptr}};
const FlashcheckPlugin kPlugin = {1, "test-plugin-v1", 2, reinterpret_cast<const FlashcheckKernel*>(kKernelsV1), nullptr,
                                  nullptr};
#else
const FlashcheckKernel kKernels[] = {{"test-plugin-kernel", kContract, run, nullptr, nullptr}};
#if defined(TEST_PLUGIN_ABI_MISMATCH)
constexpr unsigned kAbi = FLASHCHECK_PLUGIN_ABI_VERSION + 1;
#else
constexpr unsigned kAbi = FLASHCHECK_PLUGIN_ABI_VERSION;
#endif
const FlashcheckPlugin kPlugin = {kAbi, "test-plugin", 1, kKernels, nullptr, nullptr};
#endif

// Hostile libraries: each does its damage while it is being loaded, which the harness does in a worker.
#if defined(TEST_PLUGIN_CTOR_EXIT)
__attribute__((constructor)) void end_the_process() { std::exit(0); }
#endif
#if defined(TEST_PLUGIN_CTOR_CRASH)
__attribute__((constructor)) void fault_in_constructor() { std::raise(SIGSEGV); }
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) const FlashcheckPlugin* flashcheck_plugin(void) {
#if defined(TEST_PLUGIN_ENTRY_CRASH)
  std::raise(SIGSEGV);
#endif
  return &kPlugin;
}
