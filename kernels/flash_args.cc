#include "kernels/flash_args.h"

#include <algorithm>

#include "core/geometry.h"

namespace flashcheck {

FlashArgs flash_args(const KernelCase& c) {
  FlashArgs a;
  a.batch = static_cast<std::int32_t>(c.seqs.size());
  a.cu_seqlens_q.push_back(0);
  a.cu_seqlens_k.push_back(0);
  bool any_used = false, any_leftpad = false;
  for (const Sequence& s : c.seqs) {
    any_used = any_used || s.seqused_k.has_value();
    any_leftpad = any_leftpad || s.leftpad_k != 0;
  }
  if (c.kv_cache) a.cu_seqlens_k_new.push_back(0);
  for (const Sequence& s : c.seqs) {
    a.cu_seqlens_q.push_back(a.cu_seqlens_q.back() + static_cast<std::int32_t>(s.q_len));
    a.cu_seqlens_k.push_back(a.cu_seqlens_k.back() + static_cast<std::int32_t>(s.k_len));
    if (any_used) a.seqused_k.push_back(static_cast<std::int32_t>(s.seqused_k.value_or(s.k_len)));
    if (any_leftpad) a.leftpad_k.push_back(static_cast<std::int32_t>(s.leftpad_k));
    if (c.kv_cache) {
      a.cache_seqlens.push_back(static_cast<std::int32_t>(s.cache_len));
      a.cu_seqlens_k_new.push_back(a.cu_seqlens_k_new.back() + static_cast<std::int32_t>(s.new_len));
    }
    a.max_seqlen_q = std::max(a.max_seqlen_q, static_cast<std::int32_t>(s.q_len));
    a.max_seqlen_k = std::max(a.max_seqlen_k, static_cast<std::int32_t>(s.k_len));
  }
  if (c.kv_storage == KvStorage::kPaged) {
    const auto table = block_table(c);
    a.page_size = static_cast<std::int32_t>(c.paging.page_size);
    for (const auto& row : table) a.max_blocks = std::max(a.max_blocks, static_cast<std::int32_t>(row.size()));
    a.block_table.assign(static_cast<std::size_t>(a.batch) * static_cast<std::size_t>(a.max_blocks), -1);
    for (std::size_t b = 0; b < table.size(); ++b)
      std::copy(table[b].begin(), table[b].end(), a.block_table.begin() + static_cast<std::ptrdiff_t>(b * a.max_blocks));
  }
  a.softmax_scale = static_cast<float>(c.softmax_scale());
  a.softcap = static_cast<float>(c.softcap);
  a.is_causal = c.causal;
  const MaskRule m = mask_rule(c);
  a.window_left = static_cast<std::int32_t>(m.left);
  a.window_right = static_cast<std::int32_t>(m.right);
  return a;
}

bool flash_decode_fast_path_misreads_q(const KernelCase& c) {
  const auto q_len_is = [&](auto pred) {
    return std::all_of(c.seqs.begin(), c.seqs.end(), [&](const Sequence& s) { return pred(s.q_len); });
  };
  if (c.heads <= c.kv_heads || !q_len_is([](std::int64_t n) { return n <= 1; })) return false;
  const bool one_row_per_sequence =
      q_len_is([](std::int64_t n) { return n == 1; }) && geometry(c).q_rows == static_cast<std::int64_t>(c.seqs.size());
  return !one_row_per_sequence;
}

}  // namespace flashcheck
