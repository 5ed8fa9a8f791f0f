// Hostile input (issue 15): each test is one class of input that once crashed, hung, exhausted memory or
// was silently accepted, and pins the clear error that replaces it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/case_json.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/files.h"
#include "core/fixture.h"
#include "core/input_limits.h"
#include "core/json_input.h"
#include "core/model_case.h"
#include "core/safetensors.h"
#include "core/test_temp_dir.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;


// The message of the InputError `f` throws, or "" when it throws nothing.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string fixture_error(const std::string& text) {
  return error_of([&] { fixture_from_text(text, "f.json"); });
}

std::string with_case(const std::string& fields) {
  return R"({"schema": "flashcheck.fixture/1", "cases": [{"dtype": "bf16", "heads": 2, "head_dim": 8, )" + fields + "}]}";
}

TEST(HostileJson, DuplicateKeysAreErrorsWithTheirPath) {
  EXPECT_EQ(fixture_error(R"({"schema": "flashcheck.fixture/1", "schema": "x"})"), "f.json: schema: duplicate key");
  EXPECT_EQ(fixture_error(with_case(R"("seqs": [{"q_len": 1, "k_len": 2, "q_len": 3}])")),
            "f.json: cases[0].seqs[0].q_len: duplicate key");
}

TEST(HostileJson, DeepNestingIsRefusedWithoutRecursing) {
  // A million levels: nlohmann's parser is iterative, and the document is refused at level 64, so neither
  // the parser, the destructor nor an error message walks a deep tree.
  const std::string deep = R"({"schema": "flashcheck.fixture/1", "title": )" + std::string(1'000'000, '[');
  std::string path = "title";
  for (int i = 0; i < limits::kMaxJsonDepth - 1; ++i) path += "[0]";
  EXPECT_EQ(fixture_error(deep), "f.json: " + path + ": nesting deeper than 64 levels");
}

TEST(HostileJson, NumberLiteralsOutOfRangeAreInputErrors) {
  // nlohmann throws out_of_range (not parse_error) for these: it once escaped every handler.
  EXPECT_EQ(fixture_error(with_case(R"("softcap": 1e400, "seqs": [{"q_len": 1, "k_len": 1}])")).rfind("f.json: cases[0].softcap: malformed JSON", 0), 0u)
      << fixture_error(with_case(R"("softcap": 1e400, "seqs": [{"q_len": 1, "k_len": 1}])"));
  EXPECT_NE(fixture_error(R"({"schema": NaN})").find("malformed JSON at byte"), std::string::npos);
}

TEST(HostileJson, IntegersNeverWrap) {
  // 2^64 - 1 once read as -1 (an unbounded window); 2^63 as -2^63; 1e20 was cast with undefined behaviour.
  EXPECT_EQ(fixture_error(with_case(R"("window": [18446744073709551615, 0], "seqs": [{"q_len": 1, "k_len": 1}])")),
            "f.json: cases[0].window[0]: integer out of range (at most 2^63 - 1): number 18446744073709551615");
  EXPECT_EQ(fixture_error(with_case(R"("seqs": [{"q_len": 9223372036854775808, "k_len": 1}])")),
            "f.json: cases[0].seqs[0].q_len: integer out of range (at most 2^63 - 1): number 9223372036854775808");
  EXPECT_EQ(fixture_error(with_case(R"("seqs": [{"q_len": 1e20, "k_len": 1}])")),
            "f.json: cases[0].seqs[0].q_len: integer out of range: number 1e+20");
  EXPECT_EQ(fixture_error(with_case(R"("seqs": [{"q_len": 99999999999999999999, "k_len": 1}])")),
            "f.json: cases[0].seqs[0].q_len: integer out of range: number 1e+20");
  EXPECT_EQ(fixture_error(with_case(R"("seqs": [{"q_len": 1.5, "k_len": 1}])")),
            "f.json: cases[0].seqs[0].q_len: expected an integer, found number 1.5");
}

TEST(HostileJson, HugeStringsAreRefused) {
  const std::string big(limits::kMaxJsonString + 1, 'x');
  EXPECT_EQ(fixture_error(R"({"schema": "flashcheck.fixture/1", "title": ")" + big + "\"}"),
            "f.json: title: a string of 1048577 bytes; the limit is 1048576");
}

