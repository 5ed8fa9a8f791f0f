// Test-only: varied varlen cases of realistic small shapes for the device tests (GQA groups 1-3, head dims 64 and 128,
// bf16 and fp16, causal or not, 1-4 sequences of different lengths), each with its own seed; and the verdicts of cases
// judged in flight, by threads on their own streams.
#pragma once

#include <cstdint>
#include <gtest/gtest.h>
#include <thread>
#include <vector>

#include "core/kernel_case.h"
#include "core/verdict.h"
#include "kernels/devices.h"

namespace flashcheck {

inline std::vector<KernelCase> varied_device_cases(int count, std::int64_t max_len) {
  std::vector<KernelCase> cases;
  for (int i = 0; i < count; ++i) {
    KernelCase c;
    c.kv_heads = 1 + i % 4;
    c.heads = c.kv_heads * (1 + i % 3);
    c.head_dim = c.v_head_dim = i % 2 ? 128 : 64;
    c.dtype = i % 5 ? DType::kBF16 : DType::kF16;
    c.causal = i % 3 != 0;
    for (int b = 0; b <= i % 4; ++b) {
      const std::int64_t q = 1 + (37 * i + 101 * b) % max_len;
      c.seqs.push_back({.q_len = q, .k_len = q + (13 * i + b) % 200});
    }
    c.data.seed = 1000 + static_cast<std::uint64_t>(i);
    cases.push_back(c);
  }
  return cases;
}

// Each case judged by `check` on four threads, each on its own stream (kernels/devices.h use_thread_stream), in three
// rounds so that every thread meets every other's cases mid-flight; the verdict kept is the last round's.
template <class Check>
std::vector<Verdict> judged_in_flight(const std::vector<KernelCase>& cases, Check check) {
  std::vector<Verdict> verdicts(cases.size());
  constexpr std::size_t kThreads = 4;
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      ASSERT_TRUE(use_thread_stream());
      for (int round = 0; round < 3; ++round)
        for (std::size_t i = (t + round) % kThreads; i < cases.size(); i += kThreads) verdicts[i] = check(cases[i]);
    });
  for (std::thread& th : pool) th.join();
  return verdicts;
}

}  // namespace flashcheck
