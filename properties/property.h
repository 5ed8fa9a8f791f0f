// Properties: what the harness checks about a kernel on one case. Conformance compares with the fp64
// reference; the metamorphic properties compare the kernel with itself on a transformed case (GQA vs
// repeated KV heads, varlen vs padded, paged vs contiguous, permuted batch, added padding, chunked
// prefill); determinism reruns it; robustness inspects the output buffer's poison and canaries.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/kernel_case.h"
#include "core/verdict.h"
#include "kernels/kernel.h"
#include "properties/generators.h"

namespace flashcheck {

class Property {
 public:
  virtual ~Property() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // What the generated cases must have for this property to say something.
  virtual CaseRequirements requirements() const { return {}; }
  // Why the property can never run on this kernel (its contract lacks what the property needs), or "".
  virtual std::string unsupported_reason(const Kernel& k) const;
  // Judges one case, with tensors generated from its recipe. Kernel faults become fail/error verdicts;
  // a case the kernel's contract excludes is `unsupported`.
  virtual Verdict check(Kernel& k, const KernelCase& c) const = 0;
};

// Every property, conformance first.
const std::vector<const Property*>& all_properties();
const Property* find_property(std::string_view name);

}  // namespace flashcheck
