// Adapters for PyTorch's SDPA family: on the CPU `_scaled_dot_product_attention_math` (the SDPA math path)
// and `_scaled_dot_product_flash_attention_for_cpu`; on CUDA the public `scaled_dot_product_attention`
// with one backend forced. All take dense (B, H, L, d) tensors and know only top-left causal, so the
// adapter translates: one dense call per sequence (varlen), logical K/V gathered from pages / cache /
// leftpad / seqused_k, and an explicit mask for every visibility pattern other than plain top-left
// causal. The contracts list these translations.
#include <ATen/Context.h>
#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <torch/csrc/autograd/autograd.h>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "core/geometry.h"
#include "kernels/kernel.h"
#include "kernels/torch/torch_cpu_kernels.h"
#include "kernels/torch/torch_sdpa.h"
#include "kernels/torch/torch_tensors.h"
#if defined(FLASHCHECK_HAVE_CUDA)
#include "core/device/device_memory.h"
#include "kernels/device_kernel.h"
#endif

namespace flashcheck {
namespace {

enum class Op { kCpuMath, kCpuFlash, kCudaSdpa };

// Forces one SDPA backend for the lifetime of the object, restoring the previous choice after.
class ForcedBackend {
 public:
  explicit ForcedBackend(SdpaBackend b) {
    at::Context& ctx = at::globalContext();
    saved_ = {ctx.userEnabledFlashSDP(), ctx.userEnabledMemEfficientSDP(), ctx.userEnabledMathSDP(), ctx.userEnabledCuDNNSDP()};
    ctx.setSDPUseFlash(b == SdpaBackend::kFlash);
    ctx.setSDPUseMemEfficient(b == SdpaBackend::kEfficient);
    ctx.setSDPUseMath(b == SdpaBackend::kMath);
    ctx.setSDPUseCuDNN(b == SdpaBackend::kCudnn);
  }
  ~ForcedBackend() {
    at::Context& ctx = at::globalContext();
    ctx.setSDPUseFlash(saved_[0]);
    ctx.setSDPUseMemEfficient(saved_[1]);
    ctx.setSDPUseMath(saved_[2]);
    ctx.setSDPUseCuDNN(saved_[3]);
  }

