// The keys and values of one sequence in logical order (key j = logical position p0 + j), gathered from
// whatever storage the case uses. Internal to reference/host: kernels do their own addressing, so a
// mistake here cannot hide the same mistake in a kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "core/case_tensors.h"
#include "core/geometry.h"

namespace flashcheck::reference::detail {

struct LogicalKv {
  std::int64_t lk = 0;
  std::vector<float> k;  // (lk, Hk, d)
  std::vector<float> v;  // (lk, Hk, dv)
};

LogicalKv gather_sequence(const KernelCase& c, const CaseGeometry& g, const CaseTensors& t, std::size_t b);

}  // namespace flashcheck::reference::detail
