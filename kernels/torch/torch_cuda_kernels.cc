// Adapters for PyTorch's fused CUDA attention kernels, called through their aten ops on device tensors:
//   flash-fwd-dense / flash-fwd-varlen          aten::_flash_attention_forward (vendored FlashAttention-2),
//                                               backward aten::_flash_attention_backward; the -deterministic twins
//                                               run it with torch.use_deterministic_algorithms(True)
//   efficient-fwd-dense / efficient-fwd-varlen  aten::_efficient_attention_forward (CUTLASS memory-efficient),
//                                               backward aten::_efficient_attention_backward
//   cudnn-fwd                                   aten::_cudnn_attention_forward, backward aten::_cudnn_attention_backward
// The contracts state what each op computes natively; the only translation here is GQA by repeated KV heads where an
// op has none (said in its contract). The SDPA adapters translate more (kernels/torch/torch_sdpa.cc).
#include <algorithm>
#include <mutex>

#include <ATen/Context.h>
#include <ATen/ops/_cudnn_attention_backward.h>
#include <ATen/ops/_cudnn_attention_forward.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/_efficient_attention_backward.h>
#include <ATen/ops/_efficient_attention_forward.h>
#include <ATen/ops/_flash_attention_backward.h>
#include <ATen/ops/_flash_attention_forward.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/repeat_interleave.h>
#include <fmt/format.h>

#include "core/geometry.h"
#include "kernels/torch/cuda_kernels.h"
#include "kernels/device_kernel.h"
#include "kernels/torch/torch_device_tensors.h"
#include "kernels/flash_args.h"
#include "kernels/torch/torch_sdpa.h"
#include "kernels/torch/torch_tensors.h"

namespace flashcheck {
namespace {

using torch_cuda::packed_kv;
using torch_cuda::packed_q;
using torch_cuda::write_lse;
using torch_cuda::write_out;

// A backward call's inputs on the device: q (q_rows, H, d), k and v (kv_rows, Hk, d | dv), dO (q_rows, H, dv),
// contiguous, in the case's dtype; from the host's tensors or from a case generated on the device.
struct BackwardInputs {
  at::Tensor q, k, v, dout;
};
BackwardInputs backward_inputs(const KernelCase& c, const CaseTensors& in) {
  const auto up = [&](const HostTensor& t) { return torch_bridge::from_values(t.data, t.shape, c.dtype).to(at::kCUDA); };
  return {up(in.q), up(in.k), up(in.v), up(in.dout)};
}
BackwardInputs backward_inputs(const device::DeviceCase& dc) {
  const KernelCase& c = dc.kcase();
  const CaseGeometry& g = dc.geometry();
  const at::ScalarType dt = torch_bridge::scalar_type(c.dtype);
  const device::DeviceInputs& in = dc.inputs();
  return {torch_cuda::view(in.q, {g.q_rows, c.heads, c.head_dim}).to(dt),
          torch_cuda::view(in.k, {g.kv_rows, c.kv_heads, c.head_dim}).to(dt),
          torch_cuda::view(in.v, {g.kv_rows, c.kv_heads, c.v_head_dim}).to(dt),
          torch_cuda::view(in.dout, {g.q_rows, c.heads, c.v_head_dim}).to(dt)};
}

// A backward's gradients (any dtype): dq (q_rows, H, d), dk and dv (kv_rows, Hk, d | dv).
struct Gradients {
  at::Tensor dq, dk, dv;
};

void expect_elements(const at::Tensor& t, std::int64_t n) {
  if (t.numel() != n)
    throw std::runtime_error(fmt::format("the backward returned {} gradient values where {} were expected", t.numel(), n));
}

// Into the harness's host buffers.
void write_gradients(const Gradients& g, GradBuffer& grads) {
  for (const auto& [t, dst, n] : {std::tuple{&g.dq, grads.dq(), grads.dq_elems()}, std::tuple{&g.dk, grads.dk(), grads.dk_elems()},
                                  std::tuple{&g.dv, grads.dv(), grads.dv_elems()}}) {
    expect_elements(*t, n);
    const std::vector<float> v = torch_bridge::to_values(*t);
    std::copy(v.begin(), v.end(), dst);
  }
}

// Into the harness's device buffers, as float32, without leaving the device.
void write_gradients(const Gradients& g, device::DeviceOutput& dq, device::DeviceOutput& dk, device::DeviceOutput& dv) {
  for (const auto& [t, dst] : {std::pair{&g.dq, &dq}, std::pair{&g.dk, &dk}, std::pair{&g.dv, &dv}}) {
    expect_elements(*t, dst->out_elems());
    torch_cuda::view(dst->out(), {dst->out_elems()}).copy_(t->reshape({-1}));
  }
}

// An aten op adapter with a backward: the op's gradients of one case, from the host's tensors (run_backward) or from a
// case on the device (run_backward_device, grad-conformance's device path), written where each path keeps them.
class AtenBackwardKernel : public DeviceKernel {
 public:
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer&, GradBuffer& grads) override {
    write_gradients(gradients(c, backward_inputs(c, in)), grads);
  }
  bool has_device_backward() const override { return true; }
  void run_backward_device(const device::DeviceCase& dc, device::DeviceOutput& dq, device::DeviceOutput& dk,
                           device::DeviceOutput& dv) override {
    write_gradients(gradients(dc.kcase(), backward_inputs(dc)), dq, dk, dv);
  }

