// KernelCase: what a varlen flash-attention API receives, as a small descriptor. Tensors are not part of
// it; they are materialized from the data recipe (core/materialize.h) or loaded from a fixture.
// The meaning of every field follows flash-attn's API (flash_attn_varlen_func, flash_attn_with_kvcache in
// flash_attn/flash_attn_interface.py), restated where it matters below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/data_recipe.h"
#include "core/dtype.h"

namespace flashcheck {

// Where the causal diagonal sits when q_len != k_len. Bottom-right: the last query sees the last key
// (flash-attn >= 2.1). Top-left: query i sees keys 0..i (SDPA is_causal, CPU flash).
enum class Alignment : std::uint8_t { kBottomRight, kTopLeft };

// What a row with no visible key returns.
enum class EmptyRow : std::uint8_t { kZero, kNaN, kUniform };

// How the query/output tensors are presented to the kernel. The logical content is the same.
enum class QLayout : std::uint8_t { kVarlen, kPaddedBSHD, kPaddedBHSD };

// How K/V are stored: packed varlen segments, or pages reached through a block table.
enum class KvStorage : std::uint8_t { kPacked, kPaged };

// Strides of K/V as handed to the kernel: contiguous; gapped (rows padded, non-contiguous); or expanded,
// a single KV head broadcast to every query head with stride 0 (requires kv_heads == 1).
enum class KvStrides : std::uint8_t { kContiguous, kGapped, kExpanded };


// (left, right): query i sees keys in [i + off - left, i + off + right]; -1 = unbounded on that side.
struct Window {
  std::int64_t left = -1;
  std::int64_t right = -1;
#if __cplusplus >= 202002L  // nvcc compiles the device code that includes this as C++17
  bool operator==(const Window&) const = default;
#endif
};

struct Sequence {
  std::int64_t q_len = 0;
  // Logical key positions allocated to this sequence: its varlen segment, or its cache capacity.
  std::int64_t k_len = 0;
  // Only the first seqused_k allocated keys are used (not with kv_cache).
  std::optional<std::int64_t> seqused_k;
  // The first leftpad_k logical positions are not part of the sequence.
  std::int64_t leftpad_k = 0;
  // With kv_cache: positions [0, cache_len) hold the cache, new_len tokens are appended after them.
  std::int64_t cache_len = 0;
  std::int64_t new_len = 0;
#if __cplusplus >= 202002L  // nvcc compiles the device code that includes this as C++17
  bool operator==(const Sequence&) const = default;
#endif
};

struct Paging {
  std::int64_t page_size = 16;
  // Pages in the pool beyond the ones the sequences need; they hold poison.
  std::int64_t extra_pages = 0;
  // Seed of the permutation that assigns pages, used when block_table is empty.
  std::uint64_t table_seed = 0;
  // Explicit table: row b lists the pages of sequence b, in logical order.
  std::vector<std::vector<std::int32_t>> block_table;
#if __cplusplus >= 202002L  // nvcc compiles the device code that includes this as C++17
  bool operator==(const Paging&) const = default;
#endif
};


// Rows past the last sequence's end in the packed buffers, as a caller's oversized buffers leave them (a
// static-shape unpad, a reused workspace): Q and the output get q_rows more rows, packed K/V kv_rows more.
// They hold NaN poison: a kernel must not read them, and is not expected to write the output's
// (flash-attention#1228, pytorch#176793). Packed layouts only (paged storage has extra_pages).
struct Slack {
  std::int64_t q_rows = 0;
  std::int64_t kv_rows = 0;
#if __cplusplus >= 202002L  // nvcc compiles the device code that includes this as C++17
  bool operator==(const Slack&) const = default;
#endif
};

struct KernelCase {
  std::string name;
  std::vector<Sequence> seqs;  // batch = seqs.size()
  std::int64_t heads = 1;
  std::int64_t kv_heads = 1;
  std::int64_t head_dim = 64;
  std::int64_t v_head_dim = 64;
  DType dtype = DType::kBF16;
  bool causal = false;
  Alignment alignment = Alignment::kBottomRight;
  Window window;
  double softcap = 0.0;
  std::optional<double> scale;  // default 1/sqrt(head_dim)
  bool kv_cache = false;        // flash_attn_with_kvcache: append new tokens, then attend
  QLayout layout = QLayout::kVarlen;
  KvStorage kv_storage = KvStorage::kPacked;
  Paging paging;
  KvStrides kv_strides = KvStrides::kContiguous;
  Slack slack;
  DataRecipe data;
  // Set: a backward case. The kernel also computes dQ, dK and dV for the upstream gradient dO this recipe draws
  // (core/data_recipe.h). Packed K/V without a cache: no flash API has a backward through pages or an append.
  std::optional<DoutRecipe> dout;

#if __cplusplus >= 202002L  // nvcc compiles the device code that includes this as C++17
  bool operator==(const KernelCase&) const = default;
#endif

  std::int64_t batch() const { return static_cast<std::int64_t>(seqs.size()); }
  double softmax_scale() const;
  std::int64_t group() const { return heads / kv_heads; }
  bool backward() const { return dout.has_value(); }
};

// Field-level problem found while validating a case.
struct FieldError {
  std::string field;   // JSON path, e.g. "seqs[2].seqused_k"
  std::string reason;
};

// Every rule a case must satisfy before anything runs on it; empty when the case is valid. Every field is
// range-checked (core/input_limits.h), and the case's memory (case_bytes) is within limits::kMaxCaseBytes.
std::vector<FieldError> validate(const KernelCase& c);

// "" when every input of a tensor with this recipe and scale is finite in `dtype` (core/recipe.h), else the
// validation message for its scale field (kernel and model cases share the rule).
std::string recipe_overflow_reason(Distribution dist, double scale, DType dtype);

// An upper estimate of the bytes the harness holds for the case at once, host or device (inputs, page pool,
// output buffers, reference results); computed without wrapping, saturating at INT64_MAX.
std::int64_t case_bytes(const KernelCase& c);

// The multiply-adds of the fp64 reference on the case: sum over sequences of q_len * k_len * heads * (d + dv), three
// times that with a backward. What a replay estimates before it starts (limits::kWarnCaseWork, --max-work).
double case_work(const KernelCase& c);

// Short one-line description for reports: "b2 h8/2 d64 bf16 causal-br win(-1,0) L[3x5,1x9]".
std::string summary(const KernelCase& c);

std::string_view to_string(Alignment a);
std::string_view to_string(EmptyRow e);
std::string_view to_string(QLayout l);
std::string_view to_string(KvStorage s);
std::string_view to_string(KvStrides s);
std::string_view to_string(Distribution d);
std::string_view to_string(DoutKind k);
std::optional<Alignment> parse_alignment(std::string_view s);
std::optional<EmptyRow> parse_empty_row(std::string_view s);
std::optional<QLayout> parse_layout(std::string_view s);
std::optional<KvStorage> parse_kv_storage(std::string_view s);
std::optional<KvStrides> parse_kv_strides(std::string_view s);
std::optional<Distribution> parse_distribution(std::string_view s);
std::optional<DoutKind> parse_dout_kind(std::string_view s);

}  // namespace flashcheck
