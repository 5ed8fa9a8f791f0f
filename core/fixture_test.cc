#include "core/fixture.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/test_temp_dir.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;


std::string load_error(const std::string& p) {
  try {
    load_fixture(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kCase = R"({"dtype": "bf16", "heads": 2, "head_dim": 8, "seqs": [{"q_len": 2, "k_len": 3}]})";

TEST(Fixture, LoadsCasesAndExpectations) {
  const testing::TempDir d("fc_fixture");
  const std::string p = d.write("f.json", std::string(R"({"schema": "flashcheck.fixture/1", "title": "t", "cases": [)") + kCase +
                                              R"(, {"dtype": "fp16", "heads": 1, "head_dim": 4, "seqs": [{"q_len": 1, "k_len": 0}],
                                                  "expect": {"k1": {"verdict": "crash", "reason_contains": "signal",
                                                                    "run_outside_contract": true}}}]})");
  const Fixture f = load_fixture(p);
  ASSERT_EQ(f.cases.size(), 2u);
  EXPECT_EQ(f.cases[0].kcase.heads, 2);
  EXPECT_TRUE(f.cases[0].expect.empty());
  const Expectation& e = f.cases[1].expect.at("k1");
  EXPECT_EQ(e.verdict, VerdictKind::kCrash);
  EXPECT_EQ(e.reason_contains, "signal");
  EXPECT_TRUE(e.run_outside_contract);
}

TEST(Fixture, MalformedFilesNameFileFieldAndReason) {
  const testing::TempDir d("fc_fixture");
  std::string p = d.write("a.json", R"({"schema": "flashcheck.fixture/9", "cases": []})");
  EXPECT_EQ(load_error(p), p + ": schema: \"flashcheck.fixture/9\" is not a schema this version reads (expected \"flashcheck.fixture/1\")");
  p = d.write("b.json", R"({"schema": "flashcheck.fixture/1", "cases": [{"dtype": "bf16", "heads": 3, "kv_heads": 2, "head_dim": 8, "seqs": [{"q_len": 1, "k_len": 1}]}]})");
  EXPECT_EQ(load_error(p), p + ": cases[0].kv_heads: heads 3 is not a multiple of kv_heads 2 (H % Hk must be 0)");
  p = d.write("c.json", R"({"schema": "flashcheck.fixture/1", "cases": [)");
  EXPECT_NE(load_error(p).find(p + ": cases[0]: malformed JSON at byte 46"), std::string::npos) << load_error(p);
  p = d.write("d.json", std::string(R"({"schema": "flashcheck.fixture/1", "cases": [)") +                             R"({"dtype": "bf16", "heads": 2, "head_dim": 8, "seqs": [{"q_len": 2, "k_len": 3}], "expect": {"k": {"verdict": "green"}}}]})");
  EXPECT_EQ(load_error(p), p + ": cases[0].expect.k.verdict: unknown verdict \"green\"");
  EXPECT_EQ(load_error((d.path / "none.json").string()), (d.path / "none.json").string() + ": no such file");
  p = d.write("e.json", R"({"schema": "flashcheck.fixture/1", "tittle": "x"})");
  EXPECT_EQ(load_error(p), p + ": tittle: unknown field");
}

TEST(Fixture, SavesAndReloadsCapturedTensorsBitExactly) {
  const testing::TempDir d("fc_fixture");
  Fixture f;
  f.path = (d.path / "cap.json").string();
  f.title = "captured";
  FixtureCase fc;
  fc.kcase.heads = 2;
  fc.kcase.kv_heads = 1;
  fc.kcase.head_dim = 8;
  fc.kcase.v_head_dim = 8;
  fc.kcase.dtype = DType::kF16;
  fc.kcase.kv_cache = true;
  fc.kcase.seqs = {{.q_len = 2, .k_len = 6, .cache_len = 3, .new_len = 2}};
  fc.kcase.data.seed = 5;
  CaseTensors t = materialize(fc.kcase);
  t.q.data[0] = 0.5f;  // differs from the generated value: proves the file is what gets loaded
  fc.tensors = t;
  fc.expect["x"] = {VerdictKind::kFail, "max error", false, "known"};
  f.cases.push_back(fc);
  save_fixture(f);
  const Fixture g = load_fixture(f.path);
  EXPECT_EQ(g.tensors_file, "cap.safetensors");
  ASSERT_TRUE(g.cases[0].tensors.has_value());
  EXPECT_EQ(g.cases[0].kcase, fc.kcase);
  EXPECT_EQ(g.cases[0].expect.at("x").reason_contains, "max error");
  const CaseTensors& u = *g.cases[0].tensors;
  EXPECT_EQ(u.q.data[0], 0.5f);
  ASSERT_EQ(u.k.data.size(), t.k.data.size());
  for (std::size_t i = 0; i < t.k.data.size(); ++i) {
    if (std::isnan(t.k.data[i])) EXPECT_TRUE(std::isnan(u.k.data[i]));  // poison survives the round trip
    else EXPECT_EQ(u.k.data[i], t.k.data[i]);
  }
  EXPECT_EQ(u.v_new.data, t.v_new.data);
}

