// The arguments a flash-attention varlen/kvcache API receives (flash-attn's mha_varlen_fwd and
// fwd_kvcache, PyTorch's _flash_attention_forward): int32 offset arrays and scalars, derived from a case.
// Adapters pass the ones their API takes; the tiled CPU kernel reads them exactly as a GPU kernel would.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kernel_case.h"

namespace flashcheck {

struct FlashArgs {
  std::int32_t batch = 0;
  std::vector<std::int32_t> cu_seqlens_q;      // (B + 1)
  std::vector<std::int32_t> cu_seqlens_k;      // (B + 1), allocation segments of packed K/V storage
  std::vector<std::int32_t> seqused_k;         // (B) or empty: used keys per sequence
  std::vector<std::int32_t> leftpad_k;         // (B) or empty
  std::vector<std::int32_t> cache_seqlens;     // (B) or empty: kv_cache, length before the append
  std::vector<std::int32_t> cu_seqlens_k_new;  // (B + 1) or empty: kv_cache, packed new tokens
  std::vector<std::int32_t> block_table;       // (B, max_blocks) row-major, -1 padded; empty unless paged
  std::int32_t max_blocks = 0;
  std::int32_t page_size = 0;
  std::int32_t max_seqlen_q = 0;
  std::int32_t max_seqlen_k = 0;
  float softmax_scale = 1.0f;
  float softcap = 0.0f;
  bool is_causal = false;
  std::int32_t window_left = -1;  // causal already folded in: is_causal => window_right == 0
  std::int32_t window_right = -1;
};

// Requires a validated case. max_seqlen_k is the longest key range a sequence attends over.
FlashArgs flash_args(const KernelCase& c);

// FlashAttention-2's varlen decode fast path (mha_varlen_fwd in flash_api.cpp, when max_seqlen_q == 1 with GQA) reshapes
// Q as (batch, kv_heads, groups, d): it reads row i of the Q buffer as sequence i's query. That holds only when every
// sequence has exactly one query and the buffer has no rows past the last one; otherwise the reshape fails or, when
// the row count happens to equal the batch (a sequence without a query plus a row of slack), the kernel attends with
// the wrong rows (fixtures/found/flash-varlen-gqa-decode-q-slack.json).
bool flash_decode_fast_path_misreads_q(const KernelCase& c);

}  // namespace flashcheck
