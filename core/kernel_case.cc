#include "core/kernel_case.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <utility>

#include "core/checked.h"
#include "core/geometry.h"
#include "core/input_limits.h"
#include "core/recipe.h"

namespace flashcheck {
namespace {

template <typename E, std::size_t N>
std::optional<E> parse_enum(std::string_view s, const std::array<std::pair<std::string_view, E>, N>& names) {
  for (const auto& [name, value] : names)
    if (name == s) return value;
  return std::nullopt;
}
template <typename E, std::size_t N>
std::string_view enum_name(E e, const std::array<std::pair<std::string_view, E>, N>& names) {
  for (const auto& [name, value] : names)
    if (value == e) return name;
  return "?";
}

constexpr std::array<std::pair<std::string_view, DType>, 3> kDTypes{
    {{"fp16", DType::kF16}, {"bf16", DType::kBF16}, {"fp32", DType::kF32}}};
constexpr std::array<std::pair<std::string_view, Alignment>, 2> kAlignments{
    {{"bottom_right", Alignment::kBottomRight}, {"top_left", Alignment::kTopLeft}}};
constexpr std::array<std::pair<std::string_view, EmptyRow>, 3> kEmptyRows{
    {{"zero", EmptyRow::kZero}, {"nan", EmptyRow::kNaN}, {"uniform", EmptyRow::kUniform}}};
constexpr std::array<std::pair<std::string_view, QLayout>, 3> kLayouts{
    {{"varlen", QLayout::kVarlen}, {"padded_bshd", QLayout::kPaddedBSHD}, {"padded_bhsd", QLayout::kPaddedBHSD}}};
constexpr std::array<std::pair<std::string_view, KvStorage>, 2> kStorages{
    {{"packed", KvStorage::kPacked}, {"paged", KvStorage::kPaged}}};
constexpr std::array<std::pair<std::string_view, KvStrides>, 3> kStrides{
    {{"contiguous", KvStrides::kContiguous}, {"gapped", KvStrides::kGapped}, {"expanded", KvStrides::kExpanded}}};
constexpr std::array<std::pair<std::string_view, Distribution>, 4> kDists{{{"normal", Distribution::kNormal},
                                                                           {"uniform", Distribution::kUniform},
                                                                           {"integers", Distribution::kIntegers},
                                                                           {"large", Distribution::kLarge}}};

constexpr std::array<std::pair<std::string_view, DoutKind>, 3> kDoutKinds{
    {{"normal", DoutKind::kNormal}, {"zero_rows", DoutKind::kZeroRows}, {"onehot", DoutKind::kOneHot}}};

}  // namespace

std::string_view to_string(DType t) { return enum_name(t, kDTypes); }
std::string_view to_string(Alignment a) { return enum_name(a, kAlignments); }
std::string_view to_string(EmptyRow e) { return enum_name(e, kEmptyRows); }
std::string_view to_string(QLayout l) { return enum_name(l, kLayouts); }
std::string_view to_string(KvStorage s) { return enum_name(s, kStorages); }
std::string_view to_string(KvStrides s) { return enum_name(s, kStrides); }
std::string_view to_string(Distribution d) { return enum_name(d, kDists); }
std::optional<DType> parse_dtype(std::string_view s) { return parse_enum(s, kDTypes); }
std::optional<Alignment> parse_alignment(std::string_view s) { return parse_enum(s, kAlignments); }
std::optional<EmptyRow> parse_empty_row(std::string_view s) { return parse_enum(s, kEmptyRows); }
std::optional<QLayout> parse_layout(std::string_view s) { return parse_enum(s, kLayouts); }
std::optional<KvStorage> parse_kv_storage(std::string_view s) { return parse_enum(s, kStorages); }
std::optional<KvStrides> parse_kv_strides(std::string_view s) { return parse_enum(s, kStrides); }
std::optional<Distribution> parse_distribution(std::string_view s) { return parse_enum(s, kDists); }
std::string_view to_string(DoutKind k) { return enum_name(k, kDoutKinds); }
std::optional<DoutKind> parse_dout_kind(std::string_view s) { return parse_enum(s, kDoutKinds); }

std::string recipe_overflow_reason(Distribution dist, double scale, DType dtype) {
  if (recipe_fits_dtype(dist, scale, dtype)) return "";
  return fmt::format("{} gives '{}' inputs up to {:.4g}, past {}'s safe range (half its largest finite value, {:.6g}): "
                     "infinite inputs make the truth and the tolerance bound infinite",
                     scale, to_string(dist), scale * recipe_magnitude_bound(dist), to_string(dtype),
                     detail::format_of(dtype).max_finite / 2);
}

double KernelCase::softmax_scale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

double case_work(const KernelCase& c) {
  double work = 0;
  for (const Sequence& s : c.seqs)
    work += static_cast<double>(s.q_len) *
            static_cast<double>(c.kv_cache ? std::max(s.k_len, s.cache_len + s.new_len) : s.k_len) * static_cast<double>(c.heads) *
            static_cast<double>(c.head_dim + c.v_head_dim);
  return c.backward() ? 3 * work : work;
}

std::int64_t case_bytes(const KernelCase& c) {
  // Elements of every tensor the harness holds for the case, computed without wrapping (core/checked.h):
  // Q and the output rows, K/V storage (packed rows, or the whole page pool), the cache's new tokens.
  std::int64_t total_q = c.slack.q_rows, kv_rows = c.slack.kv_rows, total_new = 0, pages = 0;
  for (const Sequence& s : c.seqs) {
    total_q = size_add(total_q, s.q_len);
    kv_rows = size_add(kv_rows, s.k_len);
    if (c.kv_cache) total_new = size_add(total_new, s.new_len);
    if (c.kv_storage == KvStorage::kPaged) pages = size_add(pages, size_ceil_div(s.k_len, c.paging.page_size));
  }
  if (c.kv_storage == KvStorage::kPaged) {
    pages = size_add(pages, c.paging.extra_pages);
    kv_rows = size_mul(pages, c.paging.page_size);
  }
  const std::int64_t d = std::max(c.head_dim, c.v_head_dim);
  const std::int64_t q_elems = size_product({total_q, c.heads, d});
  const std::int64_t kv_elems = size_product({size_add(kv_rows, total_new), c.kv_heads, d, 2});  // K and V
  const std::int64_t rows = size_mul(total_q, c.heads);
  // Inputs as float, twice (the materialized tensors and a kernel's or reference's gathered copy); each
  // output element as the kernel's float buffer, and the reference's and baseline's fp64 values and noise
  // estimates (4 + 4 * 8 bytes); each output row's LSE and flags the same way; the block table.
  std::int64_t bytes = size_mul(size_add(q_elems, kv_elems), 8);
  bytes = size_add(bytes, size_mul(q_elems, 36));
  bytes = size_add(bytes, size_mul(rows, 40));
  bytes = size_add(bytes, size_mul(pages, 4));
  if (c.backward()) {
    // dO as float; dQ, dK, dV as the kernel's float buffers and the reference's and baseline's fp64 values and
    // noise estimates (4 + 4 * 8 bytes each, as the output above), twice for the metamorphic pairs.
    bytes = size_add(bytes, size_mul(q_elems, 4));
    bytes = size_add(bytes, size_mul(size_add(q_elems, kv_elems), 72));
  }
  return bytes;
}

std::vector<FieldError> validate(const KernelCase& c) {
  using namespace limits;
  std::vector<FieldError> errors;
  auto fail = [&](std::string field, std::string reason) { errors.push_back({std::move(field), std::move(reason)}); };

  if (c.seqs.empty()) fail("seqs", "the batch is empty: a case needs at least one sequence");
  if (static_cast<std::int64_t>(c.seqs.size()) > kMaxBatch)
    fail("seqs", fmt::format("{} sequences; the limit is {}", c.seqs.size(), kMaxBatch));
  if (c.heads < 1 || c.heads > kMaxHeads) fail("heads", fmt::format("{} is outside [1, {}]", c.heads, kMaxHeads));
  if (c.kv_heads < 1 || c.kv_heads > kMaxHeads)
    fail("kv_heads", fmt::format("{} is outside [1, {}]", c.kv_heads, kMaxHeads));
  if (c.heads >= 1 && c.kv_heads >= 1 && c.heads % c.kv_heads != 0)
    fail("kv_heads", fmt::format("heads {} is not a multiple of kv_heads {} (H % Hk must be 0)", c.heads, c.kv_heads));
  if (c.head_dim < 1 || c.head_dim > kMaxHeadDim)
    fail("head_dim", fmt::format("{} is outside [1, {}]", c.head_dim, kMaxHeadDim));
  if (c.v_head_dim < 1 || c.v_head_dim > kMaxHeadDim)
    fail("v_head_dim", fmt::format("{} is outside [1, {}]", c.v_head_dim, kMaxHeadDim));
  if (c.window.left < -1) fail("window[0]", fmt::format("left bound {} is below -1 (-1 means unbounded)", c.window.left));
  if (c.window.right < -1)
    fail("window[1]", fmt::format("right bound {} is below -1 (-1 means unbounded)", c.window.right));
  if (c.window.left > kMaxWindow) fail("window[0]", fmt::format("left bound {} is above {}", c.window.left, kMaxWindow));
  if (c.window.right > kMaxWindow) fail("window[1]", fmt::format("right bound {} is above {}", c.window.right, kMaxWindow));
  if (!std::isfinite(c.softcap) || c.softcap < 0) fail("softcap", fmt::format("{} must be finite and >= 0", c.softcap));
  if (c.scale && (!std::isfinite(*c.scale) || *c.scale == 0))
    fail("scale", fmt::format("{} must be finite and non-zero", *c.scale));
  if (c.kv_strides == KvStrides::kExpanded && c.kv_heads != 1)
    fail("kv.strides", fmt::format("expanded K/V broadcast one KV head; kv_heads is {}", c.kv_heads));

  const bool paged = c.kv_storage == KvStorage::kPaged;
  if (paged) {
    if (c.paging.page_size < 1) fail("kv.page_size", fmt::format("page size {} must be >= 1", c.paging.page_size));
    if (c.paging.page_size > kMaxPageSize)
      fail("kv.page_size", fmt::format("page size {} is above {}", c.paging.page_size, kMaxPageSize));
    if (c.paging.extra_pages < 0) fail("kv.extra_pages", fmt::format("negative count {}", c.paging.extra_pages));
    if (c.paging.extra_pages > kMaxExtraPages)
      fail("kv.extra_pages", fmt::format("{} is above {}", c.paging.extra_pages, kMaxExtraPages));
  }

  auto length = [&](const std::string& field, std::int64_t v) {
    if (v < 0) fail(field, fmt::format("negative length {}", v));
    else if (v > kMaxLength) fail(field, fmt::format("length {} exceeds 2^32 - 1", v));
  };
  length("slack.q_rows", c.slack.q_rows);
  length("slack.kv_rows", c.slack.kv_rows);
  if (c.slack.q_rows > 0 && c.layout != QLayout::kVarlen)
    fail("slack.q_rows", fmt::format("rows past the last sequence need the packed varlen layout, not {}", to_string(c.layout)));
  if (c.slack.kv_rows > 0 && c.kv_storage != KvStorage::kPacked)
    fail("slack.kv_rows", "rows past the last sequence need packed K/V (paged storage has extra_pages)");
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const Sequence& s = c.seqs[b];
    const std::string at = fmt::format("seqs[{}]", b);
    length(at + ".q_len", s.q_len);
    length(at + ".k_len", s.k_len);
    length(at + ".leftpad_k", s.leftpad_k);
    std::int64_t kv_end = s.k_len;
    if (c.kv_cache) {
      if (s.seqused_k) fail(at + ".seqused_k", "seqused_k cannot be combined with kv_cache (cache_len decides)");
      length(at + ".cache_len", s.cache_len);
      length(at + ".new_len", s.new_len);
      kv_end = size_add(s.cache_len, s.new_len);  // both bounded by 2^32: no overflow once they pass
      if (kv_end > s.k_len)
        fail(at + ".new_len", fmt::format("cache_len {} + new_len {} exceeds the cache capacity k_len {}", s.cache_len,
                                          s.new_len, s.k_len));
    } else {
      if (s.cache_len != 0 || s.new_len != 0)
        fail(at + ".cache_len", "cache_len/new_len need \"kv\": {\"cache\": true}");
      if (s.seqused_k) {
        if (*s.seqused_k < 0) fail(at + ".seqused_k", fmt::format("negative length {}", *s.seqused_k));
        if (*s.seqused_k > s.k_len)
          fail(at + ".seqused_k", fmt::format("seqused_k {} > k_len {}", *s.seqused_k, s.k_len));
        kv_end = *s.seqused_k;
      }
    }
    if (s.leftpad_k > kv_end && kv_end >= 0)
      fail(at + ".leftpad_k", fmt::format("leftpad_k {} is past the end of the used keys ({})", s.leftpad_k, kv_end));
  }

