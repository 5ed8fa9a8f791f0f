// The plugin adapter (kernels/plugin/plugin_kernel.h). LibTorch does the dtype conversions and, for "cuda"
// kernels, keeps the tensors on the device; the plugin sees plain DLTensors over that memory.
#include "kernels/plugin/plugin_kernel.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <fmt/format.h>
#include <optional>
#include <stdexcept>

#include "core/geometry.h"
#include "flashcheck/plugin.h"
#include "kernels/flash_args.h"
#include "kernels/torch/torch_tensors.h"
#if defined(FLASHCHECK_HAVE_CUDA)
#include "kernels/device_kernel.h"
#include "kernels/torch/torch_device_tensors.h"
#endif

namespace flashcheck {
namespace {

DLDataType dl_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kHalf: return {kDLFloat, 16, 1};
    case at::kBFloat16: return {kDLBfloat, 16, 1};
    case at::kFloat: return {kDLFloat, 32, 1};
    case at::kInt: return {kDLInt, 32, 1};
    default: throw std::logic_error("plugin adapter: unexpected tensor dtype");
  }
}

// DLTensor views of at::Tensors; the tensors (and this object) outlive the call.
class Views {
 public:
  DLTensor* of(const std::optional<at::Tensor>& t) {
    if (!t) return nullptr;
    keep_.push_back(*t);
    const at::Tensor& x = keep_.back();
    DLTensor d{};
    d.data = x.data_ptr();
    d.device = x.is_cuda() ? DLDevice{kDLCUDA, static_cast<std::int32_t>(x.get_device())} : DLDevice{kDLCPU, 0};
    d.ndim = static_cast<std::int32_t>(x.dim());
    d.dtype = dl_dtype(x);
    d.shape = const_cast<std::int64_t*>(x.sizes().data());
    d.strides = const_cast<std::int64_t*>(x.strides().data());
    d.byte_offset = 0;
    views_.push_back(d);
    return &views_.back();
  }

 private:
  std::deque<at::Tensor> keep_;  // deques: pointers into them stay valid as they grow
  std::deque<DLTensor> views_;
};

// A buffer the kernel writes, inside a larger allocation whose margins (a row and 64 elements on each side) hold a
// canary bit pattern: a write past either end lands there, not in the heap, and is counted after the call. The output
// buffer of the harness's own kernels does the same (kernels/output_buffer.h); plugins and Python kernels (the bridge
// is a plugin) write into these tensors instead.
struct Guard {
  std::string name;
  at::Tensor whole;  // margin, interior, margin: raw integer bits of the element size
  std::int64_t margin = 0, n = 0, pattern = 0;
};

// The tensors of one call, already on the kernel's device and in its dtype (a backward call adds the upstream
// gradient and the gradients it writes), and the guards of those the kernel writes.
struct CallTensors {
  at::Tensor q, k, v, out;
  std::optional<at::Tensor> k_new, v_new, lse;
  std::optional<at::Tensor> dout, dq, dk, dv;
  std::vector<Guard> guards;
};

// A NaN-filled tensor of `shape` and `dtype` on `dev` inside canary margins (recorded in `guards`).
at::Tensor guarded(std::vector<Guard>& guards, const char* name, const std::vector<std::int64_t>& shape, at::ScalarType dtype,
                   const at::Device& dev) {
  std::int64_t n = 1;
  for (std::int64_t x : shape) n *= x;
  const std::int64_t row = shape.size() > 1 ? n / std::max<std::int64_t>(shape[0], 1) : 1;
  const bool two = c10::elementSize(dtype) == 2;
  Guard g{name, {}, row + 64, n, two ? 0x7DAD : 0x7FADBEEF};  // NaN bit patterns no computation produces
  g.whole = at::full({n + 2 * g.margin}, g.pattern, at::TensorOptions().dtype(two ? at::kShort : at::kInt).device(dev));
  at::Tensor inner = g.whole.narrow(0, g.margin, n).view(dtype).view(shape);
  inner.fill_(std::numeric_limits<float>::quiet_NaN());
  guards.push_back(std::move(g));
  return inner;
}

// Throws when the kernel wrote into a margin: how many canary elements changed before and after each buffer.
void check_guards(const std::string& kernel, const std::vector<Guard>& guards) {
  std::string damage;
  for (const Guard& g : guards) {
    const std::int64_t before = g.whole.narrow(0, 0, g.margin).ne(g.pattern).sum().item<std::int64_t>();
    const std::int64_t after = g.whole.narrow(0, g.margin + g.n, g.margin).ne(g.pattern).sum().item<std::int64_t>();
    if (before + after > 0)
      damage += fmt::format("{}{}: {} of {} canary elements before it and {} of {} after it", damage.empty() ? "" : "; ",
                            g.name, before, g.margin, after, g.margin);
  }
  if (!damage.empty())
    throw std::runtime_error(fmt::format("{} wrote outside the buffers it was given (out-of-bounds writes): {}", kernel,
                                         damage));
}

