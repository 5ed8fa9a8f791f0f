#include "core/model_case.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_case_json.h"
#include "core/model_tensors.h"

namespace flashcheck {
namespace {

using nlohmann::json;

json minimal() {
  return json::parse(R"({"dtype": "bf16", "batch": 2, "q_len": 3, "heads": 8, "kv_heads": 2, "head_dim": 16})");
}

std::string error_of(const json& j) {
  try {
    model_case_from_json(j, "fixtures/m.json", "cases[1]");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelCaseJson, MinimalCaseGetsDefaults) {
  const ModelCase m = model_case_from_json(minimal(), "m.json", "");
  EXPECT_EQ(m.past, 0);
  EXPECT_TRUE(m.causal);
  EXPECT_FALSE(m.use_cache);
  EXPECT_FALSE(m.attention_mask.has_value());
  EXPECT_EQ(m.caller_query_length(), 3);
  EXPECT_EQ(m.kv_len(), 3);
  EXPECT_EQ(m.effective_position_ids(), (std::vector<std::vector<std::int64_t>>{{0, 1, 2}}));
}

TEST(ModelCaseJson, PastImpliesACacheAndShiftsDefaultPositions) {
  json j = minimal();
  j["past"] = 4;
  j["attention_mask"] = json::array({json::array({0, 0, 1, 1, 1, 1, 1}), json::array({1, 1, 1, 1, 1, 1, 1})});
  const ModelCase m = model_case_from_json(j, "m.json", "");
  EXPECT_TRUE(m.use_cache);
  EXPECT_EQ(m.kv_len(), 7);
  EXPECT_EQ(m.effective_position_ids(), (std::vector<std::vector<std::int64_t>>{{4, 5, 6}}));
  EXPECT_FALSE(m.key_valid(0, 1));
  EXPECT_TRUE(m.key_valid(0, 2));
  EXPECT_NE(summary(m).find("mask[left]"), std::string::npos) << summary(m);
}

TEST(ModelCaseJson, RoundTripsEveryField) {
  ModelCase m;
  m.name = "all";
  m.dtype = DType::kF16;
  m.batch = 1;
  m.q_len = 4;
  m.past = 2;
  m.heads = 4;
  m.kv_heads = 1;
  m.head_dim = 8;
  m.causal = false;
  m.sliding_window = 3;
  m.softcap = 30.0;
  m.scale = 0.25;
  m.attention_mask = {{1, 1, 0, 1, 1, 1}};
  m.position_ids = {{2, 3, 0, 1}};
  m.position_ids_3d = true;
  m.query_length = 2;
  m.use_cache = true;
  m.static_cache_len = 9;
  m.varlen_kwargs = VarlenKwargs{{0, 2, 4}, {0, 3, 6}, 2, 3};
  m.via_generate = true;
  m.data.seed = 77;
  m.data.dist = Distribution::kIntegers;
  const ModelCase back = model_case_from_json(model_case_to_json(m), "m.json", "");
  EXPECT_EQ(back, m);
}

TEST(ModelCaseJson, ErrorsNameTheFieldAndReason) {
  json j = minimal();
  j["attention_mask"] = json::array({json::array({1, 1, 1})});
  EXPECT_EQ(error_of(j), "fixtures/m.json: cases[1].attention_mask: 1 rows for batch 2");
  j = minimal();
  j["attention_mask"] = json::array({json::array({1, 1}), json::array({1, 1})});
  EXPECT_EQ(error_of(j), "fixtures/m.json: cases[1].attention_mask[0]: 2 columns; the 2D mask covers past + q_len = 3 columns");
  j = minimal();
  j["kv_heads"] = 3;
  EXPECT_EQ(error_of(j), "fixtures/m.json: cases[1].kv_heads: heads 8 is not a multiple of kv_heads 3");
  j = minimal();
  j["past"] = 2;
  j["use_cache"] = false;
  EXPECT_EQ(error_of(j), "fixtures/m.json: cases[1].use_cache: past 2 > 0 needs a cache object (use_cache)");
  j = minimal();
  j["position_ids"] = json::array({json::array({0, 1})});
  EXPECT_EQ(error_of(j), "fixtures/m.json: cases[1].position_ids[0]: 2 columns for q_len 3");
  j = minimal();
  j["postion_ids"] = nullptr;
  EXPECT_EQ(error_of(j), "fixtures/m.json: cases[1].postion_ids: unknown field");
  j = minimal();
  j["varlen_kwargs"] = json::parse(R"({"cu_seq_lens_q": [0, 3, 2], "cu_seq_lens_k": [0, 3], "max_length_q": 3, "max_length_k": 3})");
  EXPECT_EQ(error_of(j), "fixtures/m.json: cases[1].varlen_kwargs.cu_seq_lens_q: must be non-decreasing");
}

TEST(ModelCaseSummary, NamesTheMaskShape) {
  ModelCase m;
  m.batch = 2;
  m.q_len = 3;
  m.attention_mask = {{1, 1, 0}, {1, 1, 1}};
  EXPECT_NE(summary(m).find("mask[right]"), std::string::npos) << summary(m);
  m.attention_mask = {{1, 0, 1}, {1, 1, 1}};
  EXPECT_NE(summary(m).find("mask[holes]"), std::string::npos) << summary(m);
  m.attention_mask = {{0, 0, 0}, {1, 1, 1}};
  EXPECT_NE(summary(m).find("empty-row"), std::string::npos) << summary(m);
}

TEST(ModelTensors, ValuesAreExactInTheDtypeAndStaticSlotsAreZero) {
  ModelCase m;
  m.batch = 2;
  m.q_len = 3;
  m.past = 1;
  m.use_cache = true;
  m.static_cache_len = 6;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 8;
  m.dtype = DType::kBF16;
  m.data.seed = 5;
  const ModelTensors t = materialize(m);
  ASSERT_EQ(t.q.shape, (std::vector<std::int64_t>{2, 3, 4, 8}));
  ASSERT_EQ(t.k.shape, (std::vector<std::int64_t>{2, 6, 2, 8}));
  for (float x : t.q.data) EXPECT_EQ(x, round_float(DType::kBF16, x));
  for (std::int64_t j = 4; j < 6; ++j)
    for (std::int64_t x = 0; x < 16; ++x) EXPECT_EQ(t.k.data[static_cast<std::size_t>((6 + j) * 16 + x)], 0.0f);
  bool nonzero = false;
  for (std::int64_t x = 0; x < 16; ++x) nonzero = nonzero || t.k.data[static_cast<std::size_t>(3 * 16 + x)] != 0.0f;
  EXPECT_TRUE(nonzero);
  // Query i is position P + i: the same case without a past, one token longer, has it one row later.
  ModelCase fresh = m;
  fresh.past = 0;
  fresh.q_len = 4;
  fresh.static_cache_len.reset();
  const ModelTensors f = materialize(fresh);
  for (std::int64_t x = 0; x < 32; ++x) EXPECT_EQ(t.q.data[static_cast<std::size_t>(x)], f.q.data[static_cast<std::size_t>(32 + x)]);
  EXPECT_EQ(materialize(m).q.data, t.q.data);  // deterministic
}

}  // namespace
}  // namespace flashcheck
