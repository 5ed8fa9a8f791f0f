#include "kernels/native/tiled_cpu.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "kernels/flash_args.h"

namespace flashcheck {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// K/V as the kernel sees them: rows of storage with their own strides, so that gapped and expanded
// (stride-0 head) layouts go through the same addressing as contiguous ones.
struct KvView {
  const float* k;
  const float* v;
  std::int64_t row_stride_k, head_stride_k, row_stride_v, head_stride_v;
  std::int64_t heads;  // KV heads as presented (H when expanded)
};

// Builds the kernel's own copy of the KV storage in the case's stride layout. The kvcache API writes
// appended tokens into the cache in place before attending; the copy is that cache.
struct KvStorageCopy {
  std::vector<float> k, v;
  KvView view{};
};

KvStorageCopy prepare_kv(const KernelCase& c, const CaseTensors& in, const FlashArgs& a, const detail::TiledFaults& f) {
  const std::int64_t Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim;
  const std::int64_t rows = in.k.numel() / (Hk * d);
  // Gapped: every row padded by 5 elements and every head by 3; the pads hold NaN that must not be read.
  const bool gapped = c.kv_strides == KvStrides::kGapped;
  const std::int64_t hsk = d + (gapped ? 3 : 0), hsv = dv + (gapped ? 3 : 0);
  const std::int64_t rsk = Hk * hsk + (gapped ? 5 : 0), rsv = Hk * hsv + (gapped ? 5 : 0);
  KvStorageCopy s;
  // One guard row of NaN past the storage: a mutant whose defect reads a row too far (the off-by-one of
  // cu_seqlens_k) reads poison there, as a GPU kernel reads whatever follows its buffer, instead of the heap.
  s.k.assign(static_cast<std::size_t>((rows + 1) * rsk), std::numeric_limits<float>::quiet_NaN());
  s.v.assign(static_cast<std::size_t>((rows + 1) * rsv), std::numeric_limits<float>::quiet_NaN());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t h = 0; h < Hk; ++h) {
      std::copy_n(in.k.data.data() + (r * Hk + h) * d, d, s.k.begin() + r * rsk + h * hsk);
      std::copy_n(in.v.data.data() + (r * Hk + h) * dv, dv, s.v.begin() + r * rsv + h * hsv);
    }
  // Append: new token t of sequence b goes to logical position cache_seqlens[b] + t.
  if (!a.cache_seqlens.empty()) {
    for (std::int32_t b = 0; b < a.batch; ++b) {
      const std::int32_t n0 = a.cu_seqlens_k_new[b], n = a.cu_seqlens_k_new[b + 1] - n0;
      for (std::int32_t t = 0; t < n; ++t) {
        const std::int64_t p = a.cache_seqlens[b] + t;
        std::int64_t row;
        if (a.page_size > 0)
          row = static_cast<std::int64_t>(a.block_table[b * a.max_blocks + p / a.page_size]) * a.page_size + p % a.page_size;
        else
          row = a.cu_seqlens_k[b] + p;
        for (std::int64_t h = 0; h < Hk; ++h) {
          std::copy_n(in.k_new.data.data() + ((n0 + t) * Hk + h) * d, d, s.k.begin() + row * rsk + h * hsk);
          std::copy_n(in.v_new.data.data() + ((n0 + t) * Hk + h) * dv, dv, s.v.begin() + row * rsv + h * hsv);
        }
      }
    }
  }
  s.view = {s.k.data(), s.v.data(), rsk, hsk, rsv, hsv, Hk};
  if (c.kv_strides == KvStrides::kExpanded) {
    // One KV head presented as H heads with head stride 0.
    s.view.heads = c.heads;
    s.view.head_stride_k = 0;
    s.view.head_stride_v = 0;
  }
  (void)f;
  return s;
}

}  // namespace

