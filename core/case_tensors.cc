#include "core/case_tensors.h"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <memory>

#include "core/geometry.h"
#include "core/recipe.h"
#include "core/rng.h"

namespace flashcheck {
namespace {

std::string shape_str(const std::vector<std::int64_t>& s) { return fmt::format("({})", fmt::join(s, ", ")); }

}  // namespace

TensorShapes tensor_shapes(const KernelCase& c) {
  const CaseGeometry g = geometry(c);
  TensorShapes s;
  s.q = {g.q_rows, c.heads, c.head_dim};
  if (c.kv_storage == KvStorage::kPaged) {
    s.k = {g.num_pages, c.paging.page_size, c.kv_heads, c.head_dim};
    s.v = {g.num_pages, c.paging.page_size, c.kv_heads, c.v_head_dim};
  } else {
    s.k = {g.kv_rows, c.kv_heads, c.head_dim};
    s.v = {g.kv_rows, c.kv_heads, c.v_head_dim};
  }
  if (c.kv_cache) {
    s.k_new = {g.total_new, c.kv_heads, c.head_dim};
    s.v_new = {g.total_new, c.kv_heads, c.v_head_dim};
  }
  if (c.backward()) s.dout = {g.q_rows, c.heads, c.v_head_dim};
  return s;
}

HostTensor::HostTensor(std::vector<std::int64_t> s, float fill) : shape(std::move(s)) {
  data.assign(static_cast<std::size_t>(numel()), fill);
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

CaseTensors materialize(const KernelCase& c) {
  return materialize(c, [&c](TensorId t, std::int64_t b, std::int64_t pos, std::int64_t h, std::int64_t ch) -> float {
    const auto ub = static_cast<std::uint32_t>(b), up = static_cast<std::uint32_t>(pos),
               uh = static_cast<std::uint32_t>(h), uc = static_cast<std::uint32_t>(ch);
    if (t == TensorId::kDO)
      return round_to_float(c.dtype, dout_value(*c.dout, c.data.seed, ub, up, uh, uc, static_cast<std::uint32_t>(c.v_head_dim)));
    if (t == TensorId::kV && c.data.v_onehot)
      return round_to_float(c.dtype, onehot_value(up, uc, static_cast<std::uint32_t>(c.v_head_dim)));
    const double scale = t == TensorId::kQ ? c.data.q_scale : t == TensorId::kK ? c.data.k_scale : c.data.v_scale;
    return round_to_float(c.dtype, recipe_value(c.data.dist, c.data.seed, t, scale, ub, up, uh, uc));
  });
}

CaseTensors materialize(const KernelCase& c, const ValueSource& src) {
  const CaseGeometry g = geometry(c);
  const TensorShapes shapes = tensor_shapes(c);
  const float poison = c.data.poison ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  CaseTensors t;
  t.q = HostTensor(shapes.q, poison);  // every row of a sequence is written below; slack rows keep the poison
  t.k = HostTensor(shapes.k, poison);
  t.v = HostTensor(shapes.v, poison);
  if (c.kv_cache) {
    t.k_new = HostTensor(shapes.k_new, 0.0f);
    t.v_new = HostTensor(shapes.v_new, 0.0f);
  }
  if (c.backward()) t.dout = HostTensor(shapes.dout, poison);
  t.block_table = block_table(c);
  // One storage row of `dst` from logical element (b, pos) of tensor `id`.
  auto fill_row = [&](HostTensor& dst, std::int64_t row, TensorId id, std::int64_t heads, std::int64_t dim,
                      std::int64_t b, std::int64_t pos) {
    float* out = dst.data.data() + row * heads * dim;
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t ch = 0; ch < dim; ++ch) out[h * dim + ch] = src(id, b, pos, h, ch);
  };
  for (std::size_t bi = 0; bi < c.seqs.size(); ++bi) {
    const auto b = static_cast<std::int64_t>(bi);
    const SeqGeometry& s = g.seqs[bi];
    for (std::int64_t i = 0; i < s.lq; ++i) fill_row(t.q, s.q_start + i, TensorId::kQ, c.heads, c.head_dim, b, i);
    if (c.backward())
      for (std::int64_t i = 0; i < s.lq; ++i) fill_row(t.dout, s.q_start + i, TensorId::kDO, c.heads, c.v_head_dim, b, i);
    // Cache positions [cache_len, cache_len + new_len) are written by the kernel from K_new: they stay
    // poisoned in the cache, like every allocated position outside [p0, kv_end).
    const std::int64_t cached_end = c.kv_cache ? c.seqs[bi].cache_len : s.kv_end;
    for (std::int64_t p = s.p0; p < cached_end; ++p) {
      const std::int64_t row = c.kv_storage == KvStorage::kPaged
                                   ? static_cast<std::int64_t>(t.block_table[bi][static_cast<std::size_t>(p / c.paging.page_size)]) *
                                             c.paging.page_size + p % c.paging.page_size
                                   : s.k_start + p;
      fill_row(t.k, row, TensorId::kK, c.kv_heads, c.head_dim, b, p);
      fill_row(t.v, row, TensorId::kV, c.kv_heads, c.v_head_dim, b, p);
    }
    if (c.kv_cache) {
      // A new token takes the value of its logical position: the same case without a cache has the same
      // keys, which the chunked-prefill property relies on.
      for (std::int64_t n = 0; n < c.seqs[bi].new_len; ++n) {
        const std::int64_t p = c.seqs[bi].cache_len + n;
        fill_row(t.k_new, s.new_start + n, TensorId::kK, c.kv_heads, c.head_dim, b, p);
        fill_row(t.v_new, s.new_start + n, TensorId::kV, c.kv_heads, c.v_head_dim, b, p);
      }
    }
  }
  return t;
}

ValueSource logical_values(const KernelCase& c, const CaseTensors& t) {
  auto g = std::make_shared<CaseGeometry>(geometry(c));
  return [&c, &t, g](TensorId id, std::int64_t b, std::int64_t pos, std::int64_t h, std::int64_t ch) -> float {
    const SeqGeometry& s = g->seqs[static_cast<std::size_t>(b)];
    if (id == TensorId::kQ) return t.q.data[static_cast<std::size_t>(((s.q_start + pos) * c.heads + h) * c.head_dim + ch)];
    if (id == TensorId::kDO) return t.dout.data[static_cast<std::size_t>(((s.q_start + pos) * c.heads + h) * c.v_head_dim + ch)];
    const std::int64_t dim = id == TensorId::kK ? c.head_dim : c.v_head_dim;
    const Sequence& seq = c.seqs[static_cast<std::size_t>(b)];
    if (c.kv_cache && pos >= seq.cache_len) {
      const HostTensor& src = id == TensorId::kK ? t.k_new : t.v_new;
      return src.data[static_cast<std::size_t>(((s.new_start + pos - seq.cache_len) * c.kv_heads + h) * dim + ch)];
    }
    const std::int64_t row = c.kv_storage == KvStorage::kPaged
                                 ? static_cast<std::int64_t>(t.block_table[static_cast<std::size_t>(b)][static_cast<std::size_t>(pos / c.paging.page_size)]) *
                                           c.paging.page_size + pos % c.paging.page_size
                                 : s.k_start + pos;
    const HostTensor& src = id == TensorId::kK ? t.k : t.v;
    return src.data[static_cast<std::size_t>((row * c.kv_heads + h) * dim + ch)];
  };
}

std::string check_shapes(const KernelCase& c, const CaseTensors& t) {
  const TensorShapes s = tensor_shapes(c);
  const std::pair<const char*, std::pair<const HostTensor*, const std::vector<std::int64_t>*>> items[] = {
      {"q", {&t.q, &s.q}}, {"k", {&t.k, &s.k}}, {"v", {&t.v, &s.v}}, {"k_new", {&t.k_new, &s.k_new}},
      {"v_new", {&t.v_new, &s.v_new}}, {"dout", {&t.dout, &s.dout}}};
  for (const auto& [name, pair] : items) {
    const auto& [tensor, want] = pair;
    if (tensor->shape != *want)
      return fmt::format("tensor '{}' has shape {}, the case needs {}", name, shape_str(tensor->shape),
                         shape_str(*want));
    if (static_cast<std::int64_t>(tensor->data.size()) != tensor->numel())
      return fmt::format("tensor '{}' holds {} values for shape {}", name, tensor->data.size(), shape_str(tensor->shape));
  }
  if (c.kv_storage == KvStorage::kPaged && t.block_table != block_table(c))
    return "the block table does not match the case's";
  return "";
}

}  // namespace flashcheck
