#include "search/coverage.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/comma_list.h"
#include "core/geometry.h"

namespace flashcheck {
namespace {

bool on(Support s) { return s != Support::kNo; }

}  // namespace

std::vector<std::string> classify(const KernelCase& c) {
  std::vector<std::string> f;
  f.push_back(std::string("dtype-") + std::string(to_string(c.dtype)));
  if (c.heads != c.kv_heads) f.push_back(c.kv_heads == 1 ? "mqa" : "gqa");
  if (c.causal) f.push_back(c.alignment == Alignment::kBottomRight ? "causal-bottom-right" : "causal-top-left");
  if (c.window != Window{}) f.push_back("window");
  if (c.softcap > 0) f.push_back("softcap");
  if (c.kv_storage == KvStorage::kPaged) {
    f.push_back("paged");
    if (c.paging.page_size == 1) f.push_back("page-size-1");
  }
  if (c.kv_cache) f.push_back("kv-cache");
  if (c.v_head_dim != c.head_dim) f.push_back("dv!=d");
  if (c.head_dim % 8 != 0) f.push_back("head-dim-not-multiple-of-8");
  if (c.kv_strides != KvStrides::kContiguous) f.push_back(std::string("kv-") + std::string(to_string(c.kv_strides)));
  if (c.seqs.size() > 1) f.push_back("batch>1");
  const CaseGeometry g = geometry(c);
  bool q_gt_k = false, zero = false, decode = false, seqused = false, leftpad = false;
  bool t63 = false, t64 = false, t65 = false, mod32 = false;
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const SeqGeometry& s = g.seqs[b];
    q_gt_k = q_gt_k || s.lq > s.lk;
    zero = zero || s.lq == 0 || s.lk == 0;
    decode = decode || s.lq == 1;
    seqused = seqused || c.seqs[b].seqused_k.has_value();
    leftpad = leftpad || s.p0 > 0;
    for (std::int64_t len : {s.lq, s.lk}) {
      if (len <= 0) continue;
      t63 = t63 || len % 64 == 63;
      t64 = t64 || len % 64 == 0;
      t65 = t65 || len % 64 == 1;
      mod32 = mod32 || (len % 32 == 1 && len > 1);
    }
  }
  if (q_gt_k) f.push_back("q>k");
  if (zero) f.push_back("zero-length");
  if (has_empty_rows(c)) f.push_back("empty-rows");
  if (decode) f.push_back("decode");
  if (seqused) f.push_back("seqused-k");
  if (leftpad) f.push_back("leftpad");
  if (t63) f.push_back("tile64-1");
  if (t64) f.push_back("tile64+0");
  if (t65) f.push_back("tile64+1");
  if (mod32) f.push_back("len=1mod32");
  if (c.data.v_onehot) f.push_back("onehot-v");
  if (c.slack != Slack{}) f.push_back("slack");
  if (c.dout && c.dout->kind != DoutKind::kNormal) f.push_back(c.dout->kind == DoutKind::kZeroRows ? "dout-zero-rows" : "dout-onehot");
  return f;
}

const std::vector<std::string>& kernel_feature_names() {
  static const std::vector<std::string> names{
      "causal", "causal-bottom-right", "causal-top-left", "window", "softcap", "gqa", "mqa", "batch>1", "q>k",
      "decode", "zero-length", "empty-rows", "seqused-k", "leftpad", "kv-cache", "paged", "page-size-1", "dv!=d",
      "head-dim-not-multiple-of-8", "kv-gapped", "kv-expanded", "tile64-1", "tile64+0", "tile64+1", "len=1mod32", "onehot-v", "slack",
      "dout-zero-rows", "dout-onehot", "dtype-fp32", "dtype-fp16", "dtype-bf16"};
  return names;
}

std::string parse_required_features(const std::string& spec, GenLimits& lim) {
  lim.require.clear();
  lim.gqa_group = 0;
  for (const std::string& item : comma_list(spec)) {
    if (item.empty()) return "an empty feature name (two commas, or one at an end)";
    if (item.rfind("gqa=", 0) == 0) {
      const std::string n = item.substr(4);
      const bool digits = !n.empty() && n.size() <= 3 && n.find_first_not_of("0123456789") == std::string::npos;
      const long group = digits ? std::stol(n) : 0;
      if (group < 2 || group > 64) return fmt::format("'{}': gqa=N takes a group of 2 to 64 query heads per KV head", item);
      lim.gqa_group = group;
      continue;
    }
    const auto& names = kernel_feature_names();
    if (std::find(names.begin(), names.end(), item) == names.end())
      return fmt::format("'{}' is not a feature; the features are gqa=N, {}", item, fmt::join(names, ", "));
    if (std::find(lim.require.begin(), lim.require.end(), item) == lim.require.end()) lim.require.push_back(item);
  }
  return "";
}

bool has_required_features(const KernelCase& c, const GenLimits& lim) {
  if (lim.gqa_group > 0 && c.heads != lim.gqa_group * c.kv_heads) return false;
  if (lim.require.empty()) return true;
  const std::vector<std::string> f = classify(c);
  const auto has = [&](const std::string& name) {
    if (name == "causal") return c.causal;
    return std::find(f.begin(), f.end(), name) != f.end();
  };
  return std::all_of(lim.require.begin(), lim.require.end(), has);
}

