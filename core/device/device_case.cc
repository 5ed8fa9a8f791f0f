#include "core/device/device_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/device/device_memory.h"
#include "core/device/recipe_fill.h"
#include "core/recipe.h"

namespace flashcheck::device {
namespace {

std::vector<std::int64_t> shape_of(const KernelCase& c, const CaseGeometry& g, TensorId t, bool is_new) {
  const std::int64_t dim = t == TensorId::kV ? c.v_head_dim : c.head_dim;
  if (t == TensorId::kQ) return {g.q_rows, c.heads, c.head_dim};
  if (t == TensorId::kDO) return {g.q_rows, c.heads, c.v_head_dim};
  if (is_new) return {g.total_new, c.kv_heads, dim};
  if (c.kv_storage == KvStorage::kPaged) return {g.num_pages, c.paging.page_size, c.kv_heads, dim};
  return {g.kv_rows, c.kv_heads, dim};
}

std::size_t numel(const std::vector<std::int64_t>& s) {
  std::size_t n = 1;
  for (std::int64_t d : s) n *= static_cast<std::size_t>(d);
  return n;
}

// Magnitudes from which a product of two inputs, summed over a head dim, could overflow fp32 (2^60 squared
// is 2^120, times 256 terms 2^128): such cases are no tensor-core material.
constexpr double kHugeInput = 0x1.0p60;

// Whether every value the recipe can produce is finite in the case's dtype and below kHugeInput.
bool recipe_is_finite(const KernelCase& c) {
  const double largest = std::max({std::fabs(c.data.q_scale), std::fabs(c.data.k_scale), std::fabs(c.data.v_scale)});
  return recipe_fits_dtype(c.data.dist, largest, c.dtype) && largest * recipe_magnitude_bound(c.data.dist) < kHugeInput;
}

// Whether the rows of `h` that the sequences use (sources with b >= 0) hold finite, not huge values only; slack and
// unused cache rows (poison) do not count.
bool rows_are_finite(const HostTensor& h, const std::vector<RowSource>& rows) {
  if (h.empty() || rows.empty()) return true;
  const std::size_t per_row = h.data.size() / rows.size();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].b < 0) continue;
    for (std::size_t x = 0; x < per_row; ++x)
      if (!(std::fabs(h.data[r * per_row + x]) < kHugeInput)) return false;  // NaN and infinities fail too
  }
  return true;
}

}  // namespace