 private:
  std::array<bool, 4> saved_{};
};

// Logical K and V of one sequence, (Lk, Hk, d) row-major, whatever the storage, cache or leftpad.
struct SequenceKv {
  std::int64_t lk = 0;
  std::vector<float> k, v;
};

SequenceKv gather(const KernelCase& c, const ValueSource& values, const SeqGeometry& g, std::int64_t b) {
  SequenceKv kv;
  kv.lk = g.lk;
  for (std::int64_t p = g.p0; p < g.kv_end; ++p)
    for (std::int64_t h = 0; h < c.kv_heads; ++h) {
      for (std::int64_t x = 0; x < c.head_dim; ++x) kv.k.push_back(values(TensorId::kK, b, p, h, x));
      for (std::int64_t x = 0; x < c.v_head_dim; ++x) kv.v.push_back(values(TensorId::kV, b, p, h, x));
    }
  return kv;
}

// (1, heads, L, dim) view of a (1, L, heads, dim) tensor, presented with the case's K/V strides. Differentiable:
// the backward takes the gradients of the (1, L, heads, dim) leaf.
at::Tensor bhsd(const at::Tensor& bshd, KvStrides strides, std::int64_t expand_to) {
  at::Tensor t = bshd.permute({0, 2, 1, 3});
  if (strides == KvStrides::kContiguous) return t.contiguous();
  const std::int64_t heads = t.size(1), len = t.size(2), dim = t.size(3);
  if (strides == KvStrides::kExpanded) return t.contiguous().expand({1, expand_to, len, dim});
  // Gapped: every row padded by 8 elements, every head by 3 rows; the innermost dimension stays dense.
  at::Tensor big = at::full({1, heads, len + 3, dim + 8}, std::numeric_limits<float>::quiet_NaN(),
                            at::TensorOptions().dtype(bshd.scalar_type()).device(bshd.device()));
  at::Tensor view = big.narrow(2, 0, len).narrow(3, 0, dim);
  view.copy_(t);
  return view;
}

class TorchSdpaAttention : public Kernel {
 public:
  TorchSdpaAttention(Op op, SdpaBackend backend = SdpaBackend::kMath) : op_(op), backend_(backend) {
    Contract& k = contract_;
    k.top_left = Support::kNative;
    k.bottom_right = k.window = k.varlen = k.seqused_k = k.leftpad = k.paged = k.kv_cache = Support::kTranslated;
    k.gqa = Support::kNative;
    k.softcap = Support::kNo;
    k.dtypes = {DType::kF16, DType::kBF16, DType::kF32};
    k.max_head_dim = 512;
    k.kv_strides = {KvStrides::kContiguous, KvStrides::kGapped, KvStrides::kExpanded};
    k.empty_row = EmptyRow::kZero;
    k.writes_into_buffer = false;
    k.notes = {"varlen: one dense (1, H, L, d) call per sequence",
               "paged / kv cache / leftpad / seqused_k: the adapter gathers the logical keys of each sequence",
               "bottom-right causal and windows: an explicit additive mask (0 / -inf) in the query dtype",
               "GQA: K/V passed with Hk heads"};
    k.backward.available = true;
    k.backward.zeroes_unused_keys = true;
    k.backward.writes_into_buffer = false;
    k.backward.notes = {"LibTorch autograd through the forward call, one sequence at a time; the adapter writes zeros "
                        "into the allocated keys outside a sequence"};
    if (op == Op::kCudaSdpa) {
      describe_cuda_backend();
    } else if (op == Op::kCpuMath) {
      name_ = "sdpa-math-cpu";
      k.summary = "PyTorch SDPA math path (aten::_scaled_dot_product_attention_math) on CPU";
      k.zero_length = Support::kNative;
      k.dv_differs = Support::kNative;
      k.returns_lse = false;
      k.notes.push_back("GQA through enable_gqa=True (repeat_interleave: head h reads h / (H / Hk))");
    } else {
      name_ = "cpu-flash";
      k.summary = "PyTorch CPU flash attention (aten::_scaled_dot_product_flash_attention_for_cpu)";
      // The op dies with SIGFPE on an empty query or key sequence (fixtures/found/cpu-flash-empty-sequence-sigfpe.json);
      // public SDPA never routes such inputs to it.
      k.zero_length = Support::kNo;
      k.dv_differs = Support::kNo;  // "Q/K/V should have the same head size"
      k.returns_lse = true;
      k.notes.push_back("LSE is returned in fp32; empty rows get LSE 0 and are not compared");
      // Known defect, kept out of generated cases so that campaigns look for other bugs; the fixture keeps it.
      k.backward.dtypes = {DType::kF32};
      k.backward.notes.push_back(
          "fp32 only: in fp16/bf16 the op accumulates dQ, dK and dV across blocks and across the query heads of a "
          "group in the input dtype, past the rule (fixtures/found/cpu-flash-backward-reduced-precision-accumulation.json)");
    }
  }

