// Structural fuzzing of the readers of outside input (issue 15): RapidCheck mutates valid fixture documents
// and safetensors files (values of every type and edge magnitude, dropped and invented keys, duplicate keys,
// deep nesting, truncations, stray bytes), and each result must either load into cases that are valid,
// within the memory limit and stable under a round trip, or be refused with an InputError. Any other
// exception fails the property; a crash, a hang or an overflow fails the test run (the sanitizer lane, ci/
// asan.sh, runs it under ASan and UBSan). The last test proves the property catches a reader without the
// hardening: nlohmann's own parse and get<> let std::exception types other than InputError escape.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>
#include <string>
#include <vector>

#include "core/case_json.h"
#include "core/error.h"
#include "core/fixture.h"
#include "core/input_limits.h"
#include "core/safetensors.h"

namespace flashcheck {
namespace {

using nlohmann::json;

// Valid documents the mutations start from: every kind of field a fixture has.
const std::vector<std::string>& seeds() {
  static const std::vector<std::string> s{
      R"({"schema": "flashcheck.fixture/1", "title": "t", "cases": [{"dtype": "bf16", "heads": 4, "kv_heads": 2,
          "head_dim": 16, "v_head_dim": 8, "causal": true, "alignment": "top_left", "window": [3, 0], "softcap": 30,
          "scale": 0.25, "layout": "padded_bshd", "kv": {"storage": "paged", "page_size": 4, "extra_pages": 2,
          "block_table": [[3, 0], [1]]}, "seqs": [{"q_len": 3, "k_len": 7}, {"q_len": 1, "k_len": 2}],
          "data": {"dist": "uniform", "q_scale": 2, "seed": 5}, "expect": {"tiled-cpu": {"verdict": "fail",
          "reason_contains": "x", "run_outside_contract": true, "why": "w"}}}]})",
      R"({"schema": "flashcheck.fixture/1", "cases": [{"dtype": "fp16", "heads": 2, "head_dim": 8, "kv": {"cache": true,
          "table_seed": 9, "storage": "paged", "page_size": 3}, "seqs": [{"q_len": 2, "k_len": 6, "cache_len": 3,
          "new_len": 2, "leftpad_k": 1}]}, {"dtype": "fp32", "heads": 1, "head_dim": 4, "kv": {"strides": "gapped"},
          "slack": {"q_rows": 3, "kv_rows": 2},
          "seqs": [{"q_len": 2, "k_len": 5, "seqused_k": 4}, {"q_len": 0, "k_len": 0}]}]})",
      R"({"schema": "flashcheck.fixture/1", "property": "integration", "profiles": ["hf-main"], "model_cases": [{
          "dtype": "bf16", "batch": 2, "q_len": 3, "past": 2, "heads": 4, "kv_heads": 2, "head_dim": 16,
          "sliding_window": 4, "softcap": 20, "attention_mask": [[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]],
          "position_ids": [[1, 2, 3], [2, 3, 4]], "use_cache": true, "static_cache_len": 9, "query_length": 3,
          "varlen_kwargs": {"cu_seq_lens_q": [0, 3, 6], "cu_seq_lens_k": [0, 5, 10], "max_length_q": 3,
          "max_length_k": 5}, "data": {"seed": 3}, "expect": {"hf-4.55": {"verdict": "error"}}}]})"};
  return s;
}

const std::vector<std::string> kKeys{"schema", "cases", "dtype", "heads", "kv_heads", "head_dim", "seqs", "q_len",
                                     "k_len", "kv", "page_size", "extra_pages", "block_table", "window", "data",
                                     "seed", "expect", "verdict", "tensors", "model_cases", "batch", "position_ids",
                                     "static_cache_len", "", "x"};

// Scalars at the edges where readers go wrong: int64 and uint64 bounds, beyond them (parsed as floats),
// non-integral and huge floats, strings where numbers go.
json edge_scalar() {
  switch (*rc::gen::inRange(0, 12)) {
    case 0: return *rc::gen::inRange<std::int64_t>(-3, 70);
    case 1: return *rc::gen::element<std::int64_t>(INT64_MIN, INT64_MAX, -1, 0, std::int64_t{1} << 31, std::int64_t{1} << 32,
                                                     std::int64_t{1} << 40, (std::int64_t{1} << 53) + 1);
    case 2: return *rc::gen::element<std::uint64_t>(UINT64_MAX, std::uint64_t{1} << 63, (std::uint64_t{1} << 63) + 1);
    case 3: return *rc::gen::element(1e20, -1e20, 1.5, -0.0, 1e308, 4.0, 9.2233720368547758e18, -9.2233720368547758e18);
    case 4: return *rc::gen::element<std::string>("bf16", "paged", "", "x", "hf-main", "tiled-cpu", "pass", "../x", "/dev/zero");
    case 5: return nullptr;
    case 6: return *rc::gen::arbitrary<bool>();
    case 7: return json::array();
    case 8: return json::object();
    default: return *rc::gen::inRange<std::int64_t>(0, 5);
  }
}