 private:
  virtual Gradients gradients(const KernelCase& c, BackwardInputs x) const = 0;
};

// dK or dV of the repeated KV heads (rows, H, d) summed over each group to the case's KV heads (rows, Hk, d).
at::Tensor sum_groups(const at::Tensor& g, std::int64_t kv_heads) {
  if (g.size(1) == kv_heads) return g;
  return g.to(at::kFloat).reshape({g.size(0), kv_heads, g.size(1) / kv_heads, g.size(2)}).sum(2);
}

// Every sequence has the same q_len and the same number of keys: what a dense (B, S, H, d) call needs.
bool uniform_batch(const KernelCase& c) {
  for (const Sequence& s : c.seqs)
    if (s.q_len != c.seqs[0].q_len || s.k_len != c.seqs[0].k_len) return false;
  return true;
}

bool some_sequence_has_more_queries_than_keys(const KernelCase& c) {
  const CaseGeometry g = geometry(c);
  for (const SeqGeometry& s : g.seqs)
    if (s.lq > s.lk) return true;
  return false;
}

bool some_sequence_has_unequal_lengths(const KernelCase& c) {
  const CaseGeometry g = geometry(c);
  for (const SeqGeometry& s : g.seqs)
    if (s.lq != s.lk) return true;
  return false;
}

// Known defects, kept out of the contracts so that campaigns look for new ones; each has a fixture that
// runs the kernel on it anyway and expects the failure (results/RESULTS.md).
constexpr const char* kFlashWindowDefect =
    "known defect: windows with a right bound other than 0 when q_len > k_len (FA2's window normalization "
    "assumes k_len >= q_len; fixtures/found/flash-window-more-queries-than-keys.json)";
constexpr const char* kFlashNoQueriesDefect =
    "known defect: a batch without any query row fails with 'invalid argument' "
    "(fixtures/found/flash-varlen-no-queries.json)";
constexpr const char* kFlashBackwardNoKeysDefect =
    "known defect: the varlen backward of a batch without any key fails with 'invalid argument' "
    "(fixtures/found/flash-varlen-backward-batch-without-keys.json)";
constexpr const char* kFlashDecodeGroupsDefect =
    "known defect: GQA with max_seqlen_q == 1 and a Q buffer whose rows are not one per sequence (a sequence "
    "without queries, or rows past the last sequence) breaks the decode fast path's reshape "
    "(fixtures/found/flash-varlen-gqa-decode-empty-sequence.json, fixtures/found/flash-varlen-gqa-decode-q-slack.json)";
constexpr const char* kEfficientBottomRightDefect =
    "known defect: bottom-right causal (custom_mask_type 2) with q_len > k_len "
    "(fixtures/found/efficient-bottom-right-more-queries-than-keys.json)";
constexpr const char* kEfficientBackwardWindowDefect =
    "known defect: the backward with a causal window (window_size) returns wrong gradients when a sequence's "
    "q_len differs from its k_len (fixtures/found/efficient-backward-window-unequal-lengths.json)";
constexpr const char* kEfficientWindowBlockDefect =
    "known defect: a causal window that starts past the last key, with v_head_dim > 128, leaves rows unwritten "
    "(fixtures/found/efficient-window-block-without-keys.json)";

// The CUTLASS kernels for value dims above 128 write the output only inside the key loop; a query block
// whose window starts past the last key never enters it. Excluded wherever some row's window starts past
// the keys (top-left causal, left window, q_len - 1 - left >= keys), a superset of the blocks that fail.
bool efficient_window_block_without_keys(const KernelCase& c) {
  if (!c.causal || c.alignment != Alignment::kTopLeft || c.v_head_dim <= 128) return false;
  const MaskRule m = mask_rule(c);
  if (m.left < 0) return false;
  for (const Sequence& s : c.seqs) {
    const std::int64_t keys = s.seqused_k ? *s.seqused_k : s.k_len;
    if (s.q_len - 1 - m.left >= keys) return true;
  }
  return false;
}

// Runs a backward with torch.use_deterministic_algorithms(True) in force: PyTorch's _flash_attention_backward reads
// that process-wide flag for FA2's deterministic mode (aten/src/ATen/native/transformers/cuda/attention_backward.cu).
// One such call at a time, and the flag as it was afterwards.
template <class F>
auto with_deterministic_algorithms(F&& f) {
  static std::mutex one_at_a_time;
  const std::lock_guard<std::mutex> lock(one_at_a_time);
  at::Context& ctx = at::globalContext();
  const bool was = ctx.deterministicAlgorithms(), warn_only = ctx.deterministicAlgorithmsWarnOnly();
  ctx.setDeterministicAlgorithms(true, false);
  struct Restore {
    at::Context& ctx;
    bool was, warn_only;
    ~Restore() { ctx.setDeterministicAlgorithms(was, warn_only); }
  } restore{ctx, was, warn_only};
  return f();
}

Contract flash_contract(bool varlen, bool deterministic) {
  Contract k;
  k.summary = varlen ? "aten::_flash_attention_forward, varlen mode (cum_seq_q/k, seqused_k), vendored FlashAttention-2"
                     : "aten::_flash_attention_forward, dense (B, S, H, d) mode, vendored FlashAttention-2";
  k.bottom_right = k.window = k.gqa = Support::kNative;
  k.varlen = k.seqused_k = k.zero_length = varlen ? Support::kNative : Support::kNo;
  k.slack = varlen ? Support::kNative : Support::kNo;  // q, k, v may be longer than cu_seqlens[-1]
  k.dtypes = {DType::kF16, DType::kBF16};
  k.max_head_dim = 256;
  k.head_dim_multiple = 8;
  k.kv_strides = {KvStrides::kContiguous, KvStrides::kGapped, KvStrides::kExpanded};
  k.returns_lse = true;
  k.notes = {"causal is bottom-right per sequence; window (left, right) with -1 unbounded",
             "no softcap, leftpad, paged KV or KV-cache append in this op (torch 2.11)"};
  k.backward.available = true;
  k.backward.deterministic = deterministic;  // else dQ is accumulated over key blocks with atomics
  k.backward.without = {"seqused_k"};  // aten::_flash_attention_backward takes none
  k.backward.notes = {"aten::_flash_attention_backward on the forward's own out, logsumexp and rng state (the adapter "
                      "runs the forward op again on the device)",
                      kFlashBackwardNoKeysDefect};
  if (deterministic)
    k.backward.notes.push_back("under torch.use_deterministic_algorithms(True): FA2's deterministic backward (dQ "
                               "accumulated per key-block split, then reduced in a fixed order)");
  return k;
}

class FlashForward : public AtenBackwardKernel {
 public:
  FlashForward(bool varlen, bool deterministic)
      : varlen_(varlen), deterministic_(deterministic), contract_(flash_contract(varlen, deterministic)) {}
  std::string_view name() const override {
    if (deterministic_) return varlen_ ? "flash-fwd-varlen-deterministic" : "flash-fwd-dense-deterministic";
    return varlen_ ? "flash-fwd-varlen" : "flash-fwd-dense";
  }
  const Contract& contract() const override { return contract_; }
  ContractCheck check(const KernelCase& c) const override {
    ContractCheck r = DeviceKernel::check(c);
    if (!r.supported) return r;
    if (!varlen_ && !uniform_batch(c)) return {false, "dense mode needs one q_len and one k_len for the batch", {}};
    if (mask_rule(c).right != 0 && c.window != Window{} && some_sequence_has_more_queries_than_keys(c))
      return {false, kFlashWindowDefect, {}};
    const CaseGeometry g = geometry(c);
    if (g.total_q == 0) return {false, kFlashNoQueriesDefect, {}};
    if (c.backward() && g.max_k == 0) return {false, kFlashBackwardNoKeysDefect, {}};
    if (varlen_ && flash_decode_fast_path_misreads_q(c)) return {false, kFlashDecodeGroupsDefect, {}};
    return r;
  }
  void run_device(const device::DeviceCase& dc, device::DeviceOutput& out) override {
    const KernelCase& c = dc.kcase();
    const CaseGeometry& g = dc.geometry();
    const FlashArgs a = flash_args(c);
    const at::Tensor q = packed_q(dc), k = packed_kv(dc, false), v = packed_kv(dc, true);
    std::optional<std::int64_t> wl, wr;
    if (a.window_left >= 0) wl = a.window_left;
    if (a.window_right >= 0) wr = a.window_right;
    if (varlen_) {
      const at::Tensor cq = torch_cuda::int32_device(a.cu_seqlens_q), ck = torch_cuda::int32_device(a.cu_seqlens_k);
      std::optional<at::Tensor> used;
      if (!a.seqused_k.empty()) used = torch_cuda::int32_device(a.seqused_k);
      torch_cuda::recycle_nan_block(c, g.total_q * c.heads * c.v_head_dim);
      auto [o, lse, rng, unused, dbg] = at::_flash_attention_forward(q, k, v, cq, ck, a.max_seqlen_q, a.max_seqlen_k, 0.0,
                                                                      c.causal, false, c.softmax_scale(), wl, wr, used, std::nullopt);
      write_out(o, out);
      // Unpadded LSE (H, total_q) in this version; older builds padded it to (B, H, max_q).
      if (lse.dim() == 2) write_lse(lse.t(), out);
      return;
    }
    const std::int64_t B = c.batch(), Lq = c.seqs[0].q_len, Lk = c.seqs[0].k_len;
    const at::Tensor qd = q.view({B, Lq, c.heads, c.head_dim});
    const at::Tensor kd = k.reshape({B, Lk, k.size(1), c.head_dim}), vd = v.reshape({B, Lk, v.size(1), c.v_head_dim});
    torch_cuda::recycle_nan_block(c, g.total_q * c.heads * c.v_head_dim);
    auto [o, lse, rng, unused, dbg] = at::_flash_attention_forward(qd, kd, vd, std::nullopt, std::nullopt, Lq, Lk, 0.0, c.causal,
                                                                    false, c.softmax_scale(), wl, wr, std::nullopt, std::nullopt);
    write_out(o.reshape({g.total_q, c.heads, c.v_head_dim}), out);
    write_lse(lse.permute({0, 2, 1}).reshape({g.total_q, c.heads}), out);
  }

