#include "core/case_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace flashcheck {
namespace {

using nlohmann::json;

json minimal() {
  return json::parse(R"({"dtype": "bf16", "heads": 8, "kv_heads": 2, "head_dim": 64,
                         "seqs": [{"q_len": 3, "k_len": 5}]})");
}

// The message of the InputError that parsing `j` raises, or "" when it parses.
std::string error_of(const json& j) {
  try {
    case_from_json(j, "fixtures/x.json", "cases[0]");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(CaseJson, MinimalCaseGetsDefaults) {
  const KernelCase c = case_from_json(minimal(), "x.json", "");
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.v_head_dim, 64);
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.window, (Window{-1, -1}));
  EXPECT_EQ(c.alignment, Alignment::kBottomRight);
  EXPECT_TRUE(c.data.poison);
  EXPECT_FALSE(c.scale.has_value());
}

TEST(CaseJson, RoundTripsEveryField) {
  KernelCase c;
  c.name = "rt";
  c.seqs = {{.q_len = 2, .k_len = 9, .leftpad_k = 1, .cache_len = 4, .new_len = 3}, {.q_len = 0, .k_len = 3}};
  c.heads = 6;
  c.kv_heads = 3;
  c.head_dim = 40;
  c.v_head_dim = 24;
  c.dtype = DType::kF16;
  c.causal = true;
  c.alignment = Alignment::kTopLeft;
  c.window = {5, 0};
  c.softcap = 30;
  c.scale = 0.125;
  c.kv_cache = true;
  c.layout = QLayout::kPaddedBHSD;
  c.kv_storage = KvStorage::kPaged;
  c.paging = {.page_size = 3, .extra_pages = 2, .table_seed = 0, .block_table = {{4, 0, 2}, {1}}};
  c.kv_strides = KvStrides::kGapped;
  c.data = {.dist = Distribution::kIntegers, .q_scale = 2, .k_scale = 0.5, .v_scale = 3, .v_onehot = true,
            .poison = false, .seed = 0xFFFFFFFFFFFFull};
  ASSERT_TRUE(validate(c).empty());
  EXPECT_EQ(case_from_json(json::parse(case_to_json(c).dump()), "rt", ""), c);
  // Slack rows (packed layouts only) round-trip too, and a case without them writes no "slack" field.
  KernelCase packed;
  packed.seqs = {{.q_len = 2, .k_len = 3}};
  EXPECT_FALSE(case_to_json(packed).contains("slack"));
  packed.slack = {.q_rows = 4, .kv_rows = 1};
  ASSERT_TRUE(validate(packed).empty());
  EXPECT_EQ(case_from_json(json::parse(case_to_json(packed).dump()), "rt", ""), packed);
  c.slack.q_rows = 1;
  ASSERT_FALSE(validate(c).empty());  // a padded layout has no rows past the last sequence
}

TEST(CaseJson, MalformedInputNamesFileFieldAndReason) {
  json j = minimal();
  j["heads"] = 7;
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].kv_heads: heads 7 is not a multiple of kv_heads 2 (H % Hk must be 0)");
  j = minimal();
  j["dtype"] = "fp8";
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].dtype: unknown value \"fp8\" (expected one of fp16, bf16, fp32)");
  j = minimal();
  j["seqs"][0]["k_len"] = -4;
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].seqs[0].k_len: negative length -4");
  j = minimal();
  j["seqs"][0]["q_len"] = "3";
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].seqs[0].q_len: expected an integer, found string \"3\"");
  j = minimal();
  j.erase("head_dim");
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].head_dim: required field is missing");
  j = minimal();
  j["windw"] = {1, 0};
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].windw: unknown field");
  j = minimal();
  j["window"] = {1};
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].window: expected [left, right], found 1 values");
  j = minimal();
  j["kv"] = {{"storage", "paged"}, {"page_size", 0}};
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].kv.page_size: page size 0 must be >= 1");
  j = minimal();
  j["seqs"] = json::array();
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].seqs: the batch is empty: a case needs at least one sequence");
  j = minimal();
  j["kv"] = {{"storage", "paged"}, {"page_size", 2}, {"block_table", {{0}}}};
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].kv.block_table[0]: too short: 1 pages for k_len 5 at page size 2 (needs 3)");
  j = minimal();
  j["seqs"][0]["seqused_k"] = 6;
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].seqs[0].seqused_k: seqused_k 6 > k_len 5");
}

TEST(CaseJson, ReportsHowManyMoreProblemsThereAre) {
  json j = minimal();
  j["seqs"][0]["q_len"] = -1;
  j["seqs"][0]["k_len"] = -1;
  EXPECT_EQ(error_of(j), "fixtures/x.json: cases[0].seqs[0].q_len: negative length -1 (and 1 more problem)");
}

}  // namespace
}  // namespace flashcheck
