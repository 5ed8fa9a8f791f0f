#include "oracles/model_autograd.h"

#include <torch/csrc/autograd/autograd.h>

#include "kernels/torch/torch_tensors.h"

namespace flashcheck::hf::detail {

Leaves model_leaves(const ModelCase& m, const ModelTensors& t, bool grad) {
  Leaves x{torch_bridge::from_values(t.q.data, t.q.shape, m.dtype), torch_bridge::from_values(t.k.data, t.k.shape, m.dtype),
           torch_bridge::from_values(t.v.data, t.v.shape, m.dtype)};
  if (grad)
    for (at::Tensor* p : {&x.q, &x.k, &x.v}) p->set_requires_grad(true);
  return x;
}

GradientResult model_gradients(const ModelCase& m, const Leaves& x, const at::Tensor& out, const HostTensor& dout) {
  const at::Tensor g = torch_bridge::from_values(dout.data, dout.shape, m.dtype).to(out.device()).reshape(out.sizes());
  const torch::autograd::variable_list d =
      torch::autograd::grad({out}, {x.q, x.k, x.v}, {g}, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
  const auto values = [](const at::Tensor& t, const at::Tensor& like) {
    const std::vector<float> f = t.defined() ? torch_bridge::to_values(t) : std::vector<float>(static_cast<std::size_t>(like.numel()), 0.0f);
    return std::vector<double>(f.begin(), f.end());
  };
  GradientResult r;
  r.dq = values(d[0], x.q);
  r.dk = values(d[1], x.k);
  r.dv = values(d[2], x.v);
  return r;
}

}  // namespace flashcheck::hf::detail