 private:
  // The op's backward needs its own forward's logsumexp and rng state, which the harness's buffer does not hold in
  // the op's layout: the forward runs again on the device, then the backward.
  Gradients gradients(const KernelCase& c, BackwardInputs x) const override {
    if (deterministic_) return with_deterministic_algorithms([&] { return backward(c, x); });
    return backward(c, x);
  }

  Gradients backward(const KernelCase& c, const BackwardInputs& x) const {
    const FlashArgs a = flash_args(c);
    std::optional<std::int64_t> wl, wr;
    if (a.window_left >= 0) wl = a.window_left;
    if (a.window_right >= 0) wr = a.window_right;
    if (varlen_) {
      const at::Tensor cq = torch_cuda::int32_device(a.cu_seqlens_q), ck = torch_cuda::int32_device(a.cu_seqlens_k);
      auto [o, lse, rng, unused, dbg] = at::_flash_attention_forward(x.q, x.k, x.v, cq, ck, a.max_seqlen_q, a.max_seqlen_k,
                                                                      0.0, c.causal, false, c.softmax_scale(), wl, wr,
                                                                      std::nullopt, std::nullopt);
      auto [dq, dk, dv] = at::_flash_attention_backward(x.dout, x.q, x.k, x.v, o, lse, cq, ck, a.max_seqlen_q,
                                                        a.max_seqlen_k, 0.0, c.causal, rng, unused, c.softmax_scale(), wl, wr);
      return {dq, dk, dv};
    }
    const std::int64_t B = c.batch(), Lq = c.seqs[0].q_len, Lk = c.seqs[0].k_len;
    const at::Tensor qd = x.q.view({B, Lq, c.heads, c.head_dim}), god = x.dout.view({B, Lq, c.heads, c.v_head_dim});
    const at::Tensor kd = x.k.view({B, Lk, c.kv_heads, c.head_dim}), vd = x.v.view({B, Lk, c.kv_heads, c.v_head_dim});
    auto [o, lse, rng, unused, dbg] = at::_flash_attention_forward(qd, kd, vd, std::nullopt, std::nullopt, Lq, Lk, 0.0,
                                                                    c.causal, false, c.softmax_scale(), wl, wr, std::nullopt,
                                                                    std::nullopt);
    const at::Tensor none;
    auto [dq, dk, dv] = at::_flash_attention_backward(god, qd, kd, vd, o, lse, none, none, Lq, Lk, 0.0, c.causal, rng,
                                                      unused, c.softmax_scale(), wl, wr);
    return {dq.reshape({-1, c.heads, c.head_dim}), dk.reshape({-1, c.kv_heads, c.head_dim}),
            dv.reshape({-1, c.kv_heads, c.v_head_dim})};
  }

