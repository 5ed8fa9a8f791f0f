#include <cstdint>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/recipe.h"
#include "kernels/kernel.h"
#include "search/coverage.h"
#include "search/generators.h"
#include "search/samples.h"

namespace flashcheck {
namespace {

// Every generated case is valid and inside the contract it was generated for, for every kernel.
RC_GTEST_PROP(Generators, CasesAreValidAndInsideTheContract, ()) {
  const auto kernels = builtin_registry().kernels();
  Kernel* k = *rc::gen::elementOf(kernels);
  const KernelCase c = *kernel_case_gen(k->contract());
  const auto errors = validate(c);
  RC_ASSERT(errors.empty());
  const ContractCheck cc = k->check(c);
  RC_LOG() << k->name() << ": " << summary(c) << " -- " << cc.reason << "\n";
  RC_ASSERT(cc.supported);
}

// Every input a generated case holds is finite in its dtype, so that the truth and the bound are finite (an fp16
// case with the `large` recipe at four times a softcap of 50 once held infinities, and CI failed on it about one
// run in ten). A fixed sweep of 20,000 cases rather than RapidCheck's 100: the trigger is about 1 case in 1,000.
TEST(Generators, InputsAreFiniteInTheCaseDtype) {
  const rc::Gen<KernelCase> gen = kernel_case_gen(builtin_registry().find("tiled-cpu")->contract());
  for (std::uint64_t seed = 0; seed < 20000; ++seed) {
    const KernelCase c = gen(rc::Random(seed), static_cast<int>(seed % 101)).value();
    for (double scale : {c.data.q_scale, c.data.k_scale, c.data.v_scale})
      ASSERT_TRUE(recipe_fits_dtype(c.data.dist, scale, c.dtype)) << summary(c) << " scale " << scale;
  }
}

// A narrowed contract (fuzz --dtype/--head-dim) generates only what is left, and its coverage asks only for that.
RC_GTEST_PROP(Generators, NarrowedContractsGenerateOnlyTheirDtypesAndHeadDims, ()) {
  const Contract k = narrowed(builtin_registry().find("tiled-cpu")->contract(), {DType::kF16}, {48, 80});
  const KernelCase c = *kernel_case_gen(k);
  RC_ASSERT(c.dtype == DType::kF16);
  RC_ASSERT(c.head_dim == 48 || c.head_dim == 80);
  RC_ASSERT(c.v_head_dim == 48 || c.v_head_dim == 80);
  RC_ASSERT(k.dtypes == std::vector<DType>{DType::kF16});
  const auto required = required_coverage(k, CaseRequirements{});
  RC_ASSERT(std::count(required.begin(), required.end(), "dtype-bf16") == 0);
  RC_ASSERT(std::count(required.begin(), required.end(), "head-dim-not-multiple-of-8") == 0);
}

// A kernel that needs finite unused slots is given zeros there, every case still inside its contract; others get NaN.
RC_GTEST_PROP(Generators, FiniteUnusedSlotsAreHonoured, ()) {
  Contract k = builtin_registry().find("tiled-cpu")->contract();
  RC_ASSERT((*kernel_case_gen(k)).data.poison);
  k.finite_unused_slots = "known defect: NaN in unused slots reaches the output";
  const KernelCase c = *kernel_case_gen(k);
  RC_ASSERT(!c.data.poison);
  RC_ASSERT(check_contract(k, c).supported);
}

RC_GTEST_PROP(Generators, RequirementsAreMet, ()) {
  const Contract k = builtin_registry().find("tiled-cpu")->contract();
  const KernelCase gqa = *kernel_case_gen(k, {.gqa = true});
  RC_ASSERT(gqa.heads > gqa.kv_heads);
  const KernelCase chunk = *kernel_case_gen(k, {.chunkable = true});
  RC_ASSERT(chunk.kv_cache && chunk.causal && chunk.alignment == Alignment::kBottomRight);
  for (const Sequence& s : chunk.seqs) RC_ASSERT(s.q_len >= 2 && s.new_len == s.q_len);
  const KernelCase packed = *kernel_case_gen(k, {.packed_kv = true, .no_cache = true});
  RC_ASSERT(packed.kv_storage == KvStorage::kPacked && !packed.kv_cache);
  const KernelCase two = *kernel_case_gen(k, {.batch2 = true});
  RC_ASSERT(two.batch() >= 2);
}

TEST(Coverage, ClassifiesTheFeaturesOfACase) {
  KernelCase c;
  c.heads = 4;
  c.kv_heads = 1;
  c.head_dim = 59;
  c.v_head_dim = 59;
  c.causal = true;
  c.seqs = {{.q_len = 65, .k_len = 63}, {.q_len = 1, .k_len = 0}};
  const auto f = classify(c);
  for (const char* want : {"mqa", "causal-bottom-right", "q>k", "empty-rows", "zero-length", "decode", "tile64+1",
                           "tile64-1", "head-dim-not-multiple-of-8", "batch>1", "len=1mod32"})
    EXPECT_NE(std::find(f.begin(), f.end(), want), f.end()) << want;
  EXPECT_EQ(std::find(f.begin(), f.end(), "paged"), f.end());
}

TEST(Coverage, MissingListsRequiredFeaturesWithoutCases) {
  Coverage cov;
  KernelCase c;
  c.seqs = {{.q_len = 1, .k_len = 1}};
  cov.add(c);
  const auto missing = cov.missing({"decode", "paged"});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], "paged");
}

}  // namespace
}  // namespace flashcheck

namespace flashcheck {
namespace {

// The realistic mix (issue 12) is the contract of `bench --mix realistic` and tools/bench/python_recipe.py:
// six valid cases (within the case memory limit) at the shapes both name.
TEST(RealisticMix, SixValidShapesAtTheSizesBothBenchmarksName) {
  const std::vector<KernelCase> mix = realistic_mix(3);
  ASSERT_EQ(mix.size(), 6u);
  std::vector<std::int64_t> lengths, batches, heads;
  int windowed = 0;
  for (const KernelCase& c : mix) {
    for (const FieldError& e : validate(c)) ADD_FAILURE() << e.field << ": " << e.reason;
    EXPECT_EQ(c.dtype, DType::kBF16);
    EXPECT_EQ(c.heads, 4 * c.kv_heads);
    EXPECT_EQ(c.head_dim, 128);
    EXPECT_TRUE(c.causal);
    for (const Sequence& s : c.seqs) EXPECT_EQ(s.k_len, s.q_len);
    lengths.push_back(c.seqs[0].q_len);
    batches.push_back(static_cast<std::int64_t>(c.seqs.size()));
    heads.push_back(c.heads);
    windowed += c.window.left == 1024 && c.window.right == 0;
  }
  EXPECT_EQ(lengths, (std::vector<std::int64_t>{2048, 2048, 8192, 8192, 32768, 32768}));
  EXPECT_EQ(batches, (std::vector<std::int64_t>{8, 8, 2, 2, 1, 1}));
  EXPECT_EQ(heads, (std::vector<std::int64_t>{32, 32, 32, 32, 16, 16}));
  EXPECT_EQ(windowed, 3);
}

}  // namespace
}  // namespace flashcheck
