// Each property fails on the deliberately broken kernel written for the defect it exists to catch, and
// the runner shrinks the counterexample to a small case. Without these a property could pass everything.
#include <cmath>
#include <gtest/gtest.h>

#include "kernels/kernel.h"
#include "search/fuzz.h"
#include "properties/property.h"

namespace flashcheck {
namespace {

struct Expect {
  const char* property;
  const char* mutant;
  std::int64_t max_batch, max_heads, max_len;  // bounds on the minimized counterexample
};

FuzzReport hunt(const Expect& e) {
  FuzzOptions o;
  o.cases = 200;
  o.seed = 11;
  o.stop_at_first_failure = true;
  o.shrink = {400, 60};
  return run_fuzz(*builtin_registry().find(e.mutant), *find_property(e.property), o);
}

void expect_killed_small(const Expect& e) {
  const FuzzReport r = hunt(e);
  ASSERT_EQ(r.findings.size(), 1u) << e.property << " did not catch " << e.mutant << " in " << r.cases << " cases";
  const KernelCase& c = r.findings[0].minimized;
  std::int64_t longest = 0;
  for (const Sequence& s : c.seqs) longest = std::max({longest, s.q_len, s.k_len});
  EXPECT_LE(c.batch(), e.max_batch) << summary(c);
  EXPECT_LE(c.heads, e.max_heads) << summary(c);
  EXPECT_LE(longest, e.max_len) << summary(c);
  EXPECT_NE(r.findings[0].verdict.kind, VerdictKind::kPass);
  EXPECT_FALSE(r.findings[0].reproduce.empty());
}

// Lengths: within one tile (16x32 for the mutants) of what the defect needs.
TEST(PropertyKillsMutant, ConformanceTopLeftCausal) { expect_killed_small({"conformance", "mutant-top-left-causal", 1, 1, 3}); }
TEST(PropertyKillsMutant, DeterminismNondeterministicOrder) {
  expect_killed_small({"determinism", "mutant-nondeterministic-order", 1, 1, 32 + 32});  // needs two key tiles
}
TEST(PropertyKillsMutant, GqaRepeatKvHeadModulo) { expect_killed_small({"gqa-repeat", "mutant-kv-head-modulo", 1, 4, 2}); }
TEST(PropertyKillsMutant, VarlenPaddedIgnoreSequsedK) { expect_killed_small({"varlen-padded", "mutant-ignore-seqused-k", 1, 1, 2}); }
TEST(PropertyKillsMutant, PagedContiguousPageBoundary) {
  expect_killed_small({"paged-contiguous", "mutant-page-boundary", 1, 1, 17});  // crosses a page boundary
}
TEST(PropertyKillsMutant, BatchPermutationCuSeqlensOffByOne) {
  expect_killed_small({"batch-permutation", "mutant-cu-seqlens-off-by-one", 2, 1, 2});
}
TEST(PropertyKillsMutant, PaddingInvarianceIgnoreLeftpad) {
  expect_killed_small({"padding-invariance", "mutant-ignore-leftpad", 1, 1, 2});
}
TEST(PropertyKillsMutant, ChunkedPrefillTopLeftCausal) {
  expect_killed_small({"chunked-prefill", "mutant-top-left-causal", 1, 1, 4});
}
TEST(PropertyKillsMutant, RobustnessSkipLastRow) { expect_killed_small({"robustness", "mutant-skip-last-row", 1, 1, 1}); }
TEST(PropertyKillsMutant, RobustnessWritePastEnd) { expect_killed_small({"robustness", "mutant-write-past-end", 1, 1, 1}); }

// The backward's defects, each caught by the gradient property written for it.
TEST(PropertyKillsMutant, GradConformanceDqScaledTwice) {
  expect_killed_small({"grad-conformance", "mutant-bw-dq-scaled-twice", 1, 1, 2});
}
TEST(PropertyKillsMutant, GradConformanceSoftcapDerivative) {
  expect_killed_small({"grad-conformance", "mutant-bw-softcap-derivative", 1, 1, 4});
}
TEST(PropertyKillsMutant, GradDeterminismNondeterministicDq) {
  // Three key tiles: two partial sums add up the same in either order.
  expect_killed_small({"grad-determinism", "mutant-bw-nondeterministic-dq", 1, 1, 3 * 32});
}
TEST(PropertyKillsMutant, GradGqaFirstHeadOnly) { expect_killed_small({"grad-gqa", "mutant-bw-gqa-first-head", 1, 4, 2}); }
TEST(PropertyKillsMutant, GradMaskedZeroNanDq) {
  expect_killed_small({"grad-masked-zero", "mutant-bw-nan-dq-more-queries", 1, 1, 3});
}
TEST(PropertyKillsMutant, GradMaskedZeroDpsumWrongRow) {
  expect_killed_small({"grad-masked-zero", "mutant-bw-dpsum-wrong-row", 1, 1, 3});
}
TEST(PropertyKillsMutant, GradFiniteDifferenceSkipLastKeyTile) {
  expect_killed_small({"grad-fd", "mutant-bw-skip-last-key-tile", 1, 1, 33});  // a second key tile
}
TEST(PropertyKillsMutant, GradFiniteDifferenceWindowOffByOne) {
  expect_killed_small({"grad-fd", "mutant-bw-window-off-by-one", 1, 1, 4});
}
TEST(PropertyKillsMutant, GradRobustnessDvTail) { expect_killed_small({"grad-robustness", "mutant-bw-dv-tail", 1, 1, 2}); }

// The LSE defects leave the output alone: a merge of chunks by their LSEs sees them.
TEST(PropertyKillsMutant, LseMergeBase2) { expect_killed_small({"lse-merge", "mutant-lse-base2", 1, 1, 2}); }
TEST(PropertyKillsMutant, LseMergeShift) { expect_killed_small({"lse-merge", "mutant-lse-shift", 1, 1, 2}); }
TEST(PropertyKillsMutant, LseMergeNextRow) { expect_killed_small({"lse-merge", "mutant-lse-next-row", 1, 1, 3}); }
TEST(PropertyKillsMutant, LseMergePaddedOrder) { expect_killed_small({"lse-merge", "mutant-lse-padded-order", 2, 1, 3}); }

// grad-race checks GPU kernels, so its planted defects are tiled-cpu's backward presented as a GPU kernel, with one
// element changed on one run of the sixteen: a last-bit difference (what atomics in another order give) and a lost
// update (a dK element left at zero).
class RacyBackward : public Kernel {
 public:
  enum class Defect { kLastBit, kLostUpdate };
  RacyBackward(bool deterministic, Defect d) : inner_(*builtin_registry().find("tiled-cpu")), contract_(inner_.contract()), defect_(d) {
    contract_.backward.deterministic = deterministic;
  }
  std::string_view name() const override { return "racy-backward"; }
  const Contract& contract() const override { return contract_; }
  std::string_view device() const override { return "cuda"; }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override { inner_.run(c, in, out); }
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, GradBuffer& grads) override {
    inner_.run_backward(c, in, fwd, grads);
    if (++runs_ != 7) return;
    float* data = defect_ == Defect::kLastBit ? grads.dq() : grads.dk();
    const std::int64_t n = defect_ == Defect::kLastBit ? grads.dq_elems() : grads.dk_elems();
    std::int64_t at = 0;
    for (std::int64_t i = 0; i < n; ++i)
      if (std::fabs(data[i]) > std::fabs(data[at]) || std::isnan(data[at])) at = i;
    if (defect_ == Defect::kLastBit) data[at] = std::nextafter(data[at], 2 * data[at]);
    else data[at] = 0.0f;
  }

