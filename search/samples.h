// Cases drawn from the generators without a search: the fixed sets that `flashcheck bench` times and
// `flashcheck export` writes. The same seed gives the same cases. Callers need no RapidCheck.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kernel_case.h"
#include "core/model_case.h"
#include "kernels/contract.h"
#include "properties/requirements.h"

namespace flashcheck {

// The standard varlen mix (search/generators.h standard_mix_gen).
std::vector<KernelCase> sample_standard_mix(std::int64_t n, std::uint64_t seed);
// The realistic mix of issue 12: bf16, d 128, causal, GQA 4:1: L 2048 B 8 and L 8192 B 2 at H 32, Hk 8, and
// L 32768 B 1 at H 16, Hk 4 (the case memory limit), each also with a sliding window of 1024 keys.
// tools/bench/python_recipe.py times the same shapes.
std::vector<KernelCase> realistic_mix(std::uint64_t seed);
// The kernel's own generator at the default limits.
std::vector<KernelCase> sample_kernel_cases(const Contract& k, const CaseRequirements& req, std::int64_t n,
                                            std::uint64_t seed);
std::vector<ModelCase> sample_model_cases(std::int64_t n, std::uint64_t seed);

}  // namespace flashcheck
