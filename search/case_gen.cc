#include "search/case_gen.h"

#include "search/generators.h"
#include "search/model_generators.h"

#include <fmt/format.h>

namespace flashcheck {

Contract run_contract(const Kernel& k, const GenLimits& lim) { return narrowed(k.contract(), lim.dtypes, lim.head_dims); }

std::string narrowing_unmet(const Kernel& k, const GenLimits& lim) {
  const Contract n = run_contract(k, lim);
  if (n.dtypes.empty()) {
    std::vector<std::string> names;
    for (DType t : lim.dtypes) names.emplace_back(to_string(t));
    return fmt::format("--dtype {}: not among the kernel's dtypes", fmt::join(names, ","));
  }
  if (!lim.head_dims.empty() && n.head_dims.empty())
    return fmt::format("--head-dim {}: none is a head dim the kernel takes (at most {}, a multiple of {}{})",
                       fmt::join(lim.head_dims, ","), k.contract().max_head_dim, k.contract().head_dim_multiple,
                       k.contract().head_dims.empty() ? "" : ", listed in its head_dims");
  return "";
}

rc::Gen<AnyCase> case_gen(const Property& p, const Kernel& k, const GenLimits& lim, const ModelGenLimits& model_lim) {
  // gen::map keeps the source generator's randomness and shrinks: a seed gives the same cases either way.
  if (p.level() == CaseLevel::kModel) {
    ModelGenLimits lim_for_p = model_lim;
    lim_for_p.training = p.requirements().training;
    return rc::gen::map(model_case_gen(lim_for_p), [](ModelCase m) { return AnyCase{std::move(m)}; });
  }
  return rc::gen::map(kernel_case_gen(generation_contract(run_contract(k, lim), p.requirements()), p.requirements(), lim),
                      [](KernelCase c) { return AnyCase{std::move(c)}; });
}

}  // namespace flashcheck
