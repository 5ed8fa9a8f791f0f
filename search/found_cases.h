// Where a run's cases go on disk: the in-flight descriptor written before each case (a worker that dies
// leaves it behind, and the parent saves it as the crash's fixture) and the fixtures of findings, which
// `flashcheck replay` reproduces. Both levels, one format each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/kernel.h"
#include "properties/property.h"
#include "search/fuzz_report.h"

namespace flashcheck {

// OUT/inflight-<kernel>-<property label>.json, characters other than letters, digits, '.', '-', '_' as '-'
std::string inflight_path(const std::string& dir, const Kernel& k, const Property& p);
void write_inflight(const std::string& path, const AnyCase& c);
// The case of a descriptor, or nothing when it is missing or unreadable (a worker killed mid-write).
std::optional<AnyCase> read_inflight(const std::string& path);
// A descriptor at `path` when a run starts was left by a run that was killed in that case: it is moved to
// "<path>.kept-<n>" (never overwritten) and a line on stderr says so. Returns the new name, or "".
std::string keep_earlier_inflight(const std::string& path);

// The case a finding is about.
AnyCase finding_case(const Finding& f);
void set_finding_case(Finding& f, const AnyCase& c);

// Saves a finding as a fixture under `dir` (named by its content hash) and returns its path; "" when dir
// is "". Kernel-level fixtures expect the verdict of the kernel, model-level ones of the profile.
std::string save_finding(const std::string& dir, const Kernel& k, const Property& p, std::uint64_t seed,
                         const Finding& f);

}  // namespace flashcheck