  for (const auto& [field, v] : {std::pair{"data.q_scale", c.data.q_scale}, std::pair{"data.k_scale", c.data.k_scale},
                                 std::pair{"data.v_scale", c.data.v_scale}})
    if (!std::isfinite(v) || v < 0) fail(field, fmt::format("{} must be finite and >= 0", v));
    else if (const std::string why = recipe_overflow_reason(c.data.dist, v, c.dtype); !why.empty())
      fail(field, why);

  if (c.dout) {
    if (paged) fail("dout", "a backward case needs packed K/V: no flash API has a backward through a paged KV cache");
    if (c.kv_cache) fail("dout", "a backward case cannot append to a KV cache: flash_attn_with_kvcache has no backward");
    if (!std::isfinite(c.dout->scale) || c.dout->scale <= 0)
      fail("dout.scale", fmt::format("{} must be finite and > 0", c.dout->scale));
    else if (!(std::fabs(c.dout->scale) * dout_magnitude_bound(c.dout->kind) < detail::format_of(c.dtype).max_finite / 2))
      fail("dout.scale", fmt::format("{} gives '{}' gradients past {}'s safe range (half its largest finite value)",
                                     c.dout->scale, to_string(c.dout->kind), to_string(c.dtype)));
  }

  // The memory the case needs, before anything (the block-table check below included) allocates for it.
  if (errors.empty()) {
    const std::int64_t bytes = case_bytes(c);
    if (bytes > kMaxCaseBytes)
      fail("seqs", fmt::format("the case needs {} of memory; the limit is {} (core/input_limits.h)",
                               bytes == kSizeSaturated ? std::string("more than 2^63 bytes") : fmt::format("{} bytes", bytes),
                               fmt::format("{} bytes", kMaxCaseBytes)));
  }