  bool varlen_, deterministic_;
  Contract contract_;
};

Contract efficient_contract(bool varlen) {
  Contract k;
  k.summary = varlen ? "aten::_efficient_attention_forward with cu_seqlens (batch 1, packed tokens), CUTLASS kernel"
                     : "aten::_efficient_attention_forward, dense (B, S, H, d) with seqlen_k, CUTLASS kernel";
  k.bottom_right = k.top_left = Support::kNative;  // custom_mask_type 2 and 1
  k.window = Support::kNative;                     // causal left windows only (check below)
  k.gqa = Support::kTranslated;
  k.varlen = varlen ? Support::kNative : Support::kNo;
  // seqlen_k is read only together with cu_seqlens_k: a dense call silently ignores it
  // (fixtures/found/efficient-dense-seqlen-k-ignored.json).
  k.seqused_k = varlen ? Support::kNative : Support::kNo;
  k.slack = varlen ? Support::kNative : Support::kNo;  // packed q, k, v may be longer than cu_seqlens[-1]
  k.dv_differs = Support::kNative;
  k.dtypes = {DType::kF16, DType::kBF16, DType::kF32};
  k.max_head_dim = 256;
  k.head_dim_multiple = 8;
  k.returns_lse = true;
  if (!varlen)
    k.coverage_exempt = {{"empty-rows", "bottom-right q_len > k_len is a known defect; what remains (top-left windows "
                                        "with q_len > k_len + left in a uniform batch) is rare"}};
  k.notes = {"GQA: KV heads repeated by the adapter (the op takes equal head counts)",
             "window_size counts keys including the diagonal: FA window (W - 1, 0) with causal",
             "LSE is padded to a multiple of 32 query rows; the adapter keeps the valid rows"};
  k.backward.available = true;
  k.backward.deterministic = false;  // dQ (and dK/dV across key splits) accumulated with atomics
  k.backward.without = {"seqused_k"};  // the backward op takes no seqlen_k
  k.backward.notes = {"aten::_efficient_attention_backward on the forward's own out, logsumexp and philox state (the "
                      "adapter runs the forward op again); GQA: the repeated heads' dK/dV summed over each group in fp32",
                      kEfficientBackwardWindowDefect};
  k.backward.coverage_exempt = {{"empty-rows", "a row without keys needs a window with q_len != k_len (a known defect of "
                                               "the backward) or bottom-right q_len > k_len (one of the forward)"}};
  return k;
}

// The varlen LSE of the memory-efficient kernel, as (total_q, H): either per sequence, (B, H, padded
// max_q), or packed, (1, H, padded total_q).
at::Tensor varlen_lse(const at::Tensor& lse, const KernelCase& c, const CaseGeometry& g) {
  if (lse.size(0) == 1 && lse.size(2) >= g.total_q) return lse[0].narrow(1, 0, g.total_q).t();
  std::vector<at::Tensor> rows;
  for (std::size_t b = 0; b < g.seqs.size(); ++b)
    if (g.seqs[b].lq > 0) rows.push_back(lse[static_cast<std::int64_t>(b)].narrow(1, 0, g.seqs[b].lq).t());
  return rows.empty() ? lse.new_empty({0, c.heads}) : at::cat(rows, 0);
}

class EfficientForward : public AtenBackwardKernel {
 public:
  explicit EfficientForward(bool varlen) : varlen_(varlen), contract_(efficient_contract(varlen)) {}
  std::string_view name() const override { return varlen_ ? "efficient-fwd-varlen" : "efficient-fwd-dense"; }
  const Contract& contract() const override { return contract_; }
  ContractCheck check(const KernelCase& c) const override {
    ContractCheck r = DeviceKernel::check(c);
    if (!r.supported) return r;
    const MaskRule m = mask_rule(c);
    if (c.window != Window{} && !(c.causal && m.right == 0))
      return {false, "does not support windows other than causal left windows (window_size = left + 1)", {}};
    if (!varlen_ && !uniform_batch(c)) return {false, "dense mode needs one q_len and one k_len for the batch", {}};
    if (c.causal && c.alignment == Alignment::kBottomRight && some_sequence_has_more_queries_than_keys(c))
      return {false, kEfficientBottomRightDefect, {}};
    if (efficient_window_block_without_keys(c)) return {false, kEfficientWindowBlockDefect, {}};
    if (c.backward() && c.causal && m.left >= 0 && some_sequence_has_unequal_lengths(c))
      return {false, kEfficientBackwardWindowDefect, {}};
    return r;
  }
  void run_device(const device::DeviceCase& dc, device::DeviceOutput& out) override {
    const KernelCase& c = dc.kcase();
    const CaseGeometry& g = dc.geometry();
    const FlashArgs a = flash_args(c);
    at::Tensor q = packed_q(dc), k = packed_kv(dc, false), v = packed_kv(dc, true);
    if (k.size(1) != c.heads) {
      k = k.repeat_interleave(c.heads / k.size(1), 1);
      v = v.repeat_interleave(c.heads / v.size(1), 1);
    }
    const std::int64_t mask_type = !c.causal ? 0 : c.alignment == Alignment::kTopLeft ? 1 : 2;
    std::optional<std::int64_t> window;
    if (c.causal && a.window_left >= 0) window = a.window_left + 1;
    if (varlen_) {
      const at::Tensor cq = torch_cuda::int32_device(a.cu_seqlens_q), ck = torch_cuda::int32_device(a.cu_seqlens_k);
      std::optional<at::Tensor> seqlen_k;  // used keys of each allocation (xformers' padded-keys mask)
      if (!a.seqused_k.empty()) seqlen_k = torch_cuda::int32_device(a.seqused_k);
      torch_cuda::recycle_nan_block(c, g.total_q * c.heads * c.v_head_dim);
      auto [o, lse, seed, offset, mq, mk] =
          at::_efficient_attention_forward(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), std::nullopt, cq, ck,
                                           a.max_seqlen_q, a.max_seqlen_k, 0.0, mask_type, true, c.softmax_scale(),
                                           seqlen_k, window);
      write_out(o.squeeze(0), out);
      write_lse(varlen_lse(lse, c, g), out);
      return;
    }
    const std::int64_t B = c.batch(), Lq = c.seqs[0].q_len, Lk = c.seqs[0].k_len;
    std::optional<at::Tensor> seqlen_k;
    if (!a.seqused_k.empty()) seqlen_k = torch_cuda::int32_device(a.seqused_k);
    torch_cuda::recycle_nan_block(c, g.total_q * c.heads * c.v_head_dim);
    auto [o, lse, seed, offset, mq, mk] = at::_efficient_attention_forward(
        q.view({B, Lq, c.heads, c.head_dim}), k.reshape({B, Lk, c.heads, c.head_dim}),
        v.reshape({B, Lk, c.heads, c.v_head_dim}), std::nullopt, std::nullopt, std::nullopt, Lq, Lk, 0.0, mask_type, true,
        c.softmax_scale(), seqlen_k, window);
    write_out(o.reshape({g.total_q, c.heads, c.v_head_dim}), out);
    write_lse(lse.narrow(2, 0, Lq).permute({0, 2, 1}).reshape({g.total_q, c.heads}), out);
  }

