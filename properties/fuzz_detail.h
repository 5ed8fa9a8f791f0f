// Pieces of the fuzz runner that the kernel-level (properties/fuzz.cc) and the model-level
// (properties/model_fuzz.cc) runners share.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <rapidcheck.h>
#include <string>

#include "properties/fuzz.h"

namespace flashcheck::detail {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t);

// The seed of chunk `chunk` of a run (splitmix64 of the run's seed).
std::uint64_t chunk_seed(std::uint64_t seed, int chunk);

// Keeps one finding per signature, the smallest; saves it with `save` and deletes the fixture it replaces.
void add_finding(FuzzReport& r, Finding f, const std::function<std::string(const Finding&)>& save);

// RapidCheck prints nothing: the runners report.
class QuietListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

}  // namespace flashcheck::detail