Contract TiledCpuKernel::tiled_contract(const TiledConfig& cfg) {
  Contract k;
  k.summary = fmt::format("FlashAttention-2 forward algorithm ported to the CPU ({}x{} tiles, fp32 online softmax)",
                          cfg.block_m, cfg.block_n);
  k.bottom_right = Support::kNative;
  k.top_left = Support::kNo;  // flash-attn >= 2.1 has no top-left option (flash-attention#951)
  k.window = k.softcap = k.gqa = k.varlen = k.seqused_k = k.leftpad = k.paged = k.kv_cache = k.zero_length =
      k.dv_differs = k.slack = Support::kNative;
  k.dtypes = {DType::kF16, DType::kBF16, DType::kF32};
  k.max_head_dim = 512;
  k.kv_strides = {KvStrides::kContiguous, KvStrides::kGapped, KvStrides::kExpanded};
  k.empty_row = EmptyRow::kZero;
  k.returns_lse = true;
  k.deterministic = true;
  k.writes_into_buffer = true;
  k.notes = {"LSE of an empty row is +inf (FA2 convention); empty rows are not compared on LSE"};
  k.backward.available = true;
  k.backward.deterministic = true;
  k.backward.zeroes_unused_keys = true;
  k.backward.writes_into_buffer = true;
  k.backward.notes = {"FlashAttention-2's backward: P recomputed per tile from the saved LSE, dpsum = rowsum(dO * O), "
                      "dS rounded to the input dtype for the dQ/dK GEMMs, dK/dV of a KV head summed over its group"};
  return k;
}

TiledCpuKernel::TiledCpuKernel(std::string name, TiledConfig cfg, detail::TiledFaults faults, std::string mutant_description)
    : name_(std::move(name)),
      cfg_(cfg),
      faults_(faults),
      mutant_description_(std::move(mutant_description)),
      contract_(tiled_contract(cfg)) {
  if (cfg.block_m < 1 || cfg.block_n < 1) throw std::invalid_argument("tile sizes must be >= 1");
}