 private:
  Gradients gradients(const KernelCase& c, BackwardInputs x) const override {
    const FlashArgs a = flash_args(c);
    const std::int64_t Hk = c.kv_heads;
    if (Hk != c.heads) {
      x.k = x.k.repeat_interleave(c.heads / Hk, 1);
      x.v = x.v.repeat_interleave(c.heads / Hk, 1);
    }
    const std::int64_t mask_type = !c.causal ? 0 : c.alignment == Alignment::kTopLeft ? 1 : 2;
    std::optional<std::int64_t> window;
    if (c.causal && a.window_left >= 0) window = a.window_left + 1;
    at::Tensor dq, dk, dv;
    if (varlen_) {
      const at::Tensor cq = torch_cuda::int32_device(a.cu_seqlens_q), ck = torch_cuda::int32_device(a.cu_seqlens_k);
      auto [o, lse, seed, offset, mq, mk] =
          at::_efficient_attention_forward(x.q.unsqueeze(0), x.k.unsqueeze(0), x.v.unsqueeze(0), std::nullopt, cq, ck,
                                           a.max_seqlen_q, a.max_seqlen_k, 0.0, mask_type, true, c.softmax_scale(),
                                           std::nullopt, window);
      auto r = at::_efficient_attention_backward(x.dout.unsqueeze(0), x.q.unsqueeze(0), x.k.unsqueeze(0), x.v.unsqueeze(0),
                                                 std::nullopt, o, cq, ck, a.max_seqlen_q, a.max_seqlen_k, lse, 0.0, seed, offset,
                                                 mask_type, false, c.softmax_scale(), std::nullopt, window);
      dq = std::get<0>(r).squeeze(0);
      dk = std::get<1>(r).squeeze(0);
      dv = std::get<2>(r).squeeze(0);
    } else {
      const std::int64_t B = c.batch(), Lq = c.seqs[0].q_len, Lk = c.seqs[0].k_len;
      const at::Tensor qd = x.q.view({B, Lq, c.heads, c.head_dim}), god = x.dout.view({B, Lq, c.heads, c.v_head_dim});
      const at::Tensor kd = x.k.reshape({B, Lk, c.heads, c.head_dim}), vd = x.v.reshape({B, Lk, c.heads, c.v_head_dim});
      auto [o, lse, seed, offset, mq, mk] = at::_efficient_attention_forward(
          qd, kd, vd, std::nullopt, std::nullopt, std::nullopt, Lq, Lk, 0.0, mask_type, true, c.softmax_scale(), std::nullopt,
          window);
      auto r = at::_efficient_attention_backward(god, qd, kd, vd, std::nullopt, o, std::nullopt, std::nullopt, Lq, Lk, lse,
                                                 0.0, seed, offset, mask_type, false, c.softmax_scale(), std::nullopt, window);
      dq = std::get<0>(r).reshape({-1, c.heads, c.head_dim});
      dk = std::get<1>(r).reshape({-1, c.heads, c.head_dim});
      dv = std::get<2>(r).reshape({-1, c.heads, c.v_head_dim});
    }
    return {dq, sum_groups(dk, Hk), sum_groups(dv, Hk)};
  }

