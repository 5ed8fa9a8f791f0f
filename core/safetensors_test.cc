#include "core/safetensors.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "core/error.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) { return (fs::temp_directory_path() / ("fc_" + name)).string(); }

TEST(Safetensors, RoundTripsEveryDtypeWeWrite) {
  SafetensorsFile f;
  const std::vector<float> vals{1.0f, -2.5f, 0.099609375f, 65504.0f};
  f.tensors["a.bf16"] = store_floats(vals, {2, 2}, DType::kBF16);
  f.tensors["b.f16"] = store_floats(vals, {4}, DType::kF16);
  f.tensors["c.f32"] = store_floats({0.1f, 1e-30f}, {2}, DType::kF32);
  f.tensors["d.i32"] = store_int32({7, -1, 3}, {3});
  f.metadata["format"] = "flashcheck";
  const std::string p = temp_path("rt.safetensors");
  write_safetensors(p, f);
  const SafetensorsFile g = read_safetensors(p);
  EXPECT_EQ(g.metadata.at("format"), "flashcheck");
  EXPECT_EQ(g.tensors.at("a.bf16").dtype, "BF16");
  EXPECT_EQ(g.tensors.at("a.bf16").shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(load_floats(g.tensors.at("a.bf16"))[3], 65280.0f);  // 65504 is not a bf16 value: truncated by storing
  EXPECT_EQ(load_floats(g.tensors.at("b.f16")), vals);
  EXPECT_EQ(load_floats(g.tensors.at("c.f32")), (std::vector<float>{0.1f, 1e-30f}));
  EXPECT_EQ(load_int32(g.tensors.at("d.i32")), (std::vector<std::int32_t>{7, -1, 3}));
  // Header length is a multiple of 8 (data section aligned).
  std::ifstream in(p, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  EXPECT_EQ(len[0] % 8, 0);
  fs::remove(p);
}

TEST(Safetensors, BitExactBf16Storage) {
  const std::vector<float> vals{1.0f, -0.10009765625f, 3.140625f};
  EXPECT_EQ(load_floats(store_floats(vals, {3}, DType::kBF16)), vals);
}

void write_raw(const std::string& p, const std::string& header, std::size_t payload) {
  std::ofstream out(p, std::ios::binary);
  std::uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(payload, '\0');
}

std::string read_error(const std::string& p) {
  try {
    read_safetensors(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, MalformedFilesNameTheTensorAndReason) {
  const std::string p = temp_path("bad.safetensors");
  write_raw(p, R"({"q": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8);
  EXPECT_EQ(read_error(p), p + ": q: 8 bytes for 3 elements of F32");
  write_raw(p, R"({"q": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4);
  EXPECT_EQ(read_error(p), p + ": q: data_offsets outside the data section");
  write_raw(p, R"({"q": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  EXPECT_EQ(read_error(p), p + ": q: unsupported dtype C64");
  write_raw(p, R"({"q": )", 0);
  EXPECT_NE(read_error(p).find(p + ": header.q: malformed JSON"), std::string::npos) << read_error(p);
  EXPECT_EQ(read_error(temp_path("missing.safetensors")), temp_path("missing.safetensors") + ": no such file");
  fs::remove(p);
}

}  // namespace
}  // namespace flashcheck
