#include <stdexcept>

#include "kernels/kernel.h"
#include "kernels/native/mutants.h"
#include "kernels/native/tiled_cpu.h"
#include "kernels/torch/cuda_kernels.h"
#include "kernels/torch/torch_cpu_kernels.h"

namespace flashcheck {

void Kernel::run_device(const device::DeviceCase&, device::DeviceOutput&) {
  throw std::logic_error(std::string(name()) + " does not run on the device");
}

void Kernel::run_backward_device(const device::DeviceCase&, device::DeviceOutput&, device::DeviceOutput&,
                                 device::DeviceOutput&) {
  throw std::logic_error(std::string(name()) + " has no backward on the device");
}

void Kernel::run_backward(const KernelCase&, const CaseTensors&, const OutputBuffer&, GradBuffer&) {
  throw std::logic_error(std::string(name()) + " has no backward");
}

void Registry::add(std::unique_ptr<Kernel> k) {
  for (const auto& existing : all_)
    if (existing->name() == k->name()) throw std::logic_error("kernel registered twice: " + std::string(k->name()));
  all_.push_back(std::move(k));
}

void Registry::add_resolver(std::string prefix, Resolver make) { resolvers_.emplace_back(std::move(prefix), std::move(make)); }

Kernel* Registry::find_registered(std::string_view name) const {
  for (const auto& k : all_)
    if (k->name() == name) return k.get();
  return nullptr;
}

bool Registry::resolvable(std::string_view name) const {
  for (const auto& [prefix, make] : resolvers_)
    if (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

Kernel* Registry::find(std::string_view name) {
  if (Kernel* k = find_registered(name)) return k;
  for (const auto& [prefix, make] : resolvers_)
    if (name.substr(0, prefix.size()) == prefix) {
      add(make(name));
      return all_.back().get();
    }
  return nullptr;
}

std::vector<Kernel*> Registry::kernels() const {
  std::vector<Kernel*> v;
  for (const auto& k : all_)
    if (!k->is_mutant()) v.push_back(k.get());
  return v;
}

std::vector<Kernel*> Registry::mutants() const {
  std::vector<Kernel*> v;
  for (const auto& k : all_)
    if (k->is_mutant()) v.push_back(k.get());
  return v;
}

std::vector<std::string> Registry::names(bool with_mutants) const {
  std::vector<std::string> v;
  for (const auto& k : all_)
    if (with_mutants || !k->is_mutant()) v.emplace_back(k->name());
  return v;
}

const std::vector<std::string>& cuda_kernel_names() {
  static const std::vector<std::string> names{"flash-fwd-dense",
                                              "flash-fwd-varlen",
                                              "flash-fwd-dense-deterministic",
                                              "flash-fwd-varlen-deterministic",
                                              "efficient-fwd-dense",
                                              "efficient-fwd-varlen",
                                              "cudnn-fwd",
                                              "sdpa-flash",
                                              "sdpa-efficient",
                                              "sdpa-cudnn",
                                              "sdpa-math-cuda"};
  return names;
}

bool is_known_kernel_name(std::string_view name) {
  if (builtin_registry().find_registered(name) || builtin_registry().resolvable(name)) return true;
  for (const std::string& n : cuda_kernel_names())
    if (n == name) return true;
  return false;
}

Registry& builtin_registry() {
  static Registry* registry = [] {
    auto* r = new Registry;
    register_tiled_cpu_kernels(*r);
    register_torch_cpu_kernels(*r);
#if defined(FLASHCHECK_HAVE_CUDA)
    register_cuda_kernels(*r);
#endif
    register_mutants(*r);
    return r;
  }();
  return *registry;
}

}  // namespace flashcheck
