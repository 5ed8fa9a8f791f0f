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

// (1, heads, L, dim) tensor from (L, heads, dim) rows, presented with the case's K/V strides.
at::Tensor bhsd(const std::vector<float>& rows, std::int64_t len, std::int64_t heads, std::int64_t dim, DType dt,
                KvStrides strides, std::int64_t expand_to) {
  at::Tensor t = torch_bridge::from_values(rows, {1, len, heads, dim}, dt).permute({0, 2, 1, 3});
  if (strides == KvStrides::kContiguous) return t.contiguous();
  if (strides == KvStrides::kExpanded) return t.contiguous().expand({1, expand_to, len, dim});
  // Gapped: every row padded by 8 elements, every head by 3 rows; the innermost dimension stays dense.
  at::Tensor big = at::full({1, heads, len + 3, dim + 8}, std::numeric_limits<float>::quiet_NaN(),
                            at::TensorOptions().dtype(torch_bridge::scalar_type(dt)));
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
    const MaskRule rule = mask_rule(c);
    const std::int64_t H = c.heads, Hk = c.kv_heads, d = c.head_dim, dv = c.v_head_dim;
    const at::ScalarType st = torch_bridge::scalar_type(c.dtype);
    for (std::size_t b = 0; b < c.seqs.size(); ++b) {
      const SeqGeometry& sg = g.seqs[b];
      const std::int64_t lq = sg.lq;
      const SequenceKv kv = gather(c, values, sg, static_cast<std::int64_t>(b));
      const std::int64_t lk = kv.lk;
      std::vector<float> qrows(in.q.data.begin() + sg.q_start * H * d, in.q.data.begin() + (sg.q_start + lq) * H * d);
      const at::Device dev = op_ == Op::kCudaSdpa ? at::Device(at::kCUDA) : at::Device(at::kCPU);
      const at::Tensor q = torch_bridge::from_values(qrows, {1, lq, H, d}, c.dtype).permute({0, 2, 1, 3}).contiguous().to(dev);
      const at::Tensor k = bhsd(kv.k, lk, Hk, d, c.dtype, c.kv_strides, H).to(dev);
      const at::Tensor v = bhsd(kv.v, lk, Hk, dv, c.dtype, c.kv_strides, H).to(dev);

      // Native is_causal is top-left; anything else becomes an explicit mask.
      const bool windowed = rule.left >= 0 || rule.right >= 0;
      const bool plain_top_left_causal =
          c.causal && rule.left < 0 && (c.alignment == Alignment::kTopLeft || lq == lk);
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
      at::Tensor o, lse;
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
        std::tie(o, lse) = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, plain_top_left_causal, mask, scale);
      }
      if (o.scalar_type() != st) throw std::runtime_error(fmt::format("{} returned dtype {}", name_, c10::toString(o.scalar_type())));
      // (1, H, Lq, dv) -> packed rows (Lq, H, dv).
      const std::vector<float> rows = torch_bridge::to_values(o.permute({0, 2, 1, 3}));
      if (static_cast<std::int64_t>(rows.size()) != lq * H * dv)
        throw std::runtime_error(fmt::format("{} returned {} values, expected {}", name_, rows.size(), lq * H * dv));
      std::copy(rows.begin(), rows.end(), out.out() + sg.q_start * H * dv);
      if (lse.defined()) {
        const std::vector<float> l = torch_bridge::to_values(lse.permute({0, 2, 1}));  // (Lq, H)
        std::copy(l.begin(), l.end(), out.lse() + sg.q_start * H);
        out.lse_written = true;
      }
    }
  }

 private:
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