json random_value(int depth) {
  if (depth <= 0 || *rc::gen::inRange(0, 4) != 0) return edge_scalar();
  if (*rc::gen::arbitrary<bool>()) {
    json a = json::array();
    for (int i = *rc::gen::inRange(0, 4); i > 0; --i) a.push_back(random_value(depth - 1));
    return a;
  }
  json o = json::object();
  for (int i = *rc::gen::inRange(0, 4); i > 0; --i) o[*rc::gen::elementOf(kKeys)] = random_value(depth - 1);
  return o;
}

// A node of `j` reached by a random walk from the root (the root itself sometimes).
json& random_node(json& j) {
  json* at = &j;
  while ((at->is_object() || at->is_array()) && !at->empty() && *rc::gen::inRange(0, 4) != 0) {
    const auto i = *rc::gen::inRange<std::size_t>(0, at->size());
    at = at->is_object() ? &std::next(at->begin(), static_cast<std::ptrdiff_t>(i)).value() : &(*at)[i];
  }
  return *at;
}

// One structural edit of the tree, then one textual edit of its text (or none).
std::string mutated_document() {
  json doc = json::parse(*rc::gen::elementOf(seeds()));
  for (int edits = *rc::gen::inRange(1, 4); edits > 0; --edits) {
    json& node = random_node(doc);
    switch (*rc::gen::inRange(0, 5)) {
      case 0: node = random_value(2); break;
      case 1:
        if (node.is_object() && !node.empty()) node.erase(std::next(node.begin(), *rc::gen::inRange<std::ptrdiff_t>(0, static_cast<std::ptrdiff_t>(node.size()))));
        break;
      case 2:
        if (node.is_object()) node[*rc::gen::elementOf(kKeys)] = random_value(1);
        break;
      case 3: node = json::array({node}); break;
      default:
        if (node.is_array()) node.push_back(random_value(1));
    }
  }
  std::string text = doc.dump();
  const auto at = [&] { return *rc::gen::inRange<std::size_t>(0, text.size() + 1); };
  switch (*rc::gen::inRange(0, 8)) {
    case 0: text.resize(at()); break;                                       // truncated
    case 1: text.insert(at(), 1, static_cast<char>(*rc::gen::arbitrary<std::uint8_t>())); break;  // a stray byte
    case 2: {                                                               // a key repeated in the first object
      const std::size_t brace = text.find('{', at() % (text.size() + 1));
      if (brace != std::string::npos) text.insert(brace + 1, "\"" + *rc::gen::elementOf(kKeys) + "\": 1, ");
      break;
    }
    case 3: {                                                               // deep nesting where a value was
      const std::size_t colon = text.find(':', at() % (text.size() + 1));
      const int n = *rc::gen::element(10, 63, 64, 65, 500);
      if (colon != std::string::npos) text.insert(colon + 1, std::string(static_cast<std::size_t>(n), '['));
      break;
    }
    default: break;
  }
  return text;
}

// What a reader may do with a document: load valid, bounded cases that survive a round trip, or throw an
// InputError. Returns "" when it did one of those, else what went wrong.
template <typename Reader>
std::string misbehaviour(const Reader& read, const std::string& text) {
  try {
    const Fixture f = read(text);
    for (const FixtureCase& fc : f.cases) {
      if (!validate(fc.kcase).empty()) return "accepted an invalid case";
      if (case_bytes(fc.kcase) > limits::kMaxCaseBytes) return "accepted a case past the memory limit";
      if (!(case_from_json(case_to_json(fc.kcase), "rt", "") == fc.kcase)) return "the case does not survive a round trip";
    }
    for (const ModelFixtureCase& mc : f.model_cases)
      if (!validate(mc.mcase).empty()) return "accepted an invalid model case";
  } catch (const InputError&) {
    return "";
  } catch (const std::exception& e) {
    return std::string("escaped: ") + e.what();
  }
  return "";
}

class QuietListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// Runs `prop` for `cases` RapidCheck cases with a fixed seed; returns the failure's description, or "".
template <typename Prop>
std::string counterexample(Prop prop, int cases) {
  rc::detail::TestParams params;
  params.seed = 15;
  params.maxSuccess = cases;
  params.maxSize = 100;
  params.disableShrinking = true;
  rc::detail::TestMetadata meta;
  QuietListener quiet;
  const auto result = rc::detail::checkProperty(rc::detail::toProperty(prop), meta, params, quiet);
  rc::detail::FailureResult failure;
  if (result.match(failure)) return failure.description;
  rc::detail::GaveUpResult gave_up;
  if (result.match(gave_up)) return "gave up: " + gave_up.description;
  return "";
}

