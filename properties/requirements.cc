#include "properties/requirements.h"

#include <algorithm>

namespace flashcheck {
namespace {

bool supported(Support s) { return s != Support::kNo; }

}  // namespace

Contract backward_view(const Contract& k) {
  Contract b = k;
  b.paged = Support::kNo;
  b.kv_cache = Support::kNo;
  for (const std::string& f : k.backward.without) {
    const std::vector<std::string>& names = contract_feature_names();
    Support* fields[] = {&b.bottom_right, &b.top_left, &b.window, &b.softcap, &b.gqa,        &b.varlen, &b.seqused_k,
                         &b.leftpad,      &b.paged,    &b.kv_cache, &b.zero_length, &b.dv_differs, &b.slack};
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == f) *fields[i] = Support::kNo;
  }
  if (!k.backward.dtypes.empty()) {
    std::vector<DType> keep;
    for (DType t : k.dtypes)
      if (std::find(k.backward.dtypes.begin(), k.backward.dtypes.end(), t) != k.backward.dtypes.end()) keep.push_back(t);
    b.dtypes = keep;
  }
  if (k.empty_row != EmptyRow::kZero) b.zero_length = Support::kNo;  // rows without keys have no defined gradient
  b.deterministic = k.backward.deterministic;
  b.writes_into_buffer = k.backward.writes_into_buffer;
  return b;
}

Contract generation_contract(const Contract& k, const CaseRequirements& req) {
  Contract g = req.backward ? backward_view(k) : k;
  if (req.fp32) g.dtypes = {DType::kF32};
  return g;
}

std::string requirements_unmet(const Contract& kernel, const CaseRequirements& req) {
  if (req.backward && !kernel.backward.available) return "the kernel has no backward";
  const Contract k = req.backward ? backward_view(kernel) : kernel;
  if (req.fp32 && std::find(k.dtypes.begin(), k.dtypes.end(), DType::kF32) == k.dtypes.end())
    return "needs fp32 (a finite difference of a half-precision forward measures its rounding, not its derivative)";
  if (req.gqa && !supported(k.gqa)) return "needs grouped KV heads";
  if (req.chunkable && (!supported(k.kv_cache) || !supported(k.bottom_right)))
    return "needs a KV cache with bottom-right causal attention";
  if (req.seqused && !supported(k.seqused_k)) return "needs seqused_k";
  if (req.leftpad && !supported(k.leftpad)) return "needs leftpad_k";
  if (req.batch2 && !supported(k.varlen)) return "";  // equal-length batches of two still work
  return "";
}

}  // namespace flashcheck