  std::string_view name() const override { return name_; }
  const Contract& contract() const override { return contract_; }
  std::string_view device() const override { return op_ == Op::kCudaSdpa ? "cuda" : "cpu"; }
  std::string unavailable_reason() const override {
#if defined(FLASHCHECK_HAVE_CUDA)
    if (op_ == Op::kCudaSdpa && !device::available()) return "no CUDA device on this machine";
#else
    if (op_ == Op::kCudaSdpa) return "built without CUDA";
#endif
    return "";
  }
  ContractCheck check(const KernelCase& c) const override {
    if (std::string why = unavailable_reason(); !why.empty()) return {false, std::move(why), {}};
#if defined(FLASHCHECK_HAVE_CUDA)
    // The flash backend rejects is_causal with q_len != k_len (sdp_utils check_flash_causal_non_square_seqlens):
    // its top-left causal would differ from flash-attn's own bottom-right one.
    // The cuDNN backend rejects a key length of 1 (sdp_utils: s_k != 1), and it returns neither 0 nor the
    // mean of V for a fully masked row: a known defect, kept out so that campaigns look for new ones.
    if (op_ == Op::kCudaSdpa && backend_ == SdpaBackend::kCudnn) {
      const CaseGeometry g = geometry(c);
      for (const SeqGeometry& s : g.seqs)
        if (s.lk == 1) return {false, "does not support a key length of 1 (SDPA's cuDNN backend rejects it)", {}};
      if (has_empty_rows(c))
        return {false, "known defect: fully masked rows are neither 0 nor finite averages of V (fixtures/found/sdpa-cudnn-fully-masked-rows.json)", {}};
    }
    if (op_ == Op::kCudaSdpa && backend_ == SdpaBackend::kFlash && c.causal) {
      const CaseGeometry g = geometry(c);
      for (const SeqGeometry& s : g.seqs)
        if (s.lq != s.lk) return {false, "does not support causal with q_len != k_len (SDPA's flash backend rejects it)", {}};
    }
#endif
    return Kernel::check(c);
  }
  std::string sticky_error() const override {
#if defined(FLASHCHECK_HAVE_CUDA)
    if (op_ == Op::kCudaSdpa) return cuda_sticky_error();
#endif
    return "";
  }

  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override {
    const CaseGeometry g = geometry(c);
    const ValueSource values = logical_values(c, in);
    const std::int64_t H = c.heads, dv = c.v_head_dim;
    for (std::size_t b = 0; b < c.seqs.size(); ++b) {
      const SeqGeometry& sg = g.seqs[b];
      const Leaves x = leaves(c, in, values, sg, static_cast<std::int64_t>(b), false);
      at::Tensor lse;
      const at::Tensor o = attend(c, x, sg.lq, &lse);
      // (1, H, Lq, dv) -> packed rows (Lq, H, dv).
      const std::vector<float> rows = torch_bridge::to_values(o.permute({0, 2, 1, 3}));
      if (static_cast<std::int64_t>(rows.size()) != sg.lq * H * dv)
        throw std::runtime_error(fmt::format("{} returned {} values, expected {}", name_, rows.size(), sg.lq * H * dv));
      std::copy(rows.begin(), rows.end(), out.out() + sg.q_start * H * dv);
      if (lse.defined()) {
        const std::vector<float> l = torch_bridge::to_values(lse.permute({0, 2, 1}));  // (Lq, H)
        std::copy(l.begin(), l.end(), out.lse() + sg.q_start * H);
        out.lse_written = true;
      }
    }
  }