TEST(Fixture, ModelCasesRoundTripWithProfilesAndExpectations) {
  const testing::TempDir d("fc_fixture");
  Fixture f;
  f.path = (d.path / "model.json").string();
  f.title = "model";
  f.property = "integration";
  f.profiles = {"hf-4.55", "hf-main"};
  ModelFixtureCase mc;
  mc.mcase.batch = 2;
  mc.mcase.q_len = 3;
  mc.mcase.past = 2;
  mc.mcase.use_cache = true;
  mc.mcase.heads = 4;
  mc.mcase.kv_heads = 2;
  mc.mcase.head_dim = 16;
  mc.mcase.sliding_window = 4;
  mc.mcase.attention_mask = std::vector<std::vector<std::int64_t>>{{0, 1, 1, 1, 1}, {1, 1, 1, 1, 1}};
  mc.mcase.position_ids = std::vector<std::vector<std::int64_t>>{{1, 2, 3}, {2, 3, 4}};
  mc.mcase.varlen_kwargs = VarlenKwargs{{0, 3, 6}, {0, 5, 10}, 3, 5};
  mc.note = "why";
  mc.expect["hf-4.55"] = {VerdictKind::kError, "max()", false, "#39814"};
  f.model_cases.push_back(mc);
  save_fixture(f);
  const Fixture g = load_fixture(f.path);
  ASSERT_EQ(g.model_cases.size(), 1u);
  EXPECT_EQ(g.model_cases[0].mcase, mc.mcase);
  EXPECT_EQ(g.model_cases[0].note, "why");
  EXPECT_EQ(g.model_cases[0].expect.at("hf-4.55").verdict, VerdictKind::kError);
  EXPECT_EQ(g.model_cases[0].expect.at("hf-4.55").reason_contains, "max()");
  EXPECT_EQ(g.profiles, f.profiles);
  EXPECT_EQ(g.property, "integration");
  EXPECT_EQ(content_hash(g.model_cases[0].mcase), content_hash(mc.mcase));
}

TEST(Fixture, MalformedModelCasesNameFileFieldAndReason) {
  const testing::TempDir d("fc_fixture");
  constexpr const char* kModel = R"({"dtype": "bf16", "batch": 1, "q_len": 2, "heads": 2, "kv_heads": 1, "head_dim": 8)";
  std::string p = d.write("a.json", std::string(R"({"schema": "flashcheck.fixture/1", "model_cases": [)") + kModel +
                                        R"(, "expect": {"hf-9.99": {"verdict": "error"}}}]})");
  EXPECT_EQ(load_error(p).rfind(p + ": model_cases[0].expect.hf-9.99: unknown profile (expected hf-main, hf-4.55, ", 0), 0u)
      << load_error(p);
  p = d.write("b.json", std::string(R"({"schema": "flashcheck.fixture/1", "profiles": ["hf-main", "hf-3.0"], "model_cases": [)") +
                            kModel + "}]}");
  EXPECT_NE(load_error(p).find(p + ": profiles[1]: "), std::string::npos) << load_error(p);
  p = d.write("c.json", std::string(R"({"schema": "flashcheck.fixture/1", "model_cases": [)") + kModel +
                            R"(, "attention_mask": [[1, 1, 1]]}]})");
  EXPECT_NE(load_error(p).find(p + ": model_cases[0].attention_mask"), std::string::npos) << load_error(p);
}

TEST(Fixture, ContentHashIgnoresTheNameAndSeesEveryField) {
  KernelCase a;
  a.seqs = {{.q_len = 1, .k_len = 1}};
  KernelCase b = a;
  b.name = "other";
  EXPECT_EQ(content_hash(a), content_hash(b));
  b.data.seed = 1;
  EXPECT_NE(content_hash(a), content_hash(b));
  EXPECT_EQ(content_hash(a).size(), 16u);
}

}  // namespace
}  // namespace flashcheck
