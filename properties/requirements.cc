#include "properties/requirements.h"

namespace flashcheck {
namespace {

bool supported(Support s) { return s != Support::kNo; }

}  // namespace

std::string requirements_unmet(const Contract& k, const CaseRequirements& req) {
  if (req.gqa && !supported(k.gqa)) return "needs grouped KV heads";
  if (req.chunkable && (!supported(k.kv_cache) || !supported(k.bottom_right)))
    return "needs a KV cache with bottom-right causal attention";
  if (req.seqused && !supported(k.seqused_k)) return "needs seqused_k";
  if (req.leftpad && !supported(k.leftpad)) return "needs leftpad_k";
  if (req.batch2 && !supported(k.varlen)) return "";  // equal-length batches of two still work
  return "";
}

}  // namespace flashcheck
