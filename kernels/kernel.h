// The interface every kernel under test implements, and the registry that names them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/case_tensors.h"
#include "core/kernel_case.h"
#include "kernels/contract.h"
#include "kernels/grad_buffer.h"
#include "kernels/output_buffer.h"

namespace flashcheck {

namespace device {
class DeviceCase;
class DeviceOutput;
}  // namespace device

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string_view name() const = 0;
  virtual const Contract& contract() const = 0;

  // Why this kernel cannot run on this machine at all (no GPU), or "". Unlike the contract, fixtures that
  // run a kernel outside its contract cannot override this.
  virtual std::string unavailable_reason() const { return ""; }

  // Whether this case can run here: the contract, plus anything only known at run time (a missing GPU).
  virtual ContractCheck check(const KernelCase& c) const {
    if (std::string why = unavailable_reason(); !why.empty()) return {false, std::move(why), {}};
    return check_backward_contract(contract(), c);
  }

  // Computes attention for a case inside the contract and writes the valid rows of the packed output
  // (total_q, H, dv) into `out` (and the LSE, setting out.lse_written). Reports failure by throwing.
  virtual void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) = 0;

  // Backward cases of a kernel whose contract has a backward: dQ, dK and dV of run()'s output for the upstream
  // gradient in.dout, written into `grads` (core/defined_memory.h says which rows must be). `fwd` holds what run()
  // wrote for the same case and tensors (output and LSE), as a flash backward takes them. Throws on failure.
  virtual void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, GradBuffer& grads);

  // GPU kernels take their inputs and write their output on the device (core/device); their run() goes
  // through the device by uploading and downloading. The fast conformance path uses run_device directly.
  virtual bool on_device() const { return false; }
  // Where the kernel computes: "cpu" or "cuda" (what `flashcheck list --json` reports as "device").
  virtual std::string_view device() const { return "cpu"; }
  virtual void run_device(const device::DeviceCase& in, device::DeviceOutput& out);
  // The device path of a backward (grad-conformance on the GPU): dQ, dK and dV of a backward case whose inputs and dO
  // are on the device, written into the out() of three device buffers, in GradBuffer's layouts. Kernels that say
  // has_device_backward() implement it; the others take the host path. Throws on failure.
  virtual bool has_device_backward() const { return false; }
  virtual void run_backward_device(const device::DeviceCase& in, device::DeviceOutput& dq, device::DeviceOutput& dk,
                                   device::DeviceOutput& dv);
  // After a failed or finished run: a description of a sticky device error (the CUDA context is then
  // unusable and the process must record its case and exit), or "".
  virtual std::string sticky_error() const { return ""; }

  // Deliberately broken kernels (kernels/native/mutants) prove that properties catch what they claim.
  virtual bool is_mutant() const { return false; }
  virtual std::string_view mutant_description() const { return ""; }
};

class Registry {
 public:
  // Makes kernels on demand for names that start with `prefix` ("py:package.module:function"): `make`
  // returns the kernel, or throws InputError saying why the name cannot be resolved.
  using Resolver = std::function<std::unique_ptr<Kernel>(std::string_view name)>;

  void add(std::unique_ptr<Kernel> k);
  void add_resolver(std::string prefix, Resolver make);
  // The kernel of that name; a name a resolver answers is resolved (and kept) on first use.
  Kernel* find(std::string_view name);
  // Only among the kernels registered so far (no resolving).
  Kernel* find_registered(std::string_view name) const;
  // Whether a resolver answers this name (without resolving it: a Python kernel would be imported).
  bool resolvable(std::string_view name) const;
  // Kernels under test (no mutants), in registration order.
  std::vector<Kernel*> kernels() const;
  std::vector<Kernel*> mutants() const;
  std::vector<std::string> names(bool with_mutants) const;

 private:
  std::vector<std::unique_ptr<Kernel>> all_;
  std::vector<std::pair<std::string, Resolver>> resolvers_;
};

// Every kernel this build provides: the CPU kernels, the CUDA kernels in a CUDA build, and the mutants.
Registry& builtin_registry();

// Whether some build of flashcheck has a kernel of this name (this build's registry, or the CUDA build's
// kernels in a CPU build): what a fixture's `expect` may name. A name a resolver answers ("py:...") counts
// without being resolved, so that validating a fixture never imports a Python kernel the run does not use.
bool is_known_kernel_name(std::string_view name);

}  // namespace flashcheck