std::optional<at::Tensor> int32(const std::vector<std::int32_t>& v, std::vector<std::int64_t> shape, bool cuda) {
  if (v.empty()) return std::nullopt;
  at::Tensor h = at::empty(shape, at::TensorOptions().dtype(at::kInt));
  std::memcpy(h.data_ptr<std::int32_t>(), v.data(), v.size() * sizeof(std::int32_t));
  return cuda ? h.to(at::kCUDA) : h;
}

// Calls the plugin's forward, or its backward when the tensors carry dout; throws with its message when it reports
// an error.
void call(const PluginKernelSpec& spec, const KernelCase& c, const CallTensors& t) {
  const FlashcheckKernel* k = spec.entry();
  const FlashArgs a = flash_args(c);
  const bool cuda = spec.device == "cuda";
  Views views;
  FlashcheckRunArgs args{};
  args.abi_version = FLASHCHECK_PLUGIN_ABI_VERSION;
  args.q = views.of(t.q);
  args.k = views.of(t.k);
  args.v = views.of(t.v);
  args.k_new = views.of(t.k_new);
  args.v_new = views.of(t.v_new);
  const std::int64_t B = a.batch;
  args.cu_seqlens_q = views.of(int32(a.cu_seqlens_q, {B + 1}, cuda));
  args.cu_seqlens_k = views.of(int32(a.cu_seqlens_k, {B + 1}, cuda));
  args.seqused_k = views.of(int32(a.seqused_k, {B}, cuda));
  args.leftpad_k = views.of(int32(a.leftpad_k, {B}, cuda));
  args.cache_seqlens = views.of(int32(a.cache_seqlens, {B}, cuda));
  args.cu_seqlens_k_new = views.of(int32(a.cu_seqlens_k_new, {B + 1}, cuda));
  args.block_table = views.of(int32(a.block_table, {B, a.max_blocks}, cuda));
  args.out = views.of(t.out);
  args.lse = views.of(t.lse);
  args.batch = a.batch;
  args.max_seqlen_q = a.max_seqlen_q;
  args.max_seqlen_k = a.max_seqlen_k;
  args.page_size = a.page_size;
  args.softmax_scale = a.softmax_scale;
  args.softcap = a.softcap;
  args.is_causal = a.is_causal;
  args.top_left = c.alignment == Alignment::kTopLeft;
  args.window_left = a.window_left;
  args.window_right = a.window_right;
  args.stream = nullptr;  // the legacy default stream, which the harness synchronizes after the call
  char error[2048] = {0};
  int rc;
  if (t.dout) {
    if (!k->backward) throw std::runtime_error(fmt::format("{} has no backward entry", spec.name));
    FlashcheckBackwardArgs bw{};
    bw.abi_version = FLASHCHECK_PLUGIN_ABI_VERSION;
    bw.forward = &args;
    bw.dout = views.of(t.dout);
    bw.dq = views.of(t.dq);
    bw.dk = views.of(t.dk);
    bw.dv = views.of(t.dv);
    rc = k->backward(k, &bw, error, sizeof error);
  } else {
    rc = k->run(k, &args, error, sizeof error);
  }
  error[sizeof error - 1] = '\0';
  check_guards(spec.name, t.guards);
  if (rc != FLASHCHECK_OK)
    throw std::runtime_error(error[0] ? std::string(error) : fmt::format("{} returned {} without a message", spec.name, rc));
}

// Output tensors in the case's dtype (the plugin writes them), NaN-filled so that unwritten rows show.
void make_outputs(const KernelCase& c, std::int64_t total_q, const at::Device& dev, bool lse, CallTensors& t) {
  t.out = guarded(t.guards, "out", {total_q, c.heads, c.v_head_dim}, torch_bridge::scalar_type(c.dtype), dev);
  if (lse) t.lse = guarded(t.guards, "lse", {total_q, c.heads}, at::kFloat, dev);
}

// The inputs of a backward call and its NaN-filled gradients, on `dev`: q, k, v, dout from the case's tensors, out
// and lse from what the forward wrote.
CallTensors backward_tensors(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, const at::Device& dev) {
  const auto tensor = [&](const HostTensor& h) { return torch_bridge::from_values(h.data, h.shape, c.dtype).to(dev); };
  const CaseGeometry g = geometry(c);
  CallTensors t;
  t.q = tensor(in.q);
  t.k = tensor(in.k);
  t.v = tensor(in.v);
  t.dout = tensor(in.dout);
  t.out = torch_bridge::from_values(std::vector<float>(fwd.out(), fwd.out() + fwd.out_elems()), {g.q_rows, c.heads, c.v_head_dim}, c.dtype)
              .to(dev);
  if (fwd.lse_written)
    t.lse = torch_bridge::from_values(std::vector<float>(fwd.lse(), fwd.lse() + fwd.lse_elems()), {g.q_rows, c.heads}, DType::kF32)
                .to(dev);
  const at::ScalarType dt = torch_bridge::scalar_type(c.dtype);
  t.dq = guarded(t.guards, "dq", {g.q_rows, c.heads, c.head_dim}, dt, dev);
  t.dk = guarded(t.guards, "dk", {g.kv_rows, c.kv_heads, c.head_dim}, dt, dev);
  t.dv = guarded(t.guards, "dv", {g.kv_rows, c.kv_heads, c.v_head_dim}, dt, dev);
  return t;
}