  // The gradients through LibTorch's autograd of the very call run() makes, one sequence at a time; the
  // allocated keys outside a sequence get zeros (the contract's zeroes_unused_keys).
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer&, GradBuffer& grads) override {
    const CaseGeometry g = geometry(c);
    const ValueSource values = logical_values(c, in);
    const std::int64_t H = c.heads, Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim;
    for (std::size_t b = 0; b < c.seqs.size(); ++b) {
      const SeqGeometry& sg = g.seqs[b];
      const Leaves x = leaves(c, in, values, sg, static_cast<std::int64_t>(b), true);
      const at::Tensor o = attend(c, x, sg.lq, nullptr);
      std::vector<float> go(in.dout.data.begin() + sg.q_start * H * dv, in.dout.data.begin() + (sg.q_start + sg.lq) * H * dv);
      const at::Tensor dout =
          torch_bridge::from_values(go, {1, sg.lq, H, dv}, c.dtype).permute({0, 2, 1, 3}).to(o.device());
      const torch::autograd::variable_list gr =
          torch::autograd::grad({o}, {x.q, x.k, x.v}, {dout}, /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
      const auto rows_of = [](const at::Tensor& t, std::int64_t n) {
        return t.defined() ? torch_bridge::to_values(t) : std::vector<float>(static_cast<std::size_t>(n), 0.0f);
      };
      const std::vector<float> dq = rows_of(gr[0], sg.lq * H * d), dk = rows_of(gr[1], sg.lk * Hk * d),
                               dvv = rows_of(gr[2], sg.lk * Hk * dv);
      std::copy(dq.begin(), dq.end(), grads.dq() + sg.q_start * H * d);
      // The allocation: zeros, then the used keys [p0, kv_end) at their storage rows.
      std::fill(grads.dk() + sg.k_start * Hk * d, grads.dk() + (sg.k_start + sg.k_alloc) * Hk * d, 0.0f);
      std::fill(grads.dv() + sg.k_start * Hk * dv, grads.dv() + (sg.k_start + sg.k_alloc) * Hk * dv, 0.0f);
      std::copy(dk.begin(), dk.end(), grads.dk() + (sg.k_start + sg.p0) * Hk * d);
      std::copy(dvv.begin(), dvv.end(), grads.dv() + (sg.k_start + sg.p0) * Hk * dv);
    }
  }

 private:
  // One sequence's inputs as (1, L, heads, dim) tensors on the kernel's device (leaves of the autograd graph
  // when `grad`): its query rows and its logical keys, whatever the storage.
  struct Leaves {
    at::Tensor q, k, v;
  };
  Leaves leaves(const KernelCase& c, const CaseTensors& in, const ValueSource& values, const SeqGeometry& sg,
                std::int64_t b, bool grad) const {
    const std::int64_t H = c.heads, Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim;
    const SequenceKv kv = gather(c, values, sg, b);
    std::vector<float> qrows(in.q.data.begin() + sg.q_start * H * d, in.q.data.begin() + (sg.q_start + sg.lq) * H * d);
    const at::Device dev = op_ == Op::kCudaSdpa ? at::Device(at::kCUDA) : at::Device(at::kCPU);
    Leaves x{torch_bridge::from_values(qrows, {1, sg.lq, H, d}, c.dtype).to(dev),
             torch_bridge::from_values(kv.k, {1, kv.lk, Hk, d}, c.dtype).to(dev),
             torch_bridge::from_values(kv.v, {1, kv.lk, Hk, dv}, c.dtype).to(dev)};
    if (grad)
      for (at::Tensor* t : {&x.q, &x.k, &x.v}) t->set_requires_grad(true);
    return x;
  }

  // The op's output (1, H, Lq, dv) for one sequence, and its LSE where the op returns one. Native is_causal is
  // top-left; every other visibility pattern becomes an explicit mask.
  at::Tensor attend(const KernelCase& c, const Leaves& x, std::int64_t lq, at::Tensor* lse) const {
    const MaskRule rule = mask_rule(c);
    const std::int64_t H = c.heads, lk = x.k.size(1);
    const at::Tensor q = x.q.permute({0, 2, 1, 3}).contiguous();
    const at::Tensor k = bhsd(x.k, c.kv_strides, H);
    const at::Tensor v = bhsd(x.v, c.kv_strides, H);
    const at::Device dev = q.device();
    const bool windowed = rule.left >= 0 || rule.right >= 0;
    const bool plain_top_left_causal = c.causal && rule.left < 0 && (c.alignment == Alignment::kTopLeft || lq == lk);
    std::optional<at::Tensor> mask;
    if (windowed && !plain_top_left_causal) {
      const std::int64_t off = c.alignment == Alignment::kBottomRight ? lk - lq : 0;
      std::vector<float> m(static_cast<std::size_t>(lq * lk), -std::numeric_limits<float>::infinity());
      for (std::int64_t i = 0; i < lq; ++i)
        for (std::int64_t j = 0; j < lk; ++j) {
          const bool right_ok = rule.right < 0 || j <= i + off + rule.right;
          const bool left_ok = rule.left < 0 || j >= i + off - rule.left;
          if (right_ok && left_ok) m[static_cast<std::size_t>(i * lk + j)] = 0.0f;
        }
      mask = torch_bridge::from_values(m, {lq, lk}, c.dtype).to(dev);
      // The public SDPA takes a boolean mask (True = attend), as users pass it.
      if (op_ == Op::kCudaSdpa) mask = mask->eq(0);
    }
    const double scale = c.softmax_scale();
    at::Tensor o;
    if (op_ == Op::kCudaSdpa) {
      const ForcedBackend forced(backend_);
      at::Tensor kk = k, vv = v;
      if (backend_ == SdpaBackend::kEfficient && H != k.size(1)) {  // no enable_gqa in this backend
        kk = k.repeat_interleave(H / k.size(1), 1);
        vv = v.repeat_interleave(H / v.size(1), 1);
      }
      o = at::scaled_dot_product_attention(q, kk, vv, mask, 0.0, plain_top_left_causal, scale,
                                           /*enable_gqa=*/H != kk.size(1));
    } else if (op_ == Op::kCpuMath) {
      o = std::get<0>(at::_scaled_dot_product_attention_math(q, k, v, mask, 0.0, plain_top_left_causal, std::nullopt,
                                                              scale, /*enable_gqa=*/H != k.size(1)));
    } else {
      at::Tensor l;
      std::tie(o, l) = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, plain_top_left_causal, mask, scale);
      if (lse) *lse = l;
    }
    if (o.scalar_type() != torch_bridge::scalar_type(c.dtype))
      throw std::runtime_error(fmt::format("{} returned dtype {}", name_, c10::toString(o.scalar_type())));
    return o;
  }

