#include "search/case_gen.h"

#include "search/generators.h"
#include "search/model_generators.h"

namespace flashcheck {

rc::Gen<AnyCase> case_gen(const Property& p, const Kernel& k, const GenLimits& lim, const ModelGenLimits& model_lim) {
  // gen::map keeps the source generator's randomness and shrinks: a seed gives the same cases either way.
  if (p.level() == CaseLevel::kModel)
    return rc::gen::map(model_case_gen(model_lim), [](ModelCase m) { return AnyCase{std::move(m)}; });
  return rc::gen::map(kernel_case_gen(k.contract(), p.requirements(), lim),
                      [](KernelCase c) { return AnyCase{std::move(c)}; });
}

}  // namespace flashcheck