std::vector<std::string> required_coverage(const Contract& k, const CaseRequirements& req) {
  std::vector<std::string> r;
  for (DType t : k.dtypes) r.push_back(std::string("dtype-") + std::string(to_string(t)));
  if (on(k.gqa)) r.insert(r.end(), {"gqa", "mqa"});
  if (on(k.bottom_right)) r.push_back("causal-bottom-right");
  if (on(k.top_left) && !req.chunkable) r.push_back("causal-top-left");
  if (on(k.window)) r.push_back("window");
  if (on(k.softcap)) r.push_back("softcap");
  if (on(k.paged) && !req.packed_kv) {
    r.push_back("paged");
    if (k.page_size_multiple == 1) r.push_back("page-size-1");  // pages of a multiple of 128 are never 1 wide
  }
  if (on(k.kv_cache) && !req.no_cache) r.push_back("kv-cache");
  if (on(k.dv_differs) && k.head_dims.size() != 1) r.push_back("dv!=d");  // one head dim left: dv cannot differ
  const bool unaligned_dims = k.head_dims.empty() ? k.head_dim_multiple == 1
                                                 : std::any_of(k.head_dims.begin(), k.head_dims.end(),
                                                               [](std::int64_t d) { return d % 8 != 0; });
  if (unaligned_dims) r.push_back("head-dim-not-multiple-of-8");
  if (on(k.varlen) || req.batch2) r.push_back("batch>1");
  if (!req.chunkable) r.push_back("q>k");
  if (on(k.zero_length) && !req.chunkable) r.push_back("zero-length");
  // A row sees no key only through bottom-right causal with q_len > k_len, a window, or an empty key
  // sequence; a top-left-only kernel (SDPA's flash backend, cuDNN) never has one.
  if (!req.chunkable && (on(k.bottom_right) || on(k.window) || on(k.zero_length))) r.push_back("empty-rows");
  if (!req.chunkable) r.push_back("decode");  // chunked prefill needs at least two new tokens
  if (on(k.seqused_k) && !req.chunkable) r.push_back("seqused-k");
  if (on(k.leftpad)) r.push_back("leftpad");
  if (on(k.slack)) r.push_back("slack");
  r.insert(r.end(), {"tile64-1", "tile64+0", "tile64+1", "len=1mod32"});
  for (KvStrides s : k.kv_strides)
    if (s != KvStrides::kContiguous) r.push_back(std::string("kv-") + std::string(to_string(s)));
  if (req.backward) r.insert(r.end(), {"dout-zero-rows", "dout-onehot"});
  for (const auto& [feature, why] : k.coverage_exempt) r.erase(std::remove(r.begin(), r.end(), feature), r.end());
  if (req.backward)
    for (const auto& [feature, why] : k.backward.coverage_exempt) r.erase(std::remove(r.begin(), r.end(), feature), r.end());
  return r;
}

std::vector<std::string> classify(const ModelCase& m) {
  std::vector<std::string> f;
  f.push_back(std::string("dtype-") + std::string(to_string(m.dtype)));
  if (m.batch > 1) f.push_back("batch>1");
  if (m.q_len == 1) f.push_back("decode");
  if (m.past > 0) f.push_back("past");
  else if (m.use_cache) f.push_back("cache-object");
  if (m.heads != m.kv_heads) f.push_back(m.kv_heads == 1 ? "mqa" : "gqa");
  if (!m.causal) f.push_back("bidirectional");
  if (m.attention_mask) {
    const std::string s = summary(m);
    const auto at = s.find("mask[");
    f.push_back("mask-" + s.substr(at + 5, s.find(']', at) - at - 5));
  }
  if (m.position_ids) f.push_back("position-ids");
  if (m.position_ids_3d) f.push_back("position-ids-3d");
  if (m.sliding_window) f.push_back("window");
  if (m.softcap) f.push_back("softcap");
  if (m.query_length && *m.query_length != m.q_len) f.push_back("query-length-differs");
  if (m.static_cache_len) f.push_back("static-cache");
  const auto no_valid_key = [](const std::vector<std::int64_t>& row) {
    return std::all_of(row.begin(), row.end(), [](std::int64_t x) { return x == 0; });
  };
  if (m.q_len == 1 && m.attention_mask && std::any_of(m.attention_mask->begin(), m.attention_mask->end(), no_valid_key))
    f.push_back("keyless-decode");
  if (m.varlen_kwargs) f.push_back("varlen-kwargs");
  if (m.via_generate) f.push_back("generate");
  return f;
}


std::vector<std::string> classify(const AnyCase& c) {
  return std::visit([](const auto& x) { return classify(x); }, c);
}

const std::vector<std::string>& required_model_coverage() {
  static const std::vector<std::string> r{"dtype-bf16", "dtype-fp16", "dtype-fp32", "batch>1", "decode", "past",
                                          "gqa", "mqa", "mask-left", "mask-holes", "position-ids", "window",
                                          "softcap"};
  return r;
}

std::vector<std::string> required_coverage(const Property& p, const Contract& k, std::int64_t cases) {
  if (p.level() == CaseLevel::kKernel) return required_coverage(generation_contract(k, p.requirements()), p.requirements());
  if (p.demands_model_coverage() && cases >= kModelCoverageMinCases) return required_model_coverage();
  return {};
}

void Coverage::add(const AnyCase& c) {
  for (const std::string& f : classify(c)) ++counts[f];
}

std::vector<std::string> Coverage::missing(const std::vector<std::string>& required) const {
  std::vector<std::string> m;
  for (const std::string& f : required)
    if (!counts.count(f) && !refused.count(f)) m.push_back(f);
  return m;
}


}  // namespace flashcheck
