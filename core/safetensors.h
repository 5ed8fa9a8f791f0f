// A small reader and writer for the safetensors format (8-byte little-endian header length, a JSON header
// of {name: {dtype, shape, data_offsets}}, then the raw little-endian bytes), enough for captured fixture
// tensors. Files written here load in Python's `safetensors`; files from it load here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/input_limits.h"

namespace flashcheck {

struct StoredTensor {
  std::string dtype;  // "F32", "F16", "BF16", "F64", "I32", "I64"
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

struct SafetensorsFile {
  std::map<std::string, StoredTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Throws InputError naming the file, the tensor and the reason on any malformed input: a file that is not
// a regular file or is larger than `max_bytes`, a header past the format's 100 MB limit or not a JSON
// object of {dtype, shape, data_offsets}, sizes that disagree with the shapes, data that does not tile the
// data section exactly.
SafetensorsFile read_safetensors(const std::string& path,
                                 std::int64_t max_bytes = limits::kMaxCaseBytes + limits::kMaxSafetensorsHeaderBytes);
// The same checks on bytes in memory; `path` names them in messages.
SafetensorsFile decode_safetensors(std::string_view bytes, const std::string& path);
// Written atomically (core/files.h); throws OutputError.
void write_safetensors(const std::string& path, const SafetensorsFile& file);
std::string encode_safetensors(const SafetensorsFile& file);

// Float values stored in `dt` ("BF16"/"F16"/"F32"); the values must be exact in that dtype.
StoredTensor store_floats(const std::vector<float>& values, const std::vector<std::int64_t>& shape, DType dt);
StoredTensor store_int32(const std::vector<std::int32_t>& values, const std::vector<std::int64_t>& shape);
StoredTensor store_int64(const std::vector<std::int64_t>& values, const std::vector<std::int64_t>& shape);
// Decodes any float dtype to float values; throws std::invalid_argument for integer dtypes.
std::vector<float> load_floats(const StoredTensor& t);
std::vector<std::int32_t> load_int32(const StoredTensor& t);

}  // namespace flashcheck