Fixture hardened_reader(const std::string& text) { return fixture_from_text(text, "fuzz.json"); }

TEST(InputFuzz, MalformedFixturesLoadValidCasesOrAreRefused) {
  const std::string found = counterexample(
      [] {
        const std::string text = mutated_document();
        RC_LOG() << text.substr(0, 2000) << "\n";
        const std::string why = misbehaviour(hardened_reader, text);
        RC_ASSERT(why == "");
      },
      5000);  // about 0.5 s; about 5 % of the documents load, the rest are refused
  EXPECT_EQ(found, "");
}

// A valid safetensors file with random edits: byte flips, a rewritten header length, truncation, a
// header mutated like a fixture document.
TEST(InputFuzz, MalformedSafetensorsAreReadCorrectlyOrRefused) {
  SafetensorsFile good;
  good.tensors["a"] = store_floats({1, 2, 3, 4}, {2, 2}, DType::kF32);
  good.tensors["b"] = store_floats({1, 2}, {2}, DType::kBF16);
  good.metadata["format"] = "flashcheck";
  const std::string clean = encode_safetensors(good);
  const std::string found = counterexample(
      [&] {
        std::string bytes = clean;
        switch (*rc::gen::inRange(0, 4)) {
          case 0:
            for (int n = *rc::gen::inRange(1, 6); n > 0; --n)
              bytes[*rc::gen::inRange<std::size_t>(0, bytes.size())] = static_cast<char>(*rc::gen::arbitrary<std::uint8_t>());
            break;
          case 1: bytes.resize(*rc::gen::inRange<std::size_t>(0, bytes.size())); break;
          case 2:
            for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>(*rc::gen::arbitrary<std::uint8_t>());
            break;
          default: {
            std::size_t n = 0;
            for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(clean[static_cast<std::size_t>(i)]);
            json h = json::parse(clean.substr(8, n));
            random_node(h) = random_value(2);
            const std::string hs = h.dump();
            std::string len(8, '\0');
            for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>(hs.size() >> (8 * i));
            bytes = len + hs + clean.substr(8 + n);
          }
        }
        try {
          const SafetensorsFile f = decode_safetensors(bytes, "fuzz.safetensors");
          std::size_t total = 0;
          for (const auto& [name, t] : f.tensors) {
            std::int64_t numel = 1;
            for (std::int64_t d : t.shape) numel *= d;
            const std::int64_t es = t.dtype == "F64" || t.dtype == "I64" ? 8 : t.dtype == "F32" || t.dtype == "I32" ? 4
                                  : t.dtype == "F16" || t.dtype == "BF16" || t.dtype == "I16" ? 2 : 1;
            RC_ASSERT(static_cast<std::int64_t>(t.bytes.size()) == numel * es);
            total += t.bytes.size();
          }
          RC_ASSERT(total <= bytes.size());
        } catch (const InputError&) {
        } catch (const std::exception& e) {
          RC_FAIL(std::string("escaped: ") + e.what());
        }
      },
      3000);
  EXPECT_EQ(found, "");
}

// The property can fail: a reader without the hardening (nlohmann's parse and get<> straight into a case)
// lets a json::exception out on some mutated document within the same budget.
TEST(InputFuzz, ThePropertyCatchesAReaderWithoutTheHardening) {
  const auto naive = [](const std::string& text) {
    json j;
    try {  // as the loader once did: only parse_error became an InputError
      j = json::parse(text);
    } catch (const json::parse_error& e) {
      throw InputError("fuzz.json", "", e.what());
    }
    Fixture f;
    if (!j.is_object() || !j.contains("cases")) throw InputError("fuzz.json", "cases", "missing");
    for (const json& c : j["cases"]) {
      FixtureCase fc;
      fc.kcase.heads = c.value("heads", std::int64_t{1});  // type_error for a string, silent wrap for 2^64 - 1
      fc.kcase.kv_heads = fc.kcase.heads;
      fc.kcase.head_dim = fc.kcase.v_head_dim = c.value("head_dim", std::int64_t{64});
      fc.kcase.seqs = {{.q_len = 1, .k_len = 1}};
      f.cases.push_back(fc);
    }
    return f;
  };
  const std::string found = counterexample(
      [&] { RC_ASSERT(misbehaviour(naive, mutated_document()) == ""); }, 3000);
  EXPECT_NE(found, "");
}

}  // namespace
}  // namespace flashcheck
