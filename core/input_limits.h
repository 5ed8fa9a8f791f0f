// The documented limits on everything the harness reads (fixtures/README.md, "Limits"; docs/HARDENING.md).
// A fixture, a safetensors file or a case past one of them is refused with an InputError naming the file,
// the field and the limit, before anything is allocated for it.
#pragma once

#include <cstdint>

namespace flashcheck::limits {

// Files.
inline constexpr std::int64_t kMaxFixtureBytes = std::int64_t{16} << 20;  // a fixture descriptor (JSON)
inline constexpr std::int64_t kMaxSafetensorsHeaderBytes = 100'000'000;   // safetensors' own limit on the header
// JSON documents (fixtures, in-flight descriptors, safetensors headers).
inline constexpr int kMaxJsonDepth = 64;                           // objects and arrays nested in each other
inline constexpr std::int64_t kMaxJsonString = std::int64_t{1} << 20;  // bytes of one string or key

// Kernel cases (core/kernel_case.h).
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 20;  // sequences per case
inline constexpr std::int64_t kMaxHeads = 65535;                  // core/rng.h packs head and channel in 16 bits
inline constexpr std::int64_t kMaxHeadDim = 65535;
inline constexpr std::int64_t kMaxLength = 0xFFFFFFFFll;   // q_len, k_len, leftpad_k, cache_len, new_len: a uint32 position
inline constexpr std::int64_t kMaxWindow = std::int64_t{1} << 40;  // wider than any sequence: as good as unbounded
inline constexpr std::int64_t kMaxPageSize = std::int64_t{1} << 32;
inline constexpr std::int64_t kMaxExtraPages = std::int64_t{1} << 32;

// Memory of one case: every tensor the harness holds for it on the host (inputs, the kernel's output
// buffer, the references' outputs and noise estimates, page pools, caches) and on the device. core/
// kernel_case.cc and core/model_case.cc estimate it from the case's shape alone; a larger case is refused.
inline constexpr std::int64_t kMaxCaseBytes = std::int64_t{4} << 30;

// Work of one case (case_work: the fp64 reference's multiply-adds). Replay names a case past kWarnCaseWork before
// it starts, and refuses one past its --max-work (default kDefaultMaxCaseWork), with the time it would take at
// kReferenceWorkPerSecond (a whole host case, kernel, baseline and fp64 reference, on one core: measured in
// docs/HARDENING.md): about twenty seconds and about half an hour.
inline constexpr double kReferenceWorkPerSecond = 5e8;
inline constexpr double kWarnCaseWork = 1e10;
inline constexpr double kDefaultMaxCaseWork = 1e12;

}  // namespace flashcheck::limits