struct DeviceCase::Staging {
  std::vector<unsigned char> bytes;
  // Appends an array aligned to 16 bytes and returns its offset.
  template <typename T>
  std::size_t add(const std::vector<T>& v) {
    const std::size_t at = (bytes.size() + 15) / 16 * 16;
    bytes.resize(at + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(bytes.data() + at, v.data(), v.size() * sizeof(T));
    return at;
  }
  std::size_t q_rows = 0, k_rows = 0, new_rows = 0;  // offsets of the row maps
  std::vector<RowSource> q_src, k_src, new_src;      // the row maps themselves, on the host
  std::size_t n_q = 0, n_k = 0, n_new = 0;
};

void DeviceCase::upload_metadata(Staging& st, bool with_row_maps) {
  g_ = flashcheck::geometry(c_);
  std::vector<DeviceSeq> seqs;
  std::vector<std::int32_t> row_seq(static_cast<std::size_t>(g_.total_q));
  for (std::size_t b = 0; b < c_.seqs.size(); ++b) {
    const SeqGeometry& s = g_.seqs[b];
    seqs.push_back({static_cast<std::int32_t>(s.q_start), static_cast<std::int32_t>(s.lq),
                    static_cast<std::int32_t>(s.k_start), static_cast<std::int32_t>(s.new_start),
                    static_cast<std::int32_t>(s.p0), static_cast<std::int32_t>(s.lk),
                    static_cast<std::int32_t>(c_.kv_cache ? c_.seqs[b].cache_len : -1),
                    static_cast<std::int32_t>(diagonal_offset(c_.alignment, s.lq, s.lk))});
    for (std::int64_t i = 0; i < s.lq; ++i) row_seq[static_cast<std::size_t>(s.q_start + i)] = static_cast<std::int32_t>(b);
  }
  const std::size_t at_seqs = st.add(seqs), at_rows = st.add(row_seq);
  std::size_t at_table = 0;
  const auto table = block_table(c_);
  if (c_.kv_storage == KvStorage::kPaged) {
    for (const auto& row : table) in_.max_blocks = std::max(in_.max_blocks, static_cast<std::int32_t>(row.size()));
    std::vector<std::int32_t> flat(c_.seqs.size() * static_cast<std::size_t>(std::max(in_.max_blocks, 1)), -1);
    for (std::size_t b = 0; b < table.size(); ++b)
      std::copy(table[b].begin(), table[b].end(), flat.begin() + static_cast<std::ptrdiff_t>(b * in_.max_blocks));
    at_table = st.add(flat);
  }
  if (with_row_maps) {
    // What every storage row holds, in the order the host's materialize writes (a later write wins), so
    // that one launch can fill each tensor completely, poison rows included.
    const std::vector<std::int64_t> kv_shape = shape_of(c_, g_, TensorId::kK, false);
    std::vector<RowSource> q_rows(static_cast<std::size_t>(g_.q_rows), RowSource{-1, 0});
    std::vector<RowSource> k_rows(static_cast<std::size_t>(c_.kv_storage == KvStorage::kPaged ? kv_shape[0] * kv_shape[1] : kv_shape[0]),
                                  RowSource{-1, 0});
    std::vector<RowSource> new_rows(static_cast<std::size_t>(c_.kv_cache ? g_.total_new : 0), RowSource{-1, 0});
    for (std::size_t bi = 0; bi < c_.seqs.size(); ++bi) {
      const SeqGeometry& s = g_.seqs[bi];
      const auto b = static_cast<std::int32_t>(bi);
      for (std::int64_t i = 0; i < s.lq; ++i) q_rows[static_cast<std::size_t>(s.q_start + i)] = {b, static_cast<std::int32_t>(i)};
      const std::int64_t cached_end = c_.kv_cache ? c_.seqs[bi].cache_len : s.kv_end;
      for (std::int64_t p = s.p0; p < cached_end; ++p) {
        const std::int64_t row = c_.kv_storage == KvStorage::kPaged
                                     ? static_cast<std::int64_t>(table[bi][static_cast<std::size_t>(p / c_.paging.page_size)]) *
                                               c_.paging.page_size + p % c_.paging.page_size
                                     : s.k_start + p;
        k_rows[static_cast<std::size_t>(row)] = {b, static_cast<std::int32_t>(p)};
      }
      if (c_.kv_cache)
        for (std::int64_t n = 0; n < c_.seqs[bi].new_len; ++n)
          new_rows[static_cast<std::size_t>(s.new_start + n)] = {b, static_cast<std::int32_t>(c_.seqs[bi].cache_len + n)};
    }
    st.q_rows = st.add(q_rows);
    st.k_rows = st.add(k_rows);
    st.new_rows = st.add(new_rows);
    st.n_q = q_rows.size();
    st.n_k = k_rows.size();
    st.n_new = new_rows.size();
    st.q_src = std::move(q_rows);
    st.k_src = std::move(k_rows);
    st.new_src = std::move(new_rows);
  }
  auto* dev = slot_of<unsigned char>(slot_ + ".meta", st.bytes.size());
  copy_to_device(dev, st.bytes.data(), st.bytes.size());
  in_.seqs = reinterpret_cast<const DeviceSeq*>(dev + at_seqs);
  in_.row_seq = reinterpret_cast<const std::int32_t*>(dev + at_rows);
  if (c_.kv_storage == KvStorage::kPaged) in_.block_table = reinterpret_cast<const std::int32_t*>(dev + at_table);
  st.bytes.assign(1, 0);
  base_ = dev;
}

DeviceCase::DeviceCase(const KernelCase& c, const std::string& slot) : c_(c), slot_(slot) {
  Staging st;
  upload_metadata(st, true);
  const float poison = c_.data.poison ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  TensorFill fills[kMaxTensorFills];
  int n_fills = 0;
  auto make = [&](const char* name, TensorId t, bool is_new, std::size_t rows_at, std::size_t n_rows, float fill) -> float* {
    auto* dst = slot_of<float>(slot_ + "." + name, numel(shape_of(c_, g_, t, is_new)));
    TensorFill& f = fills[n_fills++];
    f.dst = dst;
    f.rows = reinterpret_cast<const RowSource*>(base_ + rows_at);
    f.n_rows = static_cast<std::int64_t>(n_rows);
    f.heads = static_cast<std::uint32_t>(t == TensorId::kQ || t == TensorId::kDO ? c_.heads : c_.kv_heads);
    f.dim = static_cast<std::uint32_t>(t == TensorId::kV || t == TensorId::kDO ? c_.v_head_dim : c_.head_dim);
    f.id = t;
    f.scale = t == TensorId::kQ ? c_.data.q_scale : t == TensorId::kK ? c_.data.k_scale : c_.data.v_scale;
    f.onehot = t == TensorId::kV && c_.data.v_onehot;
    f.fill = fill;
    return dst;
  };
  in_.q = make("q", TensorId::kQ, false, st.q_rows, st.n_q, poison);  // slack rows keep the poison
  in_.k = make("k", TensorId::kK, false, st.k_rows, st.n_k, poison);
  in_.v = make("v", TensorId::kV, false, st.k_rows, st.n_k, poison);
  if (c_.kv_cache) {
    in_.k_new = make("k_new", TensorId::kK, true, st.new_rows, st.n_new, 0.0f);
    in_.v_new = make("v_new", TensorId::kV, true, st.new_rows, st.n_new, 0.0f);
  }
  if (c_.backward()) in_.dout = make("dout", TensorId::kDO, false, st.q_rows, st.n_q, poison);
  fill_tensors(fills, n_fills, c_.data, c_.dtype, c_.backward() ? *c_.dout : DoutRecipe{});
  finite_ = recipe_is_finite(c_);
  check_last("materialize on device");
}

DeviceCase::DeviceCase(const KernelCase& c, const CaseTensors& t, const std::string& slot) : c_(c), slot_(slot) {
  Staging st;
  upload_metadata(st, true);
  finite_ = rows_are_finite(t.q, st.q_src) && rows_are_finite(t.k, st.k_src) && rows_are_finite(t.v, st.k_src) &&
            rows_are_finite(t.k_new, st.new_src) && rows_are_finite(t.v_new, st.new_src);
  auto up = [&](const char* name, const HostTensor& h) -> const float* {
    if (h.empty()) return nullptr;
    auto* dst = slot_of<float>(slot_ + "." + name, h.data.size());
    copy_to_device(dst, h.data.data(), h.data.size() * sizeof(float));
    return dst;
  };
  in_.q = up("q", t.q);
  in_.k = up("k", t.k);
  in_.v = up("v", t.v);
  in_.k_new = up("k_new", t.k_new);
  in_.v_new = up("v_new", t.v_new);
  in_.dout = up("dout", t.dout);
}

CaseTensors DeviceCase::download() const {
  CaseTensors t;
  auto down = [&](HostTensor& h, const float* src, std::vector<std::int64_t> shape) {
    if (!src) return;
    h = HostTensor(std::move(shape), 0.0f);
    copy_to_host(h.data.data(), src, h.data.size() * sizeof(float));
  };
  down(t.q, in_.q, shape_of(c_, g_, TensorId::kQ, false));
  down(t.k, in_.k, shape_of(c_, g_, TensorId::kK, false));
  down(t.v, in_.v, shape_of(c_, g_, TensorId::kV, false));
  if (c_.kv_cache) {
    down(t.k_new, in_.k_new, shape_of(c_, g_, TensorId::kK, true));
    down(t.v_new, in_.v_new, shape_of(c_, g_, TensorId::kV, true));
  }
  down(t.dout, in_.dout, shape_of(c_, g_, TensorId::kDO, false));
  t.block_table = block_table(c_);
  return t;
}

}  // namespace flashcheck::device