 private:
  Kernel& inner_;
  Contract contract_;
  Defect defect_;
  int runs_ = 0;
};

Verdict race(bool deterministic, RacyBackward::Defect d) {
  KernelCase c;
  c.dtype = DType::kBF16;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 16;
  c.v_head_dim = 16;
  c.causal = true;
  c.seqs = {{.q_len = 9, .k_len = 12}};
  c.data.seed = 5;
  c.dout = DoutRecipe{};
  RacyBackward k(deterministic, d);
  return find_property("grad-race")->check(k, c);
}

TEST(PropertyKillsMutant, GradRaceLastBitOnADeterministicContract) {
  const Verdict v = race(true, RacyBackward::Defect::kLastBit);
  EXPECT_EQ(v.kind, VerdictKind::kFail);
  EXPECT_NE(v.reason.find("differs between run 1 and run 7"), std::string::npos) << v.reason;
}
TEST(PropertyKillsMutant, GradRaceLastBitIsWithinTheRuleWithoutTheDeterministicPromise) {
  const Verdict v = race(false, RacyBackward::Defect::kLastBit);
  EXPECT_EQ(v.kind, VerdictKind::kPass) << v.reason;
}
TEST(PropertyKillsMutant, GradRaceLostUpdateWithoutTheDeterministicPromise) {
  const Verdict v = race(false, RacyBackward::Defect::kLostUpdate);
  EXPECT_EQ(v.kind, VerdictKind::kFail);
  EXPECT_NE(v.reason.find("run 7 differs from run 1 beyond the rule: dk"), std::string::npos) << v.reason;
}
TEST(PropertyKillsMutant, GradRaceIsNotApplicableToACpuKernel) {
  EXPECT_NE(find_property("grad-race")->unsupported_reason(*builtin_registry().find("tiled-cpu")), "");
}

// And the correct kernel these mutants come from passes the same runs.
TEST(PropertyKillsMutant, TheUnbrokenKernelPassesEveryProperty) {
  for (const Property* p : all_properties()) {
    FuzzOptions o;
    o.cases = 60;
    o.seed = 11;
    const FuzzReport r = run_fuzz(*builtin_registry().find("tiled-cpu-16x32"), *p, o);
    EXPECT_TRUE(r.findings.empty()) << p->name() << ": " << describe(r.findings.front().verdict);
  }
}

}  // namespace
}  // namespace flashcheck
