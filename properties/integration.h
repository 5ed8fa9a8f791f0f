// The integration property: on every comparable query row, the output of
// transformers' flash path (a profile, running on a kernel) is as close to the exact masked attention as
// transformers' eager attention is:
//
//   max|flash - exact| <= k * max|eager - exact| + floor
//
// with k = tolerance::kIntegration and the conformance rule's max floor (core/tolerance.h), where `exact`
// is the fp64 attention under eager's own mask. Eager plays the role of the low-precision
// baseline in the conformance rule; docs/TOLERANCE.md gives the calibration. Rows the path never writes,
// rows it zero-fills and NaN fail outright; padded query rows and rows without keys are not compared.
//
// The same rule judges transformers' SDPA path (oracles/hf_sdpa_path.h: torch's scaled_dot_product_attention
// under the mask, or the is_causal shortcut, that the profile's release passes): check_sdpa_integration.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/model_case.h"
#include "core/model_tensors.h"
#include "core/tolerance.h"
#include "core/verdict.h"
#include "kernels/kernel.h"
#include "oracles/hf_divergences.h"
#include "oracles/hf_flash_path.h"

namespace flashcheck {

inline constexpr double kIntegrationK = tolerance::kIntegration;
// How an integration verdict's reason begins when the modelled transformers raises (the release's own message follows).
inline constexpr std::string_view kTransformersRaises = "transformers raises: ";

struct IntegrationResult {
  Verdict verdict;                      // property "integration", kernel "<profile>@<kernel>"
  hf::FlashBranch branch = hf::FlashBranch::kDense;
  std::optional<hf::Divergence> known;  // hf-main only: the failure is this documented divergence
  double eager_flash_max = 0;           // max |flash - eager| on compared elements, for calibration
  std::int64_t rows_compared = 0, rows_unwritten = 0, rows_zeroed = 0, rows_skipped = 0;
  // Of the rows_skipped rows (no key, or a padding query), the finite ones: holding 0, eager's value, or another
  // value. A non-finite one fails (judge_uncomparable_rows in integration.cc).
  std::int64_t uncomparable_zero = 0, uncomparable_eager = 0, uncomparable_other = 0;
};

// With a defect (the mutation self-test), a failure counts as a known divergence only where the intact
// profile fails the same way: the defect must change the outcome to be seen.
IntegrationResult check_integration(hf::Profile profile, Kernel& k, const ModelCase& m, const ModelTensors& t,
                                    hf::PathDefect defect = hf::PathDefect::kNone);
IntegrationResult check_integration(hf::Profile profile, Kernel& k, const ModelCase& m,
                                    hf::PathDefect defect = hf::PathDefect::kNone);

// The SDPA path of the profile's releases. It calls torch's SDPA, not `k`: the kernel only says where (on the
// GPU when k runs there). Verdict property "integration-sdpa", kernel "<profile>@sdpa-cpu" (or sdpa-cuda).
IntegrationResult check_sdpa_integration(hf::Profile profile, Kernel& k, const ModelCase& m, const ModelTensors& t,
                                         hf::PathDefect defect = hf::PathDefect::kNone);
IntegrationResult check_sdpa_integration(hf::Profile profile, Kernel& k, const ModelCase& m,
                                         hf::PathDefect defect = hf::PathDefect::kNone);

// The backward (training): the path's gradients of <dO, out> w.r.t. the layer's q, k and v against the exact fp64
// gradients under eager's mask, as close as eager's own autograd gets, per gradient:
//
//   max|path grad - exact grad| <= k * max|eager grad - exact grad| + floor
//
// with the gradient rule's floor (core/compare.h compare_gradient, no mean check, as the forward). dO is drawn by
// the case's seed and is zero on rows that are not comparable (padding queries and rows without keys: training
// leaves them out of the loss). The forward is judged first; a path whose forward fails (or raises, or is a known
// divergence) gets that verdict. Training calls only: no past, no cache. Property "<path's>-backward".
IntegrationResult check_integration_backward(hf::Profile profile, Kernel& k, const ModelCase& m, hf::HfPath path,
                                             hf::PathDefect defect = hf::PathDefect::kNone);

// Whether a model case is a training call: no tokens in a cache, no cache object, not from generate().
bool training_call(const ModelCase& m);

}  // namespace flashcheck
