#include "kernels/contract.h"

#include <algorithm>
#include <fmt/format.h>

#include "core/geometry.h"

namespace flashcheck {

ContractCheck check_contract(const Contract& k, const KernelCase& c) {
  ContractCheck r;
  auto need = [&](Support s, const std::string& feature) {
    if (!r.supported) return;
    if (s == Support::kNo) {
      r.supported = false;
      r.reason = feature;
    } else if (s == Support::kTranslated) {
      r.translations.push_back(feature);
    }
  };
  const bool masked = c.causal || c.window != Window{};
  if (masked) {
    if (c.alignment == Alignment::kBottomRight) need(k.bottom_right, "bottom-right causal/window alignment");
    else need(k.top_left, "top-left causal/window alignment");
  }
  const MaskRule rule = mask_rule(c);
  if (c.window != Window{} && !(c.causal && rule.left < 0)) need(k.window, "sliding window");
  if (c.softcap > 0) need(k.softcap, "softcap");
  if (c.heads != c.kv_heads) need(k.gqa, "grouped KV heads (GQA/MQA)");
  const CaseGeometry g = geometry(c);
  bool varlen = false, zero = false, seqused = false, leftpad = false;
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const Sequence& s = c.seqs[b];
    varlen = varlen || s.q_len != c.seqs[0].q_len || s.k_len != c.seqs[0].k_len;
    zero = zero || s.q_len == 0 || g.seqs[b].lk == 0;
    seqused = seqused || s.seqused_k.has_value();
    leftpad = leftpad || s.leftpad_k != 0;
  }
  if (varlen) need(k.varlen, "variable sequence lengths in one batch");
  if (seqused) need(k.seqused_k, "seqused_k");
  if (leftpad) need(k.leftpad, "leftpad_k");
  if (c.kv_storage == KvStorage::kPaged) need(k.paged, "paged KV");
  if (c.kv_cache) need(k.kv_cache, "KV cache with appended tokens");
  if (zero) need(k.zero_length, "zero-length sequences (q_len == 0 or no keys)");
  if (c.v_head_dim != c.head_dim) need(k.dv_differs, "v_head_dim != head_dim");
  if (c.slack != Slack{}) need(k.slack, "buffers with rows past the last sequence (slack)");
  if (!r.supported) {
    r.reason = "does not support " + r.reason;
    return r;
  }

  auto fail = [&](std::string why) {
    r.supported = false;
    r.reason = std::move(why);
    return r;
  };
  if (std::find(k.dtypes.begin(), k.dtypes.end(), c.dtype) == k.dtypes.end())
    return fail(fmt::format("does not support dtype {}", to_string(c.dtype)));
  for (std::int64_t d : {c.head_dim, c.v_head_dim}) {
    if (d > k.max_head_dim) return fail(fmt::format("head dim {} exceeds the maximum {}", d, k.max_head_dim));
    if (d % k.head_dim_multiple != 0)
      return fail(fmt::format("head dim {} is not a multiple of {}", d, k.head_dim_multiple));
    if (!k.head_dims.empty() && std::find(k.head_dims.begin(), k.head_dims.end(), d) == k.head_dims.end())
      return fail(fmt::format("head dim {} is not one of the kernel's head dims", d));
  }
  if (c.kv_storage == KvStorage::kPaged && c.paging.page_size % k.page_size_multiple != 0)
    return fail(fmt::format("page size {} is not a multiple of {}", c.paging.page_size, k.page_size_multiple));
  if (std::find(k.layouts.begin(), k.layouts.end(), c.layout) == k.layouts.end())
    return fail(fmt::format("does not support layout {}", to_string(c.layout)));
  if (std::find(k.kv_strides.begin(), k.kv_strides.end(), c.kv_strides) == k.kv_strides.end())
    return fail(fmt::format("does not support {} K/V strides", to_string(c.kv_strides)));
  if (!k.finite_unused_slots.empty() && c.data.poison && has_unused_input_slots(c))
    return fail(k.finite_unused_slots + " (this case holds NaN in input slots no sequence uses)");
  return r;
}

const std::vector<std::string>& contract_feature_names() {
  static const std::vector<std::string> names{"bottom_right", "top_left", "window",    "softcap",     "gqa",
                                              "varlen",       "seqused_k", "leftpad", "paged",       "kv_cache",
                                              "zero_length",  "dv_differs", "slack"};
  return names;
}

