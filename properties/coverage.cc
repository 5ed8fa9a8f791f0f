#include "properties/coverage.h"

#include <algorithm>

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
  return f;
}

std::vector<std::string> required_coverage(const Contract& k, const CaseRequirements& req) {
  std::vector<std::string> r;
  for (DType t : k.dtypes) r.push_back(std::string("dtype-") + std::string(to_string(t)));
  if (on(k.gqa)) r.insert(r.end(), {"gqa", "mqa"});
  if (on(k.bottom_right)) r.push_back("causal-bottom-right");
  if (on(k.top_left) && !req.chunkable) r.push_back("causal-top-left");
  if (on(k.window)) r.push_back("window");
  if (on(k.softcap)) r.push_back("softcap");
  if (on(k.paged) && !req.packed_kv) r.insert(r.end(), {"paged", "page-size-1"});
  if (on(k.kv_cache) && !req.no_cache) r.push_back("kv-cache");
  if (on(k.dv_differs)) r.push_back("dv!=d");
  if (k.head_dim_multiple == 1) r.push_back("head-dim-not-multiple-of-8");
  if (on(k.varlen) || req.batch2) r.push_back("batch>1");
  if (!req.chunkable) r.push_back("q>k");
  if (on(k.zero_length) && !req.chunkable) r.push_back("zero-length");
  // A row sees no key only through bottom-right causal with q_len > k_len, a window, or an empty key
  // sequence; a top-left-only kernel (SDPA's flash backend, cuDNN) never has one.
  if (!req.chunkable && (on(k.bottom_right) || on(k.window) || on(k.zero_length))) r.push_back("empty-rows");
  if (!req.chunkable) r.push_back("decode");  // chunked prefill needs at least two new tokens
  if (on(k.seqused_k) && !req.chunkable) r.push_back("seqused-k");
  if (on(k.leftpad)) r.push_back("leftpad");
  r.insert(r.end(), {"tile64-1", "tile64+0", "tile64+1", "len=1mod32"});
  for (KvStrides s : k.kv_strides)
    if (s != KvStrides::kContiguous) r.push_back(std::string("kv-") + std::string(to_string(s)));
  for (const auto& [feature, why] : k.coverage_exempt) r.erase(std::remove(r.begin(), r.end(), feature), r.end());
  return r;
}

void Coverage::add(const KernelCase& c) {
  for (const std::string& f : classify(c)) ++counts[f];
}

std::vector<std::string> Coverage::missing(const std::vector<std::string>& required) const {
  std::vector<std::string> m;
  for (const std::string& f : required)
    if (!counts.count(f)) m.push_back(f);
  return m;
}

}  // namespace flashcheck