  bool varlen_;
  Contract contract_;
};

class CudnnForward : public AtenBackwardKernel {
 public:
  CudnnForward() {
    Contract& k = contract_;
    k.summary = "aten::_cudnn_attention_forward (cuDNN SDPA), dense (B, H, S, d)";
    k.top_left = Support::kNative;
    k.gqa = Support::kNative;
    k.dtypes = {DType::kF16, DType::kBF16};
    k.max_head_dim = 128;
    k.head_dim_multiple = 8;
    k.returns_lse = true;
    k.notes = {"causal is top-left (cuDNN's classic causal mask)"};
    k.backward.available = true;
    k.backward.deterministic = false;  // cuDNN's SDPA backward accumulates dQ across key blocks with atomics
    k.backward.notes = {"aten::_cudnn_attention_backward on the forward's own out, logsumexp and philox state (the "
                        "adapter runs the forward op again); dO takes the output's strides; GQA by repeating the KV heads "
                        "and summing their dK/dV over each group in fp32"};
  }
  std::string_view name() const override { return "cudnn-fwd"; }
  const Contract& contract() const override { return contract_; }
  ContractCheck check(const KernelCase& c) const override {
    ContractCheck r = DeviceKernel::check(c);
    if (r.supported && !uniform_batch(c)) r = {false, "dense mode needs one q_len and one k_len for the batch", {}};
    // cuDNN Frontend refuses this backward ("s_q = s_kv = 1 is not supported"); SDPA's dispatcher never sends a key
    // length of 1 to cuDNN. fixtures/found/cudnn-backward-sequence-length-one.json runs it anyway.
    if (r.supported && c.backward() && c.seqs[0].q_len == 1 && c.seqs[0].k_len == 1)
      r = {false, "its backward does not support one query over one key (cuDNN: s_q = s_kv = 1 is not supported)", {}};
    return r;
  }
  void run_device(const device::DeviceCase& dc, device::DeviceOutput& out) override {
    const KernelCase& c = dc.kcase();
    const CaseGeometry& g = dc.geometry();
    const std::int64_t B = c.batch(), Lq = c.seqs[0].q_len, Lk = c.seqs[0].k_len;
    const at::Tensor q = packed_q(dc).view({B, Lq, c.heads, c.head_dim}).transpose(1, 2);
    const at::Tensor k = packed_kv(dc, false).reshape({B, Lk, c.kv_heads, c.head_dim}).transpose(1, 2);
    const at::Tensor v = packed_kv(dc, true).reshape({B, Lk, c.kv_heads, c.v_head_dim}).transpose(1, 2);
    torch_cuda::recycle_nan_block(c, g.total_q * c.heads * c.v_head_dim);
    auto result = at::_cudnn_attention_forward(q, k, v, std::nullopt, std::nullopt, std::nullopt, Lq, Lk, true, 0.0,
                                               c.causal, false, c.softmax_scale());
    const at::Tensor& o = std::get<0>(result);  // (B, H, Lq, dv)
    write_out(o.transpose(1, 2).reshape({g.total_q, c.heads, c.v_head_dim}), out);
    const at::Tensor& lse = std::get<1>(result);  // (B, H, Lq[, 1])
    write_lse(lse.reshape({B, c.heads, Lq}).permute({0, 2, 1}).reshape({g.total_q, c.heads}), out);
  }