bool case_uses_feature(const KernelCase& c, std::string_view feature) {
  const CaseGeometry g = geometry(c);
  const bool masked = c.causal || c.window != Window{};
  const MaskRule rule = mask_rule(c);
  auto any_seq = [&](auto pred) {
    for (std::size_t b = 0; b < c.seqs.size(); ++b)
      if (pred(c.seqs[b], g.seqs[b])) return true;
    return false;
  };
  if (feature == "bottom_right") return masked && c.alignment == Alignment::kBottomRight;
  if (feature == "top_left") return masked && c.alignment == Alignment::kTopLeft;
  if (feature == "window") return c.window != Window{} && !(c.causal && rule.left < 0);
  if (feature == "softcap") return c.softcap > 0;
  if (feature == "gqa") return c.heads != c.kv_heads;
  if (feature == "varlen")
    return any_seq([&](const Sequence& s, const SeqGeometry&) { return s.q_len != c.seqs[0].q_len || s.k_len != c.seqs[0].k_len; });
  if (feature == "seqused_k") return any_seq([](const Sequence& s, const SeqGeometry&) { return s.seqused_k.has_value(); });
  if (feature == "leftpad") return any_seq([](const Sequence& s, const SeqGeometry&) { return s.leftpad_k != 0; });
  if (feature == "paged") return c.kv_storage == KvStorage::kPaged;
  if (feature == "kv_cache") return c.kv_cache;
  if (feature == "zero_length") return any_seq([](const Sequence& s, const SeqGeometry& sg) { return s.q_len == 0 || sg.lk == 0; });
  if (feature == "dv_differs") return c.v_head_dim != c.head_dim;
  if (feature == "slack") return c.slack != Slack{};
  return false;
}

ContractCheck check_backward_contract(const Contract& k, const KernelCase& c) {
  ContractCheck r = check_contract(k, c);
  if (!r.supported || !c.backward()) return r;
  const BackwardContract& bw = k.backward;
  auto fail = [&](std::string why) {
    r.supported = false;
    r.reason = std::move(why);
    return r;
  };
  if (!bw.available) return fail("has no backward (its contract computes the forward only)");
  for (const std::string& f : bw.without)
    if (case_uses_feature(c, f)) return fail(fmt::format("its backward does not support {}", f));
  if (!bw.dtypes.empty() && std::find(bw.dtypes.begin(), bw.dtypes.end(), c.dtype) == bw.dtypes.end())
    return fail(fmt::format("its backward does not support dtype {}", to_string(c.dtype)));
  // The gradients of a row that sees no key are 0 only where its output is the constant 0.
  if (k.empty_row != EmptyRow::kZero && has_empty_rows(c))
    return fail(fmt::format("its backward has no defined gradient for rows without keys (empty-row convention {})",
                            to_string(k.empty_row)));
  return r;
}

bool has_unused_input_slots(const KernelCase& c) {
  const CaseGeometry g = geometry(c);
  if (g.q_rows > g.total_q) return true;
  std::int64_t written = 0;  // K/V rows the case's values fill (core/case_tensors.cc)
  for (std::size_t b = 0; b < c.seqs.size(); ++b)
    written += (c.kv_cache ? c.seqs[b].cache_len : g.seqs[b].kv_end) - g.seqs[b].p0;
  return g.kv_rows > written;
}

Contract narrowed(const Contract& k, const std::vector<DType>& dtypes, const std::vector<std::int64_t>& head_dims) {
  Contract n = k;
  if (!dtypes.empty()) {
    n.dtypes.clear();
    for (DType t : k.dtypes)
      if (std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end()) n.dtypes.push_back(t);
  }
  if (!head_dims.empty()) {
    n.head_dims.clear();
    for (std::int64_t d : head_dims) {
      const bool listed = k.head_dims.empty() || std::find(k.head_dims.begin(), k.head_dims.end(), d) != k.head_dims.end();
      if (listed && d >= 1 && d <= k.max_head_dim && d % k.head_dim_multiple == 0) n.head_dims.push_back(d);
    }
  }
  return n;
}

}  // namespace flashcheck