  if (errors.empty() && paged && !c.paging.block_table.empty()) {
    const Paging& p = c.paging;
    if (p.block_table.size() != c.seqs.size()) {
      fail("kv.block_table", fmt::format("{} rows for a batch of {}", p.block_table.size(), c.seqs.size()));
    } else {
      std::int64_t pool = p.extra_pages;
      for (const Sequence& s : c.seqs) pool += size_ceil_div(s.k_len, p.page_size);  // bounded by the memory check
      std::map<std::int32_t, std::size_t> owner;  // only the listed pages: never sized by the pool
      for (std::size_t b = 0; b < c.seqs.size(); ++b) {
        const std::int64_t need = size_ceil_div(c.seqs[b].k_len, p.page_size);
        const auto& row = p.block_table[b];
        if (static_cast<std::int64_t>(row.size()) < need) {
          fail(fmt::format("kv.block_table[{}]", b),
               fmt::format("too short: {} pages for k_len {} at page size {} (needs {})", row.size(), c.seqs[b].k_len,
                           p.page_size, need));
          continue;
        }
        for (std::int64_t i = 0; i < need; ++i) {
          const std::int32_t page = row[static_cast<std::size_t>(i)];
          if (page < 0 || page >= pool) {
            fail(fmt::format("kv.block_table[{}][{}]", b, i), fmt::format("page {} is outside the pool [0, {})", page, pool));
          } else if (const auto [it, fresh] = owner.emplace(page, b); !fresh) {
            fail(fmt::format("kv.block_table[{}][{}]", b, i),
                 fmt::format("page {} is already used by seqs[{}]", page, it->second));
          }
        }
      }
    }
  } else if (!paged && !c.paging.block_table.empty()) {
    fail("kv.block_table", "a block table needs \"kv\": {\"storage\": \"paged\"}");
  }
  return errors;
}

