#include "core/kernel_case.h"

#include <array>
#include <cmath>
#include <fmt/format.h>
#include <utility>

#include "core/geometry.h"

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

// Limits that keep the counter layout of core/rng.h collision-free and a case inside host memory.
constexpr std::int64_t kMaxHeads = 65535;
constexpr std::int64_t kMaxHeadDim = 65535;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 31;

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

double KernelCase::softmax_scale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

std::vector<FieldError> validate(const KernelCase& c) {
  std::vector<FieldError> errors;
  auto fail = [&](std::string field, std::string reason) { errors.push_back({std::move(field), std::move(reason)}); };

  if (c.seqs.empty()) fail("seqs", "the batch is empty: a case needs at least one sequence");
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
  if (!std::isfinite(c.softcap) || c.softcap < 0) fail("softcap", fmt::format("{} must be finite and >= 0", c.softcap));
  if (c.scale && (!std::isfinite(*c.scale) || *c.scale == 0))
    fail("scale", fmt::format("{} must be finite and non-zero", *c.scale));
  if (c.kv_strides == KvStrides::kExpanded && c.kv_heads != 1)
    fail("kv.strides", fmt::format("expanded K/V broadcast one KV head; kv_heads is {}", c.kv_heads));

  std::int64_t needed_pages = 0;
  for (std::size_t b = 0; b < c.seqs.size(); ++b) {
    const Sequence& s = c.seqs[b];
    const std::string at = fmt::format("seqs[{}]", b);
    if (s.q_len < 0) fail(at + ".q_len", fmt::format("negative length {}", s.q_len));
    if (s.k_len < 0) fail(at + ".k_len", fmt::format("negative length {}", s.k_len));
    if (s.q_len > 0xFFFFFFFFll || s.k_len > 0xFFFFFFFFll) fail(at, "length exceeds 2^32 - 1");
    std::int64_t kv_end = s.k_len;
    if (c.kv_cache) {
      if (s.seqused_k) fail(at + ".seqused_k", "seqused_k cannot be combined with kv_cache (cache_len decides)");
      if (s.cache_len < 0) fail(at + ".cache_len", fmt::format("negative length {}", s.cache_len));
      if (s.new_len < 0) fail(at + ".new_len", fmt::format("negative length {}", s.new_len));
      if (s.cache_len + s.new_len > s.k_len)
        fail(at + ".new_len", fmt::format("cache_len {} + new_len {} exceeds the cache capacity k_len {}", s.cache_len,
                                          s.new_len, s.k_len));
      kv_end = s.cache_len + s.new_len;
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
    if (s.leftpad_k < 0) fail(at + ".leftpad_k", fmt::format("negative length {}", s.leftpad_k));
    if (s.leftpad_k > kv_end && kv_end >= 0)
      fail(at + ".leftpad_k", fmt::format("leftpad_k {} is past the end of the used keys ({})", s.leftpad_k, kv_end));
    if (c.kv_storage == KvStorage::kPaged && c.paging.page_size >= 1 && s.k_len >= 0)
      needed_pages += (s.k_len + c.paging.page_size - 1) / c.paging.page_size;
  }

  if (c.kv_storage == KvStorage::kPaged) {
    const Paging& p = c.paging;
    if (p.page_size < 1) fail("kv.page_size", fmt::format("page size {} must be >= 1", p.page_size));
    if (p.extra_pages < 0) fail("kv.extra_pages", fmt::format("negative count {}", p.extra_pages));
    if (!p.block_table.empty() && p.page_size >= 1) {
      if (p.block_table.size() != c.seqs.size()) {
        fail("kv.block_table", fmt::format("{} rows for a batch of {}", p.block_table.size(), c.seqs.size()));
      } else {
        const std::int64_t pool = needed_pages + std::max<std::int64_t>(p.extra_pages, 0);
        std::vector<int> owner(static_cast<std::size_t>(std::max<std::int64_t>(pool, 0)), -1);
        for (std::size_t b = 0; b < c.seqs.size(); ++b) {
          const std::int64_t need = (c.seqs[b].k_len + p.page_size - 1) / p.page_size;
          const auto& row = p.block_table[b];
          if (static_cast<std::int64_t>(row.size()) < need) {
            fail(fmt::format("kv.block_table[{}]", b),
                 fmt::format("too short: {} pages for k_len {} at page size {} (needs {})", row.size(),
                             c.seqs[b].k_len, p.page_size, need));
            continue;
          }
          for (std::int64_t i = 0; i < need; ++i) {
            const std::int32_t page = row[static_cast<std::size_t>(i)];
            if (page < 0 || page >= pool) {
              fail(fmt::format("kv.block_table[{}][{}]", b, i),
                   fmt::format("page {} is outside the pool [0, {})", page, pool));
            } else if (owner[static_cast<std::size_t>(page)] >= 0) {
              fail(fmt::format("kv.block_table[{}][{}]", b, i),
                   fmt::format("page {} is already used by seqs[{}]", page, owner[static_cast<std::size_t>(page)]));
            } else {
              owner[static_cast<std::size_t>(page)] = static_cast<int>(b);
            }
          }
        }
      }
    }
  } else if (!c.paging.block_table.empty()) {
    fail("kv.block_table", "a block table needs \"kv\": {\"storage\": \"paged\"}");
  }

  for (const auto& [field, v] : {std::pair{"data.q_scale", c.data.q_scale}, std::pair{"data.k_scale", c.data.k_scale},
                                 std::pair{"data.v_scale", c.data.v_scale}})
    if (!std::isfinite(v) || v < 0) fail(field, fmt::format("{} must be finite and >= 0", v));

  if (errors.empty()) {
    const CaseGeometry g = geometry(c);
    const std::int64_t q_elems = g.total_q * c.heads * std::max(c.head_dim, c.v_head_dim);
    const std::int64_t k_elems = (g.kv_rows + g.total_new) * c.kv_heads * std::max(c.head_dim, c.v_head_dim);
    if (q_elems > kMaxElements || k_elems > kMaxElements)
      fail("seqs", fmt::format("the case needs {} query and {} key elements; the host limit is {}", q_elems, k_elems,
                               kMaxElements));
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
  return out + " L[" + lens + "]";
}

}  // namespace flashcheck
