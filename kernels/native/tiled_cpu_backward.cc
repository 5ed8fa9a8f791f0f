// tiled-cpu's backward: FlashAttention-2's algorithm (flash-attention csrc/flash_attn/src/flash_bwd_kernel.h) on
// the CPU. Per sequence and query head: dpsum D_i = rowsum(dO_i * O_i) from the forward's rounded output; then key
// tiles in the outer loop and the query tiles that can see them in the inner one, recomputing P = exp(s - LSE_i)
// from the forward's LSE (+inf on rows without a key, so that they contribute nothing); dV += rd(P)^T dO;
// dP = dO V^T; dS = P (dP - D) (times 1 - tanh^2 with softcap); dK += rd(dS)^T Q and dQ += rd(dS) K in fp32; the
// scale applied at the end. dK/dV of a KV head: the group's per-head gradients, rounded, then summed. Allocated
// keys outside a sequence get zeros; slack rows are left as they are.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>
#include <stdexcept>

#include "kernels/flash_args.h"
#include "kernels/native/tiled_cpu.h"

namespace flashcheck {

void TiledCpuKernel::run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, GradBuffer& grads) {
  const detail::TiledFaults& f = faults_;
  if (!c.backward() || c.kv_storage != KvStorage::kPacked || c.kv_cache)
    throw std::invalid_argument("tiled-cpu backward: needs a backward case with packed K/V and no cache");
  if (!fwd.lse_written) throw std::invalid_argument("tiled-cpu backward: the forward wrote no LSE");
  const FlashArgs a = flash_args(c);
  const std::int64_t H = c.heads, Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim, group = H / Hk;
  const DType dt = c.dtype;
  const float scale = a.softmax_scale, cap = a.softcap;
  const int bm = cfg_.block_m, bn = cfg_.block_n;
  ++runs_;
  const float* q = in.q.data.data();
  const float* k = in.k.data.data();
  const float* v = in.v.data.data();
  const float* dout = in.dout.data.data();
  const float* out = fwd.out();
  const float* lse = fwd.lse();

  std::vector<float> dq_acc, dk_head, dv_head, dk_group, dv_group, dpsum;
  std::vector<std::int64_t> tiles;
  for (std::int32_t b = 0; b < a.batch; ++b) {
    const std::int64_t q0 = a.cu_seqlens_q[b], lq = a.cu_seqlens_q[b + 1] - q0;
    const std::int64_t seg = a.cu_seqlens_k[b], alloc = a.cu_seqlens_k[b + 1] - seg;
    const std::int64_t kv_end = a.seqused_k.empty() ? alloc : a.seqused_k[b];
    const std::int64_t p0 = a.leftpad_k.empty() ? 0 : a.leftpad_k[b];
    const std::int64_t lk = std::max<std::int64_t>(kv_end - p0, 0);
    const std::int64_t off = lk - lq;
    if (f.bw_segfault_tile_overrun && lk > 32 && lk % 32 == 1) std::raise(SIGSEGV);
    const std::int64_t krow0 = seg + p0;  // storage row of key 0
    dq_acc.assign(static_cast<std::size_t>(lq * H * d), 0.0f);
    dk_group.assign(static_cast<std::size_t>(lk * Hk * d), 0.0f);
    dv_group.assign(static_cast<std::size_t>(lk * Hk * dv), 0.0f);
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t kh = h / group;
      // dpsum from the output the forward wrote (rounded to the dtype), in fp32.
      dpsum.assign(static_cast<std::size_t>(lq), 0.0f);
      for (std::int64_t i = 0; i < lq; ++i) {
        const float* o = out + ((q0 + i) * H + h) * dv;
        const float* g = dout + ((q0 + i) * H + h) * dv;
        float acc = 0.0f;
        for (std::int64_t x = 0; x < dv; ++x) acc += g[x] * o[x];
        dpsum[static_cast<std::size_t>(i)] = acc;
      }
      if (f.bw_dpsum_wrong_row)
        for (std::int64_t i = 0; i + 1 < lq; ++i)
          if ((i + 1) % bm != 0) dpsum[static_cast<std::size_t>(i)] = dpsum[static_cast<std::size_t>(i + 1)];
      dk_head.assign(static_cast<std::size_t>(lk * d), 0.0f);
      dv_head.assign(static_cast<std::size_t>(lk * dv), 0.0f);
      tiles.clear();
      for (std::int64_t t = 0; t * bn < lk; ++t) tiles.push_back(t);
      if (f.bw_nondeterministic_dq && tiles.size() > 1)
        std::rotate(tiles.begin(), tiles.begin() + static_cast<std::ptrdiff_t>(runs_ % tiles.size()), tiles.end());
      const std::int64_t last_tile = lk > 0 ? (lk - 1) / bn : -1;
      for (const std::int64_t t : tiles) {
        const std::int64_t n0 = t * bn, n1 = std::min<std::int64_t>(n0 + bn, lk);
        const bool drop_tile = f.bw_skip_last_key_tile && t == last_tile;
        for (std::int64_t m0 = 0; m0 < lq; m0 += bm) {
          const std::int64_t m1 = std::min<std::int64_t>(m0 + bm, lq);
          // Query tiles that cannot see this key tile are skipped (FA2's m_block_min/max).
          if (a.window_right >= 0 && n0 > m1 - 1 + off + a.window_right) continue;
          if (a.window_left >= 0 && n1 - 1 < m0 + off - a.window_left) continue;
          for (std::int64_t i = m0; i < m1; ++i) {
            const float* qi = q + ((q0 + i) * H + h) * d;
            const float* gi = dout + ((q0 + i) * H + h) * dv;
            float row_lse = lse[(q0 + i) * H + h];
            if (f.bw_empty_row_lse_minus_inf && std::isinf(row_lse)) row_lse = -std::numeric_limits<float>::infinity();
            float* dqi = dq_acc.data() + (i * H + h) * d;
            for (std::int64_t j = n0; j < n1; ++j) {
              bool masked = false;
              if (a.window_right >= 0 && j > i + off + a.window_right) masked = true;
              const std::int64_t left = i + off - a.window_left;
              if (a.window_left >= 0 && (f.bw_window_off_by_one ? j <= left : j < left)) masked = true;
              const float* kj = k + ((krow0 + j) * Hk + kh) * d;
              const float* vj = v + ((krow0 + j) * Hk + kh) * dv;
              float dot = 0.0f;
              for (std::int64_t x = 0; x < d; ++x) dot += qi[x] * kj[x];
              float logit, tanh_s = 0.0f;
              if (cap > 0) {
                tanh_s = std::tanh(dot * (scale / cap));
                logit = cap * tanh_s;
              } else {
                logit = dot * scale;
              }
              if (masked) logit = -std::numeric_limits<float>::infinity();
              const float p = std::exp(logit - row_lse);
              float dp = 0.0f;
              for (std::int64_t x = 0; x < dv; ++x) dp += gi[x] * vj[x];
              float ds = p * (dp - dpsum[static_cast<std::size_t>(i)]);
              if (cap > 0 && !f.bw_drop_softcap_derivative) ds *= 1.0f - tanh_s * tanh_s;
              const float p_lo = round_float(dt, p), ds_lo = round_float(dt, ds);
              for (std::int64_t x = 0; x < d; ++x) dqi[x] += ds_lo * kj[x];
              if (drop_tile) continue;
              float* dkj = dk_head.data() + j * d;
              float* dvj = dv_head.data() + j * dv;
              for (std::int64_t x = 0; x < d; ++x) dkj[x] += ds_lo * qi[x];
              for (std::int64_t x = 0; x < dv; ++x) dvj[x] += p_lo * gi[x];
            }
          }
        }
      }
      // This head's dK/dV, rounded as FA2 writes them, summed into its KV head's.
      if (f.bw_gqa_first_head_only && h % group != 0) continue;
      for (std::int64_t j = 0; j < lk; ++j) {
        for (std::int64_t x = 0; x < d; ++x)
          dk_group[static_cast<std::size_t>((j * Hk + kh) * d + x)] += round_float(dt, dk_head[static_cast<std::size_t>(j * d + x)] * scale);
        for (std::int64_t x = 0; x < dv; ++x)
          dv_group[static_cast<std::size_t>((j * Hk + kh) * dv + x)] += round_float(dt, dv_head[static_cast<std::size_t>(j * dv + x)]);
      }
    }
    const float dq_scale = f.bw_dq_scaled_twice ? scale * scale : scale;
    for (std::int64_t i = 0; i < lq; ++i)
      for (std::int64_t x = 0; x < H * d; ++x)
        grads.dq()[(q0 + i) * H * d + x] = round_float(dt, dq_acc[static_cast<std::size_t>(i * H * d + x)] * dq_scale);
    // The whole allocation: zeros outside [p0, kv_end), the gradients inside.
    const std::int64_t dv_written = f.bw_dv_tail_dropped ? dv - dv % 8 : dv;
    for (std::int64_t pos = 0; pos < alloc; ++pos) {
      const std::int64_t j = pos - p0;
      const bool used = j >= 0 && j < lk;
      for (std::int64_t x = 0; x < Hk * d; ++x)
        grads.dk()[(seg + pos) * Hk * d + x] = used ? round_float(dt, dk_group[static_cast<std::size_t>(j * Hk * d + x)]) : 0.0f;
      for (std::int64_t kh = 0; kh < Hk; ++kh)
        for (std::int64_t x = 0; x < dv_written; ++x)
          grads.dv()[((seg + pos) * Hk + kh) * dv + x] =
              used ? round_float(dt, dv_group[static_cast<std::size_t>((j * Hk + kh) * dv + x)]) : 0.0f;
    }
  }
}

}  // namespace flashcheck