std::string summary(const KernelCase& c) {
  std::string lens;
  for (std::size_t b = 0; b < c.seqs.size() && b < 6; ++b) {
    const Sequence& s = c.seqs[b];
    lens += fmt::format("{}{}x{}", b ? "," : "", s.q_len, s.k_len);
    if (c.kv_cache) lens += fmt::format("(c{}+{})", s.cache_len, s.new_len);
    if (s.seqused_k) lens += fmt::format("u{}", *s.seqused_k);
    if (s.leftpad_k) lens += fmt::format("p{}", s.leftpad_k);
  }
  if (c.seqs.size() > 6) lens += ",...";
  std::string out = fmt::format("b{} h{}/{} d{}", c.seqs.size(), c.heads, c.kv_heads, c.head_dim);
  if (c.v_head_dim != c.head_dim) out += fmt::format("/{}", c.v_head_dim);
  out += fmt::format(" {}", to_string(c.dtype));
  if (c.causal) out += c.alignment == Alignment::kBottomRight ? " causal-br" : " causal-tl";
  else if (c.alignment == Alignment::kTopLeft) out += " tl";
  if (c.window != Window{}) out += fmt::format(" win({},{})", c.window.left, c.window.right);
  if (c.softcap > 0) out += fmt::format(" cap{}", c.softcap);
  if (c.kv_storage == KvStorage::kPaged) out += fmt::format(" paged{}", c.paging.page_size);
  if (c.kv_cache) out += " cache";
  if (c.layout != QLayout::kVarlen) out += fmt::format(" {}", to_string(c.layout));
  if (c.kv_strides != KvStrides::kContiguous) out += fmt::format(" kv-{}", to_string(c.kv_strides));
  if (c.slack != Slack{}) out += fmt::format(" slack(q{},kv{})", c.slack.q_rows, c.slack.kv_rows);
  if (c.dout) out += c.dout->kind == DoutKind::kNormal ? " bwd" : fmt::format(" bwd-{}", to_string(c.dout->kind));
  return out + " L[" + lens + "]";
}

}  // namespace flashcheck