void read_gradients(const CallTensors& t, GradBuffer& grads) {
  const std::vector<float> dq = torch_bridge::to_values(*t.dq), dk = torch_bridge::to_values(*t.dk),
                           dv = torch_bridge::to_values(*t.dv);
  std::copy(dq.begin(), dq.end(), grads.dq());
  std::copy(dk.begin(), dk.end(), grads.dk());
  std::copy(dv.begin(), dv.end(), grads.dv());
}

class HostPluginKernel : public Kernel {
 public:
  explicit HostPluginKernel(PluginKernelSpec spec) : spec_(std::move(spec)) {}
  std::string_view name() const override { return spec_.name; }
  const Contract& contract() const override { return spec_.contract; }
  std::string_view device() const override { return spec_.device; }
  std::string unavailable_reason() const override {
    return spec_.device == "cuda" ? "a cuda plugin kernel needs the CUDA build of flashcheck" : "";
  }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override {
    auto tensor = [&](const HostTensor& h) -> std::optional<at::Tensor> {
      if (h.empty()) return std::nullopt;
      return torch_bridge::from_values(h.data, h.shape, c.dtype);
    };
    CallTensors t;
    t.q = *tensor(in.q);
    t.k = *tensor(in.k);
    t.v = *tensor(in.v);
    t.k_new = tensor(in.k_new);
    t.v_new = tensor(in.v_new);
    make_outputs(c, geometry(c).total_q, at::kCPU, spec_.contract.returns_lse, t);
    call(spec_, c, t);
    const std::vector<float> o = torch_bridge::to_values(t.out);
    std::copy(o.begin(), o.end(), out.out());
    if (t.lse) {
      const std::vector<float> l = torch_bridge::to_values(*t.lse);
      std::copy(l.begin(), l.end(), out.lse());
      out.lse_written = true;
    }
  }
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, GradBuffer& grads) override {
    const CallTensors t = backward_tensors(c, in, fwd, at::kCPU);
    call(spec_, c, t);
    read_gradients(t, grads);
  }

 private:
  PluginKernelSpec spec_;
};

#if defined(FLASHCHECK_HAVE_CUDA)
class DevicePluginKernel : public DeviceKernel {
 public:
  explicit DevicePluginKernel(PluginKernelSpec spec) : spec_(std::move(spec)) {}
  std::string_view name() const override { return spec_.name; }
  const Contract& contract() const override { return spec_.contract; }
  void run_device(const device::DeviceCase& dc, device::DeviceOutput& out) override {
    const KernelCase& c = dc.kcase();
    CallTensors t;
    t.q = torch_cuda::packed_q(dc);
    t.k = torch_cuda::packed_kv(dc, false);
    t.v = torch_cuda::packed_kv(dc, true);
    if (c.kv_storage == KvStorage::kPaged) {  // pages: (num_pages, page_size, Hk, d)
      const std::int64_t ps = c.paging.page_size;
      t.k = t.k.view({-1, ps, t.k.size(1), t.k.size(2)});
      t.v = t.v.view({-1, ps, t.v.size(1), t.v.size(2)});
    }
    if (dc.inputs().k_new) {
      const std::int64_t rows = geometry(c).total_new;
      t.k_new = torch_cuda::view(dc.inputs().k_new, {rows, c.kv_heads, c.head_dim}).to(torch_bridge::scalar_type(c.dtype));
      t.v_new = torch_cuda::view(dc.inputs().v_new, {rows, c.kv_heads, c.v_head_dim}).to(torch_bridge::scalar_type(c.dtype));
    }
    make_outputs(c, dc.geometry().total_q, at::kCUDA, spec_.contract.returns_lse, t);
    call(spec_, c, t);
    torch_cuda::write_out(t.out, out);
    if (t.lse) torch_cuda::write_lse(*t.lse, out);
  }
  // The backward goes through the host's tensors: gradients are compared on the host (properties/gradient_*).
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, GradBuffer& grads) override {
    const CallTensors t = backward_tensors(c, in, fwd, at::kCUDA);
    call(spec_, c, t);
    read_gradients(t, grads);
  }

 private:
  PluginKernelSpec spec_;
};
#endif

}  // namespace

std::unique_ptr<Kernel> make_plugin_kernel(PluginKernelSpec spec) {
#if defined(FLASHCHECK_HAVE_CUDA)
  if (spec.device == "cuda") return std::make_unique<DevicePluginKernel>(std::move(spec));
#endif
  return std::make_unique<HostPluginKernel>(std::move(spec));
}

}  // namespace flashcheck
