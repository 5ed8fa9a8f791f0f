// Which features a generated case exercises, counted over a run: a fuzz run (or a gate run) whose cases
// never touched a feature the kernel supports has not tested it, and fails saying which.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/kernel_case.h"
#include "kernels/contract.h"
#include "properties/generators.h"

namespace flashcheck {

// Feature names of one case ("gqa", "q>k", "empty-rows", "tile64-1", ...).
std::vector<std::string> classify(const KernelCase& c);

// The features a run on this kernel under these requirements must reach.
std::vector<std::string> required_coverage(const Contract& k, const CaseRequirements& req);

struct Coverage {
  std::map<std::string, std::int64_t> counts;
  void add(const KernelCase& c);
  // Required features with no case, in order.
  std::vector<std::string> missing(const std::vector<std::string>& required) const;
};

}  // namespace flashcheck