TEST(HostileSizes, ProductsThatOverflowInt64AreRefused) {
  // page_size * pages once wrapped to a small pool: validation passed and the worker crashed.
  EXPECT_EQ(fixture_error(with_case(R"("kv": {"storage": "paged", "page_size": 4294967296, "extra_pages": 4294967296},
                                       "seqs": [{"q_len": 1, "k_len": 1}])")),
            "f.json: cases[0].seqs: the case needs more than 2^63 bytes of memory; the limit is 4294967296 bytes "
            "(core/input_limits.h)");
  EXPECT_EQ(fixture_error(with_case(R"("kv": {"storage": "paged", "page_size": 4611686018427387904}, "seqs": [{"q_len": 1, "k_len": 1}])")),
            "f.json: cases[0].kv.page_size: page size 4611686018427387904 is above 4294967296");
  EXPECT_EQ(fixture_error(with_case(R"("window": [1099511627777, 0], "seqs": [{"q_len": 1, "k_len": 1}])")),
            "f.json: cases[0].window[0]: left bound 1099511627777 is above 1099511627776");
}

TEST(HostileSizes, TheMemoryLimitRefusesBeforeAllocating) {
  // extra_pages once sized a vector in validation before any limit applied.
  KernelCase c;
  c.heads = c.kv_heads = 1;
  c.head_dim = c.v_head_dim = 8;
  c.kv_storage = KvStorage::kPaged;
  c.paging.page_size = 1;
  c.paging.extra_pages = std::int64_t{1} << 32;
  c.paging.block_table = {{0}};
  c.seqs = {{.q_len = 1, .k_len = 1}};
  const auto errors = validate(c);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "seqs");
  EXPECT_NE(errors[0].reason.find("the limit is 4294967296 bytes"), std::string::npos) << errors[0].reason;
  // A case at the old element limit (2^31 query elements) is refused, not allocated (8 GiB of floats).
  KernelCase big;
  big.heads = big.kv_heads = 1;
  big.head_dim = big.v_head_dim = 1;
  big.seqs = {{.q_len = std::int64_t{1} << 31, .k_len = 1}};
  ASSERT_FALSE(validate(big).empty());
  EXPECT_GT(case_bytes(big), limits::kMaxCaseBytes);
  // The estimate grows with every tensor and never wraps.
  big.seqs[0].q_len = 1;
  big.seqs[0].k_len = 1;
  const std::int64_t small = case_bytes(big);
  big.kv_cache = true;
  big.seqs[0] = {.q_len = 1, .k_len = 3, .cache_len = 1, .new_len = 2};
  EXPECT_GT(case_bytes(big), small);
  EXPECT_EQ(size_product({std::int64_t{1} << 40, std::int64_t{1} << 40}), kSizeSaturated);
  EXPECT_EQ(size_ceil_div(INT64_MAX, 1), INT64_MAX);
}

TEST(HostileSizes, ModelCaseFieldsAreBounded) {
  ModelCase m;
  m.heads = m.kv_heads = 1;
  m.head_dim = 8;
  m.q_len = 2;
  m.use_cache = true;
  m.static_cache_len = std::int64_t{1} << 62;  // batch * heads * q_len * static_cache_len once overflowed int64
  auto first = [](const ModelCase& x) {
    const auto e = validate(x);
    return e.empty() ? std::string() : e[0].field + ": " + e[0].reason;
  };
  EXPECT_EQ(first(m), "static_cache_len: 4611686018427387904 slots: a static cache holds past 0 + q_len 2 and at most 1048576");
  m.static_cache_len.reset();
  m.position_ids = std::vector<std::vector<std::int64_t>>{{0, std::int64_t{1} << 62}};
  EXPECT_EQ(first(m), "position_ids[0][1]: 4611686018427387904 is outside [0, 2147483648) (positions index the rotary table)");
}

TEST(HostileFiles, OnlyRegularFilesAreRead) {
  const testing::TempDir d("fc_hostile");
  EXPECT_EQ(error_of([&] { read_input_file(d.path.string(), 100); }), d.path.string() + ": not a regular file: it is a folder");
  EXPECT_EQ(error_of([] { read_input_file("/dev/zero", 100); }), "/dev/zero: not a regular file: it is a character device");
  const std::string fifo = (d.path / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_input_file(fifo, 100); }), fifo + ": not a regular file: it is a FIFO");  // no hang
  const std::string loop = (d.path / "loop").string();
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  EXPECT_EQ(error_of([&] { read_input_file(loop, 100); }), loop + ": too many levels of symbolic links (a symlink loop)");
  const std::string big = d.write("big", std::string(101, 'x'));
  EXPECT_EQ(error_of([&] { read_input_file(big, 100); }), big + ": file is 101 bytes; the limit is 100");
}

