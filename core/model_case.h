// ModelCase: what one attention layer of a transformers model receives, after RoPE and the KV-cache
// update. The HF-eager oracle (oracles/hf_eager.h) and the flash-path emulation (oracles/hf_flash_path.h)
// both start from it: what src/transformers/integrations/flash_attention.py and eager_attention_forward
// receive from a model's attention module. The layout is transformers' rectangular one:
// one past length P for the whole batch, shorter histories expressed as zeros in the 2D mask.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/data_recipe.h"
#include "core/dtype.h"
#include "core/kernel_case.h"  // FieldError

namespace flashcheck {

// The four kwargs a caller may pass to transformers' flash path (DataCollatorWithFlattening, generate in
// v4.54-4.55, sequence-parallel patches): used as they are.
struct VarlenKwargs {
  std::vector<std::int64_t> cu_seq_lens_q;
  std::vector<std::int64_t> cu_seq_lens_k;
  std::int64_t max_length_q = 0;
  std::int64_t max_length_k = 0;
  bool operator==(const VarlenKwargs&) const = default;
};

struct ModelCase {
  std::string name;
  DType dtype = DType::kBF16;
  std::int64_t batch = 1;     // B
  std::int64_t q_len = 1;     // Lq: new tokens
  std::int64_t past = 0;      // P: tokens already in the cache
  std::int64_t heads = 1;     // Hq
  std::int64_t kv_heads = 1;  // Hkv
  std::int64_t head_dim = 64;
  bool causal = true;
  std::optional<std::int64_t> sliding_window;  // W: a query sees W keys including itself
  std::optional<double> softcap;               // Gemma2-style cap on the scaled logits
  std::optional<double> scale;                 // default head_dim^-0.5
  // B rows of P + Lq columns; nonzero = valid. Absent: no 2D mask reaches the model.
  std::optional<std::vector<std::vector<std::int64_t>>> attention_mask;
  // 1 or B rows of Lq. Absent: the model's default, arange(P, P + Lq) as one row.
  std::optional<std::vector<std::vector<std::int64_t>>> position_ids;
  bool position_ids_3d = false;  // M-RoPE: attention receives them expanded to [3, rows, Lq]
  std::optional<std::int64_t> query_length;  // what the caller passes as query_length (default Lq)
  bool use_cache = false;                    // a cache object exists (a DynamicCache; always when P > 0)
  std::optional<std::int64_t> static_cache_len;  // K/V are a StaticCache of this many slots; unfilled = 0
  std::optional<VarlenKwargs> varlen_kwargs;
  bool via_generate = false;  // the call comes from generate(), which added its own kwargs in v4.54-4.55
  DataRecipe data{.poison = false};  // model tensors hold real (pad-token) values everywhere

  bool operator==(const ModelCase&) const = default;

  std::int64_t kv_len() const { return static_cache_len ? *static_cache_len : past + q_len; }  // K/V rows
  std::int64_t filled_kv() const { return past + q_len; }  // K/V rows holding tokens
  std::int64_t caller_query_length() const { return query_length ? *query_length : q_len; }
  std::int64_t group() const { return heads / kv_heads; }
  double softmax_scale() const;
  // position_ids as [rows][Lq], with the model default filled in.
  std::vector<std::vector<std::int64_t>> effective_position_ids() const;
  // Whether key column j of row b is valid under the 2D mask (all valid without one; columns past it invalid).
  bool key_valid(std::int64_t b, std::int64_t j) const;
};

std::vector<FieldError> validate(const ModelCase& m);

// "b2 q5 p3 h8/2 d64 bf16 causal mask[left] pos[packed] W4" for reports.
std::string summary(const ModelCase& m);
// The multiply-adds of one attention pass of the layer: batch * q_len * kv_len * heads * 2 * head_dim (see
// case_work of a KernelCase).
double case_work(const ModelCase& m);

}  // namespace flashcheck