void TiledCpuKernel::run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) {
  const detail::TiledFaults& f = faults_;
  const FlashArgs a = flash_args(c);
  const KvStorageCopy kv = prepare_kv(c, in, a, f);
  const std::int64_t H = c.heads, d = c.head_dim, dv = c.v_head_dim;
  const std::int64_t Hkv = kv.view.heads, group = H / Hkv;
  const DType dt = c.dtype;
  float scale = a.softmax_scale;
  if (f.scale_one_over_d && !c.scale) scale = 1.0f / static_cast<float>(d);
  const float cap = a.softcap;
  const int bm = cfg_.block_m, bn = cfg_.block_n;
  ++runs_;

  std::vector<float> s(static_cast<std::size_t>(bm) * bn), acc(static_cast<std::size_t>(bm) * dv);
  std::vector<float> row_max(static_cast<std::size_t>(bm)), row_sum(static_cast<std::size_t>(bm));
  std::vector<std::int64_t> tiles;

  for (std::int32_t b = 0; b < a.batch; ++b) {
    const std::int64_t q0 = a.cu_seqlens_q[b], lq = a.cu_seqlens_q[b + 1] - q0;
    std::int64_t kv_end;
    if (!a.cache_seqlens.empty()) kv_end = a.cache_seqlens[b] + (a.cu_seqlens_k_new[b + 1] - a.cu_seqlens_k_new[b]);
    else if (!a.seqused_k.empty() && !f.ignore_seqused_k) kv_end = a.seqused_k[b];
    else kv_end = a.cu_seqlens_k[b + 1] - a.cu_seqlens_k[b];
    // The fault: the last sequence's keys run to the end of the K buffer, its length taken from the buffer's
    // rows instead of cu_seqlens_k (harmless until the buffer is longer than the sequences).
    if (f.read_past_end && b == a.batch - 1 && a.page_size == 0 && a.cache_seqlens.empty() && a.seqused_k.empty())
      kv_end = in.k.numel() / (c.kv_heads * c.head_dim) - a.cu_seqlens_k[b];
    const std::int64_t p0 = (!a.leftpad_k.empty() && !f.ignore_leftpad) ? a.leftpad_k[b] : 0;
    const std::int64_t lk = std::max<std::int64_t>(kv_end - p0, 0);
    const std::int64_t off = f.top_left_causal ? 0 : lk - lq;
    // A read past the last key tile that faults: the process dies, as a kernel with a bad address does.
    if (f.segfault_tile_overrun && lk > 32 && lk % 32 == 1) std::raise(SIGSEGV);
    std::int64_t k_seg = a.cu_seqlens_k[b];
    if (f.cu_seqlens_k_off_by_one && b > 0) k_seg += 1;

    // Storage row of key j (logical position p0 + j).
    auto key_row = [&](std::int64_t j) -> std::int64_t {
      const std::int64_t p = p0 + j;
      if (a.page_size > 0) {
        std::int64_t page_of = p / a.page_size;
        if (f.page_boundary && p >= a.page_size && p % a.page_size == 0) page_of -= 1;
        return static_cast<std::int64_t>(a.block_table[b * a.max_blocks + page_of]) * a.page_size + p % a.page_size;
      }
      return k_seg + p;
    };

    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t kh = f.kv_head_modulo ? h % Hkv : h / group;
      for (std::int64_t m0 = 0; m0 < lq; m0 += bm) {
        const std::int64_t m1 = std::min<std::int64_t>(m0 + bm, lq), rows = m1 - m0;
        // Key tiles that can hold a visible key for some row of this query tile (FA2's n_block_min/max).
        std::int64_t n_hi = lk;
        if (a.window_right >= 0) n_hi = std::min<std::int64_t>(n_hi, m1 - 1 + off + a.window_right + 1);
        std::int64_t n_lo = 0;
        if (a.window_left >= 0) n_lo = std::max<std::int64_t>(0, m0 + off - a.window_left);
        const std::int64_t t_lo = n_lo / bn, t_hi = n_hi > 0 ? (n_hi + bn - 1) / bn : 0;
        tiles.clear();
        for (std::int64_t t = t_lo; t < t_hi; ++t) tiles.push_back(t);
        if (f.drop_last_partial_tile && !tiles.empty() && lk % bn != 0 && tiles.back() == lk / bn) tiles.pop_back();
        if (f.nondeterministic_order && tiles.size() > 1)
          std::rotate(tiles.begin(), tiles.begin() + static_cast<std::ptrdiff_t>(runs_ % tiles.size()), tiles.end());

        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(row_max.begin(), row_max.end(), kNegInf);
        std::fill(row_sum.begin(), row_sum.end(), 0.0f);
        for (std::int64_t t : tiles) {
          const std::int64_t n0 = t * bn, n1 = std::min<std::int64_t>(n0 + bn, lk), cols = n1 - n0;
          // S = Q K^T with fp32 accumulation, then scale / softcap, then the mask.
          for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t i = m0 + r;
            const float* q = in.q.data.data() + ((q0 + i) * H + h) * d;
            for (std::int64_t cj = 0; cj < cols; ++cj) {
              const std::int64_t j = n0 + cj;
              const float* k = kv.view.k + key_row(j) * kv.view.row_stride_k + kh * kv.view.head_stride_k;
              float dot = 0.0f;
              for (std::int64_t x = 0; x < d; ++x) dot += q[x] * k[x];
              float logit;
              if (cap > 0 && !f.softcap_after_mask) {
                logit = f.softcap_before_scale ? cap * std::tanh(dot / cap) * scale : cap * std::tanh(dot * (scale / cap));
              } else {
                logit = dot * scale;
              }
              bool masked = false;
              if (a.window_right >= 0 && j > i + off + a.window_right) masked = true;
              if (a.window_left >= 0 && (f.window_left_off_by_one ? j <= i + off - a.window_left : j < i + off - a.window_left))
                masked = true;
              if (masked) logit = kNegInf;
              if (cap > 0 && f.softcap_after_mask) logit = cap * std::tanh(logit * (1.0f / cap));
              s[static_cast<std::size_t>(r * bn + cj)] = logit;
            }
          }
          // Online softmax update of this tile.
          for (std::int64_t r = 0; r < rows; ++r) {
            float* srow = s.data() + r * bn;
            float m_new = row_max[static_cast<std::size_t>(r)];
            for (std::int64_t cj = 0; cj < cols; ++cj)
              if (srow[cj] > m_new || std::isnan(srow[cj])) m_new = srow[cj];  // a NaN logit must surface
            // A row still without a visible key keeps a finite base (FA2's Check_inf): exp(-inf - 0) = 0.
            const float base = m_new == kNegInf ? 0.0f : m_new;
            const float correction = f.skip_rescale ? 1.0f : std::exp(row_max[static_cast<std::size_t>(r)] - base);
            row_max[static_cast<std::size_t>(r)] = m_new;
            float sum = 0.0f;
            float* o = acc.data() + r * dv;
            for (std::int64_t x = 0; x < dv; ++x) o[x] *= correction;
            for (std::int64_t cj = 0; cj < cols; ++cj) {
              const float p = std::exp(srow[cj] - base);
              sum += p;
              const float p_lo = round_float(dt, p);  // FA2 converts P to the input dtype for P.V
              const float* v = kv.view.v + key_row(n0 + cj) * kv.view.row_stride_v + kh * kv.view.head_stride_v;
              if (f.lowp_accumulation)
                for (std::int64_t x = 0; x < dv; ++x) o[x] = round_float(dt, o[x] + round_float(dt, p_lo * v[x]));
              else
                for (std::int64_t x = 0; x < dv; ++x) o[x] += p_lo * v[x];
            }
            row_sum[static_cast<std::size_t>(r)] = row_sum[static_cast<std::size_t>(r)] * correction + sum;
          }
        }
        // Epilogue: normalize, round once, write rows (and the LSE).
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t i = m0 + r;
          if (f.skip_last_row && i == lq - 1) continue;
          const float l = row_sum[static_cast<std::size_t>(r)];
          const bool empty = l == 0.0f;  // a NaN sum is not empty: it propagates into the output
          float* dst = out.out() + ((q0 + i) * H + h) * dv;
          for (std::int64_t x = 0; x < dv; ++x) {
            float val;
            if (!empty) val = acc[static_cast<std::size_t>(r * dv + x)] / l;
            else if (f.empty_row_nan) val = std::numeric_limits<float>::quiet_NaN();
            else if (f.empty_row_mean) {
              float mean = 0.0f;
              for (std::int64_t j = 0; j < lk; ++j)
                mean += kv.view.v[key_row(j) * kv.view.row_stride_v + kh * kv.view.head_stride_v + x];
              val = lk > 0 ? mean / static_cast<float>(lk) : 0.0f;
            } else val = 0.0f;
            dst[x] = round_float(dt, val);
          }
          const std::int64_t src_r = f.lse_next_row && r + 1 < rows ? r + 1 : r;
          const float src_l = row_sum[static_cast<std::size_t>(src_r)];
          float lse = src_l == 0.0f ? std::numeric_limits<float>::infinity()
                                    : row_max[static_cast<std::size_t>(src_r)] + std::log(src_l);
          if (f.lse_shift) lse += 1e-3f;
          if (f.lse_base2) lse *= 1.4426950408889634f;
          out.lse()[(q0 + i) * H + h] = lse;
        }
      }
    }
  }
  if (f.write_past_end) {
    const std::int64_t total = a.cu_seqlens_q.back();
    for (std::int64_t x = 0; x < H * dv; ++x) out.out()[total * H * dv + x] = 0.0f;
  }
  if (f.lse_padded_order) {
    // Row i of sequence b was computed into padded slot b * max_q + i; the packed LSE reads slot q0 + i.
    const std::int64_t total = a.cu_seqlens_q.back();
    std::int64_t max_q = 0;
    for (std::int32_t b = 0; b < a.batch; ++b) max_q = std::max<std::int64_t>(max_q, a.cu_seqlens_q[b + 1] - a.cu_seqlens_q[b]);
    std::vector<float> padded(static_cast<std::size_t>(a.batch * max_q * H), std::numeric_limits<float>::infinity());
    for (std::int32_t b = 0; b < a.batch; ++b)
      for (std::int64_t i = 0; i < a.cu_seqlens_q[b + 1] - a.cu_seqlens_q[b]; ++i)
        for (std::int64_t h = 0; h < H; ++h)
          padded[static_cast<std::size_t>((b * max_q + i) * H + h)] = out.lse()[(a.cu_seqlens_q[b] + i) * H + h];
    for (std::int64_t row = 0; row < total; ++row)
      for (std::int64_t h = 0; h < H; ++h) out.lse()[row * H + h] = padded[static_cast<std::size_t>(row * H + h)];
  }
  out.lse_written = true;
}

void register_tiled_cpu_kernels(Registry& r) {
  r.add(std::make_unique<TiledCpuKernel>("tiled-cpu", TiledConfig{64, 64}));
  r.add(std::make_unique<TiledCpuKernel>("tiled-cpu-16x32", TiledConfig{16, 32}));
}

}  // namespace flashcheck
