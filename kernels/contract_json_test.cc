#include "kernels/contract_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace flashcheck {
namespace {

class WithContract : public Kernel {
 public:
  WithContract(std::string name, Contract c) : name_(std::move(name)), c_(std::move(c)) {}
  std::string_view name() const override { return name_; }
  const Contract& contract() const override { return c_; }
  void run(const KernelCase&, const CaseTensors&, OutputBuffer&) override {}

 private:
  std::string name_;
  Contract c_;
};

std::string error_of(const nlohmann::json& j) {
  try {
    contract_from_json(j, "lib.so");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ContractJson, EveryBuiltinContractSurvivesTheRoundTrip) {
  for (Kernel* k : builtin_registry().kernels()) {
    nlohmann::json j = kernel_json(*k);
    const WithContract again(std::string(k->name()), contract_from_json(j, "test"));
    nlohmann::json back = kernel_json(again);
    // The coverage exemptions are the harness's own bookkeeping, not part of what a plugin declares.
    j.erase("coverage_exempt");
    back.erase("coverage_exempt");
    if (j.contains("backward")) j["backward"].erase("coverage_exempt");
    j.erase("device");
    back.erase("device");
    EXPECT_EQ(j, back) << k->name();
  }
}

TEST(ContractJson, TheBackwardIsDeclaredOrAbsent) {
  EXPECT_FALSE(contract_from_json({{"dtypes", {"bf16"}}}, "x").backward.available);
  const Contract c = contract_from_json(
      {{"dtypes", {"bf16", "fp32"}}, {"backward", {{"deterministic", false}, {"without", {"softcap", "leftpad"}}, {"dtypes", {"fp32"}}}}},
      "x");
  EXPECT_TRUE(c.backward.available);
  EXPECT_FALSE(c.backward.deterministic);
  EXPECT_TRUE(c.backward.zeroes_unused_keys);
  EXPECT_EQ(c.backward.without, (std::vector<std::string>{"softcap", "leftpad"}));
  EXPECT_EQ(c.backward.dtypes, (std::vector<DType>{DType::kF32}));
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"backward", true}}),
            "lib.so: backward: must be an object (deterministic, zeroes_unused_keys, writes_into_buffer, without, dtypes, notes)");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"backward", {{"without", {"paging"}}}}}),
            "lib.so: backward.without[0]: unknown feature \"paging\"");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"backward", {{"deterministic", 1}}}}),
            "lib.so: backward.deterministic: must be true or false");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"backward", {{"dtypes", {"fp8"}}}}}), "lib.so: backward.dtypes[0]: unknown dtype \"fp8\"");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"backward", {{"fast", true}}}}), "lib.so: backward.fast: unknown field");
}

TEST(ContractJson, ErrorsNameTheSourceTheFieldAndTheReason) {
  const nlohmann::json ok = {{"dtypes", {"bf16"}}};
  EXPECT_EQ(error_of(ok), "");
  EXPECT_EQ(error_of(nlohmann::json::object()), "lib.so: dtypes: missing: the dtypes the kernel takes (fp16, bf16, fp32)");
  EXPECT_EQ(error_of({{"dtypes", {"bf17"}}}), "lib.so: dtypes[0]: unknown dtype \"bf17\"");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"features", {{"causal", "native"}}}}), "lib.so: features.causal: unknown feature");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"features", {{"window", "yes"}}}}),
            "lib.so: features.window: must be \"native\", \"translated\" or \"no\"");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"max_head_dim", -3}}), "lib.so: max_head_dim: -3 is outside [1, 1024]");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"returns_lse", "yes"}}), "lib.so: returns_lse: must be true or false");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"empty_row", "zeros"}}), "lib.so: empty_row: must be \"zero\", \"nan\" or \"uniform\"");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"head_dims", 128}}),
            "lib.so: head_dims: must be an array of head dims (whole numbers 1..1024)");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"head_dims", {64, 0}}}), "lib.so: head_dims[1]: must be a whole number in [1, 1024]");
  EXPECT_EQ(contract_from_json({{"dtypes", {"bf16"}}, {"head_dims", {64, 128}}}, "x").head_dims,
            (std::vector<std::int64_t>{64, 128}));
  EXPECT_NE(error_of(nlohmann::json::array()), "");
}

TEST(ContractJson, DeclaredFeaturesAreRead) {
  const Contract c = contract_from_json({{"dtypes", {"fp16", "bf16"}},
                                         {"features", {{"bottom_right", "native"}, {"gqa", "translated"}}},
                                         {"returns_lse", true},
                                         {"empty_row", "nan"},
                                         {"finite_unused_slots", "documented: rows past seqused_k are read"}},
                                        "x");
  EXPECT_EQ(c.bottom_right, Support::kNative);
  EXPECT_EQ(c.gqa, Support::kTranslated);
  EXPECT_EQ(c.window, Support::kNo);
  EXPECT_EQ(c.dtypes, (std::vector<DType>{DType::kF16, DType::kBF16}));
  EXPECT_TRUE(c.returns_lse);
  EXPECT_EQ(c.empty_row, EmptyRow::kNaN);
  EXPECT_EQ(c.finite_unused_slots, "documented: rows past seqused_k are read");
  EXPECT_EQ(error_of({{"dtypes", {"bf16"}}, {"finite_unused_slots", true}}), "lib.so: finite_unused_slots: must be a string");
}

}  // namespace
}  // namespace flashcheck
