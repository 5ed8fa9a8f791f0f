#include "search/samples.h"

#include <algorithm>

#include <rapidcheck.h>

#include "search/generators.h"
#include "search/model_generators.h"

namespace flashcheck {
namespace {

// Each case from its own split of one stream at size 100, the top of a search's size sweep.
template <typename T>
std::vector<T> draw(const rc::Gen<T>& gen, std::int64_t n, std::uint64_t seed) {
  std::vector<T> out;
  rc::Random random(seed);
  for (std::int64_t i = 0; i < n; ++i) out.push_back(gen(random.split(), 100).value());
  return out;
}

}  // namespace

std::vector<KernelCase> sample_standard_mix(std::int64_t n, std::uint64_t seed) { return draw(standard_mix_gen(), n, seed); }

std::vector<KernelCase> realistic_mix(std::uint64_t seed) {
  std::vector<KernelCase> out;
  for (std::int64_t len : {2048, 8192, 32768})
    for (bool windowed : {false, true}) {
      KernelCase c;
      c.dtype = DType::kBF16;
      // 16384 query tokens at 32 heads is what the case memory limit allows (core/input_limits.h, about 3.2
      // of its 4 GiB): L 32768 keeps GQA 4:1 at half the heads.
      const bool longest = len > 16384;
      c.heads = longest ? 16 : 32;
      c.kv_heads = longest ? 4 : 8;
      c.head_dim = c.v_head_dim = 128;
      c.causal = true;
      if (windowed) c.window = {1024, 0};
      for (std::int64_t b = 0; b < std::max<std::int64_t>(1, 16384 / len); ++b) c.seqs.push_back({.q_len = len, .k_len = len});
      c.data.seed = seed + out.size();
      out.push_back(c);
    }
  return out;
}

std::vector<KernelCase> sample_kernel_cases(const Contract& k, const CaseRequirements& req, std::int64_t n,
                                            std::uint64_t seed) {
  return draw(kernel_case_gen(k, req), n, seed);
}

std::vector<ModelCase> sample_model_cases(std::int64_t n, std::uint64_t seed) { return draw(model_case_gen(), n, seed); }

}  // namespace flashcheck