TEST(HostileFiles, TensorsMustBeARegularFileInsideTheFixturesFolder) {
  const testing::TempDir d("fc_hostile");
  const std::string outside = d.write("secret.safetensors", "x");
  fs::create_directories(d.path / "f");
  ::symlink(outside.c_str(), (d.path / "f" / "link.safetensors").c_str());
  ::symlink("/dev/zero", (d.path / "f" / "zero.safetensors").c_str());
  auto err = [&](const std::string& tensors) {
    const std::string p = d.write("f/x.json", with_case(R"("seqs": [{"q_len": 1, "k_len": 1}])").insert(1, "\"tensors\": \"" + tensors + "\", "));
    return error_of([&] { load_fixture(p); });
  };
  const std::string p = (d.path / "f" / "x.json").string();
  EXPECT_EQ(err("/dev/zero"), p + ": tensors: must be a file name relative to the fixture's folder, not an absolute path");
  EXPECT_EQ(err("../secret.safetensors"), p + ": tensors: must not leave the fixture's folder (\"..\")");
  EXPECT_NE(err("link.safetensors").find(": tensors: \"link.safetensors\" resolves to "), std::string::npos) << err("link.safetensors");
  EXPECT_NE(err("zero.safetensors").find("outside the fixture's folder"), std::string::npos) << err("zero.safetensors");
  EXPECT_NE(err("missing.safetensors").find(p + ": tensors: cannot open \"missing.safetensors\""), std::string::npos);
  fs::create_directories(d.path / "f" / "dir.safetensors");
  EXPECT_EQ(err("dir.safetensors"),
            p + ": tensors: " + (d.path / "f" / "dir.safetensors").string() + ": not a regular file: it is a folder");
}

std::string safetensors_bytes(const std::string& header, std::size_t payload) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(header.size() >> (8 * i));
  return out + header + std::string(payload, '\0');
}

TEST(HostileSafetensors, HeadersAreCheckedAgainstTheData) {
  auto err = [](const std::string& bytes) { return error_of([&] { decode_safetensors(bytes, "t"); }); };
  EXPECT_EQ(err(safetensors_bytes(R"({"q": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})", 0)),
            "t: q: 0 bytes for more than 2^63 elements of F32");
  EXPECT_EQ(err(safetensors_bytes(R"({"q": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 8)),
            "t: 4 bytes after the last tensor's data");
  EXPECT_EQ(err(safetensors_bytes(R"({"q": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8)),
            "t: tensor data at byte 4 does not follow the previous tensor (ends at 0)");
  EXPECT_EQ(err(safetensors_bytes(R"({"q": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1}})", 4)),
            "t: q.extra: unknown field");
  EXPECT_EQ(err(safetensors_bytes(R"({"q": {"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]}})", 4)),
            "t: q.data_offsets[1]: integer out of range (at most 2^63 - 1): number 18446744073709551615");
  EXPECT_EQ(err(safetensors_bytes(R"({"q": {}, "q": {}})", 0)), "t: header.q: duplicate key");
  std::string huge_len(8, '\xff');
  EXPECT_EQ(err(huge_len), "t: header length 18446744073709551615 exceeds the format's limit of 100000000 bytes");
}

TEST(HostileOutput, WritesAreAtomicCheckedAndKeepWhatExists) {
  const testing::TempDir d("fc_hostile");
  const std::string p = (d.path / "a.json").string();
  EXPECT_TRUE(write_file_atomic(p, "one"));
  EXPECT_FALSE(write_file_atomic(p, "two", Overwrite::kKeep));  // a user's file is not replaced
  EXPECT_EQ(read_input_file(p, 100), "one");
  EXPECT_TRUE(write_file_atomic(p, "three"));
  EXPECT_EQ(read_input_file(p, 100), "three");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator()), 1);  // no temporaries left
  try {
    write_file_atomic("/dev/null/x", "y");
    ADD_FAILURE() << "no error";
  } catch (const OutputError& e) {
    EXPECT_EQ(std::string(e.what()), "/dev/null/x: cannot create a file in /dev/null: Not a directory");
  }
  EXPECT_THROW(ensure_output_dir("/dev/null"), OutputError);
  EXPECT_THROW(ensure_output_dir(p), OutputError);
  EXPECT_THROW(ensure_output_dir(p + "/sub"), OutputError);
  const std::string kept = move_aside(p);
  EXPECT_EQ(kept, p + ".kept-1");
  EXPECT_EQ(read_input_file(kept, 100), "three");
  write_file_atomic(p, "four");
  EXPECT_EQ(move_aside(p), p + ".kept-2");  // the first kept file stays
  EXPECT_EQ(move_aside(p), "");
}

TEST(HostileOutput, MessagesArePrintable) {
  EXPECT_EQ(InputError("a\x1b[31m", "k\xff", "r\n").what(), std::string("a?[31m: k?: r?"));
  EXPECT_EQ(InputError("f", "\xc3\xa9t\xc3\xa9", "\xe2\x82").what(), std::string("f: \xc3\xa9t\xc3\xa9: ??"));  // UTF-8 stays
}

}  // namespace
}  // namespace flashcheck
