// Every property judges only defined memory (core/defined_memory.h): a kernel that fills every slot it is free to
// leave with garbage (random values, NaN, +-inf, different in every run) gets the verdicts the same kernel gets
// without it, on every property, forward and backward. The regression this guards: determinism compared whole
// output buffers, and a slack row holding 0 in one run and NaN in the next failed a correct kernel.
#include <cmath>
#include <gtest/gtest.h>
#include <limits>

#include "core/defined_memory.h"
#include "core/geometry.h"
#include "core/rng.h"
#include "kernels/kernel.h"
#include "properties/property.h"
#include "search/samples.h"

namespace flashcheck {
namespace {

// tiled-cpu, then garbage in the slack rows of the output, LSE, dQ, dK and dV, in the LSE of rows without keys and
// (with `leaves_unused_keys`, a contract that no longer promises zeros there) in the keys outside each sequence.
class GarbageWriter : public Kernel {
 public:
  explicit GarbageWriter(bool leaves_unused_keys) : inner_(*builtin_registry().find("tiled-cpu")), contract_(inner_.contract()) {
    contract_.backward.zeroes_unused_keys = !leaves_unused_keys;
  }
  std::string_view name() const override { return "garbage-writer"; }
  const Contract& contract() const override { return contract_; }
  std::int64_t planted() const { return planted_; }

  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override {
    inner_.run(c, in, out);
    const CaseGeometry g = geometry(c);
    const std::vector<std::uint8_t> empty = empty_query_rows(c, g);
    const std::int64_t H = c.heads, dv = c.v_head_dim;
    for (std::int64_t row = g.total_q; row < g.q_rows; ++row) {
      fill(out.out() + row * H * dv, H * dv);
      fill(out.lse() + row * H, H);
    }
    for (std::int64_t row = 0; row < g.total_q; ++row)
      if (empty[static_cast<std::size_t>(row)]) fill(out.lse() + row * H, H);
  }

  // The backward consumes its own forward's saved state, as a flash backward does (FA2's backward reads the +inf
  // LSE its forward leaves on rows without keys), so it gets a clean forward; the garbage is in what it writes.
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer&, GradBuffer& grads) override {
    OutputBuffer own = output_buffer_for(c, geometry(c));
    inner_.run(c, in, own);
    inner_.run_backward(c, in, own, grads);
    const CaseGeometry g = geometry(c);
    const std::int64_t qw = c.heads * c.head_dim, kw = c.kv_heads * c.head_dim, vw = c.kv_heads * c.v_head_dim;
    for (std::int64_t row = g.total_q; row < g.q_rows; ++row) fill(grads.dq() + row * qw, qw);
    std::vector<std::uint8_t> defined(static_cast<std::size_t>(g.kv_rows), 0);
    for (const RowSpan& s : key_rows(g, contract_.backward.zeroes_unused_keys))
      for (std::int64_t row = s.begin; row < s.end; ++row) defined[static_cast<std::size_t>(row)] = 1;
    for (std::int64_t row = 0; row < g.kv_rows; ++row)
      if (!defined[static_cast<std::size_t>(row)]) {
        fill(grads.dk() + row * kw, kw);
        fill(grads.dv() + row * vw, vw);
      }
  }

 private:
  // A different kind of garbage in every call: random values, NaN, +inf, -inf.
  void fill(float* p, std::int64_t n) {
    ++calls_;
    for (std::int64_t i = 0; i < n; ++i) {
      const Philox4 r = element_bits(calls_, TensorId::kQ, 0, static_cast<std::uint32_t>(i), 0, 0);
      switch (calls_ % 4) {
        case 0: p[i] = static_cast<float>(unit_uniform(r.w[0]) * 2e4 - 1e4); break;
        case 1: p[i] = std::numeric_limits<float>::quiet_NaN(); break;
        case 2: p[i] = std::numeric_limits<float>::infinity(); break;
        default: p[i] = -std::numeric_limits<float>::infinity(); break;
      }
    }
    planted_ += n;
  }

  Kernel& inner_;
  Contract contract_;
  std::uint64_t calls_ = 0;
  std::int64_t planted_ = 0;
};

void expect_same_verdicts(bool leaves_unused_keys) {
  Kernel& plain = *builtin_registry().find("tiled-cpu");
  for (const Property* p : all_properties()) {
    if (p->level() != CaseLevel::kKernel || !p->unsupported_reason(plain).empty()) continue;
    GarbageWriter garbage(leaves_unused_keys);
    for (KernelCase c : sample_kernel_cases(generation_contract(plain.contract(), p->requirements()), p->requirements(), 20, 7)) {
      c.slack = {.q_rows = 3, .kv_rows = 2};  // every case has slots to fill
      if (c.kv_storage == KvStorage::kPaged || c.layout != QLayout::kVarlen) c.slack = {};
      const Verdict a = p->check(plain, c), b = p->check(garbage, c);
      EXPECT_EQ(a.kind, b.kind) << p->name() << " on " << summary(c) << "\n  plain:   " << describe(a) << "\n  garbage: " << describe(b);
    }
    EXPECT_GT(garbage.planted(), 0) << p->name() << ": no garbage was planted, the test proves nothing";
  }
}

TEST(DefinedMemory, GarbageInSlotsAKernelMayLeaveChangesNoVerdict) { expect_same_verdicts(false); }

TEST(DefinedMemory, KeysOutsideTheSequencesAreUndefinedUnlessTheContractPromisesZeros) { expect_same_verdicts(true); }

// The test can fail: garbage in a defined slot (the last valid output row) changes the verdicts.
TEST(DefinedMemory, GarbageInADefinedRowIsCaught) {
  class DefinedGarbage : public Kernel {
   public:
    std::string_view name() const override { return "defined-garbage"; }
    const Contract& contract() const override { return builtin_registry().find("tiled-cpu")->contract(); }
    void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override {
      builtin_registry().find("tiled-cpu")->run(c, in, out);
      const CaseGeometry g = geometry(c);
      if (g.total_q > 0) out.out()[(g.total_q - 1) * c.heads * c.v_head_dim] = ++runs_ % 2 ? 1e4f : -1e4f;
    }

   private:
    int runs_ = 0;
  } k;
  KernelCase c;
  c.dtype = DType::kF32;
  c.seqs = {{.q_len = 3, .k_len = 3}};
  c.slack = {.q_rows = 2};
  EXPECT_EQ(find_property("determinism")->check(k, c).kind, VerdictKind::kFail);
  EXPECT_EQ(find_property("conformance")->check(k, c).kind, VerdictKind::kFail);
}

}  // namespace
}  // namespace flashcheck