 private:
  Gradients gradients(const KernelCase& c, BackwardInputs x) const override {
    const std::int64_t B = c.batch(), Lq = c.seqs[0].q_len, Lk = c.seqs[0].k_len, Hk = c.kv_heads;
    if (Hk != c.heads) {
      x.k = x.k.repeat_interleave(c.heads / Hk, 1);
      x.v = x.v.repeat_interleave(c.heads / Hk, 1);
    }
    const at::Tensor q = x.q.view({B, Lq, c.heads, c.head_dim}).transpose(1, 2);
    const at::Tensor k = x.k.reshape({B, Lk, c.heads, c.head_dim}).transpose(1, 2);
    const at::Tensor v = x.v.reshape({B, Lk, c.heads, c.v_head_dim}).transpose(1, 2);
    auto fwd = at::_cudnn_attention_forward(q, k, v, std::nullopt, std::nullopt, std::nullopt, Lq, Lk, true, 0.0, c.causal,
                                            false, c.softmax_scale());
    const at::Tensor& o = std::get<0>(fwd);
    // cuDNN takes dO in the output's layout.
    at::Tensor dout = at::empty_like(o);
    dout.copy_(x.dout.view({B, Lq, c.heads, c.v_head_dim}).transpose(1, 2));
    const at::Tensor none;
    auto [dq, dk, dv] = at::_cudnn_attention_backward(dout, q, k, v, o, std::get<1>(fwd), std::get<6>(fwd), std::get<7>(fwd),
                                                      none, none, none, Lq, Lk, 0.0, c.causal, c.softmax_scale());
    return {dq.transpose(1, 2).reshape({-1, c.heads, c.head_dim}),
            sum_groups(dk.transpose(1, 2).reshape({-1, c.heads, c.head_dim}), Hk),
            sum_groups(dv.transpose(1, 2).reshape({-1, c.heads, c.v_head_dim}), Hk)};
  }

  Contract contract_;
};

}  // namespace

void register_cuda_kernels(Registry& r) {
  for (bool deterministic : {false, true}) {
    r.add(std::make_unique<FlashForward>(false, deterministic));
    r.add(std::make_unique<FlashForward>(true, deterministic));
  }
  r.add(std::make_unique<EfficientForward>(false));
  r.add(std::make_unique<EfficientForward>(true));
  r.add(std::make_unique<CudnnForward>());
  for (SdpaBackend b : {SdpaBackend::kFlash, SdpaBackend::kEfficient, SdpaBackend::kCudnn, SdpaBackend::kMath})
    r.add(make_sdpa_cuda_kernel(b));
}

}  // namespace flashcheck