  // Contracts of the public SDPA with one backend forced (torch 2.11 sdp_utils gates).
  void describe_cuda_backend() {
    Contract& k = contract_;
    k.returns_lse = false;
    k.notes.push_back("public scaled_dot_product_attention; masks are boolean (True = attend)");
    switch (backend_) {
      case SdpaBackend::kFlash:
        name_ = "sdpa-flash";
        k.summary = "scaled_dot_product_attention with only the flash backend enabled (CUDA)";
        k.bottom_right = k.window = Support::kNo;  // the flash backend takes no mask
        k.zero_length = Support::kNo;
        k.dtypes = {DType::kF16, DType::kBF16};
        k.max_head_dim = 256;
        k.head_dim_multiple = 8;
        k.notes.push_back("no explicit masks: bottom-right causal and windows are unsupported");
        break;
      case SdpaBackend::kEfficient:
        name_ = "sdpa-efficient";
        k.gqa = Support::kTranslated;
        k.notes.push_back("GQA: KV heads repeated by the adapter (this backend does not take enable_gqa)");
        k.summary = "scaled_dot_product_attention with only the memory-efficient backend enabled (CUDA)";
        k.zero_length = Support::kNo;
        k.dtypes = {DType::kF16, DType::kBF16, DType::kF32};
        k.max_head_dim = 256;
        k.head_dim_multiple = 8;
        break;
      case SdpaBackend::kCudnn:
        name_ = "sdpa-cudnn";
        k.coverage_exempt = {{"empty-rows", "fully masked rows are a known defect (excluded in check)"}};
        k.summary = "scaled_dot_product_attention with only the cuDNN backend enabled (CUDA)";
        k.zero_length = Support::kNo;
        k.dv_differs = Support::kNo;
        k.dtypes = {DType::kF16, DType::kBF16};
        k.max_head_dim = 128;
        k.head_dim_multiple = 8;
        break;
      case SdpaBackend::kMath:
        name_ = "sdpa-math-cuda";
        k.summary = "scaled_dot_product_attention with only the math backend enabled (CUDA)";
        k.zero_length = Support::kNative;
        k.dv_differs = Support::kNative;
        k.dtypes = {DType::kF16, DType::kBF16, DType::kF32};
        break;
    }
    // The flash, memory-efficient and cuDNN backwards accumulate dQ (and dK/dV across query blocks) with atomics.
    k.backward.deterministic = backend_ == SdpaBackend::kMath;
  }

  Op op_;
  SdpaBackend backend_;
  std::string name_;
  Contract contract_;
};

}  // namespace

void register_torch_cpu_kernels(Registry& r) {
  r.add(std::make_unique<TorchSdpaAttention>(Op::kCpuMath));
  r.add(std::make_unique<TorchSdpaAttention>(Op::kCpuFlash));
}

std::unique_ptr<Kernel> make_sdpa_cuda_kernel(SdpaBackend backend) {
  return std::make_unique<TorchSdpaAttention>(Op::kCudaSdpa, backend);
}

}  // namespace flashcheck
