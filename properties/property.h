// Properties: what the harness checks about a kernel on one case. Kernel-level properties judge one
// kernel call (KernelCase): conformance compares with the fp64 reference; the metamorphic properties
// compare the kernel with itself on a transformed case (GQA vs repeated KV heads, varlen vs padded, paged
// vs contiguous, permuted batch, added padding, chunked prefill); determinism reruns it; robustness
// inspects the output buffer's poison and canaries. The model-level property `integration`
// (properties/integration_property.h) judges one attention layer of a transformers model (ModelCase).
// The search driver (search/fuzz.h) runs either kind the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/kernel_case.h"
#include "core/model_case.h"
#include "core/verdict.h"
#include "kernels/kernel.h"
#include "properties/requirements.h"

namespace flashcheck {

// A case of either level.
using AnyCase = std::variant<KernelCase, ModelCase>;
enum class CaseLevel : std::uint8_t { kKernel, kModel };

// A property's answer on one case. A failure that is a documented divergence (the integration property,
// on profiles that list them) names it: such failures are counted, not reported as findings.
struct Judgement {
  Verdict verdict;
  std::string known_divergence;
};

class Property {
 public:
  virtual ~Property() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual CaseLevel level() const { return CaseLevel::kKernel; }
  // The run's name in reports and reproduce strings: the name, or "integration/<profile>".
  virtual std::string label() const { return std::string(name()); }
  // Model level: the HF profile whose dispatch is replayed; fixtures key their expectations by it.
  virtual std::string_view profile() const { return {}; }
  // Model level: whether a long run must reach every model feature (profiles that are exact for them).
  virtual bool demands_model_coverage() const { return false; }
  // Whether it runs on the GPU whatever the kernel (the device references' checks): its worker then gets no address
  // space limit, which a CUDA context would not fit (search/worker.h).
  virtual bool uses_device() const { return false; }
  // What the generated cases must have for this property to say something.
  virtual CaseRequirements requirements() const { return {}; }
  // Why the property can never run on this kernel (its contract lacks what the property needs), or "".
  virtual std::string unsupported_reason(const Kernel& k) const;
  // Judges one case of the property's level. Kernel faults become fail/error verdicts; a case the
  // kernel's contract excludes is `unsupported`. The default passes kernel cases to check().
  virtual Judgement judge(Kernel& k, const AnyCase& c) const;
  // Kernel level: judges one case, with tensors generated from its recipe.
  virtual Verdict check(Kernel& k, const KernelCase& c) const;
};

// The kernel-level properties, conformance first, then the gradient properties (what `--property all` and the
// gate's kernel runs mean).
const std::vector<const Property*>& all_properties();
// The gradient properties alone (properties/gradient_properties.cc): judged on backward cases.
const std::vector<const Property*>& gradient_properties();
// Whether the property judges the backward (its cases are backward cases).
bool is_gradient_property(const Property& p);
// Any property by name; "integration" (and "integration-sdpa") is the integration property on hf-main.
const Property* find_property(std::string_view name);
// Whether judging `p` on `k` stays off the GPU: the kernel runs on the host and the property uses no device of its
// own. Only such workers get a memory limit (search/worker.h: a CUDA context needs more address space than any).
bool stays_on_the_host(const Kernel& k, const Property& p);

}  // namespace flashcheck
