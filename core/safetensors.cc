#include "core/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/checked.h"
#include "core/detail/json_reader.h"
#include "core/error.h"
#include "core/files.h"
#include "core/input_limits.h"
#include "core/json_input.h"

namespace flashcheck {
namespace {

std::int64_t dtype_size(const std::string& dt) {
  if (dt == "F64" || dt == "I64") return 8;
  if (dt == "F32" || dt == "I32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL") return 1;
  return 0;
}

std::uint16_t half_bits(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  std::uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
float half_value(std::uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

}  // namespace

SafetensorsFile decode_safetensors(std::string_view data, const std::string& path) {
  if (data.size() < 8) throw InputError(path, "", "file shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(data[static_cast<std::size_t>(i)]);
  if (n > static_cast<std::uint64_t>(limits::kMaxSafetensorsHeaderBytes))
    throw InputError(path, "", fmt::format("header length {} exceeds the format's limit of {} bytes", n,
                                           limits::kMaxSafetensorsHeaderBytes));
  if (n > data.size() - 8) throw InputError(path, "", fmt::format("header length {} exceeds the file size", n));
  nlohmann::json header;
  try {
    header = parse_json_input(data.substr(8, static_cast<std::size_t>(n)), path);
  } catch (const InputError& e) {
    throw InputError(path, e.field().empty() ? "header" : "header." + e.field(), e.reason());
  }
  if (!header.is_object()) throw InputError(path, "header", "not a JSON object");
  const std::size_t base = 8 + static_cast<std::size_t>(n);
  const std::int64_t payload = static_cast<std::int64_t>(data.size() - base);
  SafetensorsFile f;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;  // data_offsets of every tensor
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InputError(path, name, "metadata must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw InputError(path, name + "." + k, "metadata values must be strings");
        f.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const detail::JsonReader r(entry, path, name);
    r.only({"dtype", "shape", "data_offsets"});
    StoredTensor t;
    t.dtype = r.string("dtype");
    const std::int64_t es = dtype_size(t.dtype);
    if (es == 0) throw InputError(path, name, fmt::format("unsupported dtype {}", t.dtype));
    const nlohmann::json& shape = r.array("shape");
    std::int64_t numel = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::int64_t d = r.as_integer(shape[i], fmt::format("shape[{}]", i));
      if (d < 0) throw InputError(path, name, "negative dimension");
      t.shape.push_back(d);
      numel = d == 0 ? 0 : numel == 0 ? 0 : size_mul(numel, d);
    }
    const nlohmann::json& off = r.array("data_offsets");
    if (off.size() != 2) throw InputError(path, name, "data_offsets must be [begin, end]");
    const std::int64_t begin = r.as_integer(off[0], "data_offsets[0]"), end = r.as_integer(off[1], "data_offsets[1]");
    if (begin < 0 || begin > end || end > payload) throw InputError(path, name, "data_offsets outside the data section");
    if (size_mul(numel, es) != end - begin)
      throw InputError(path, name, fmt::format("{} bytes for {} elements of {}", end - begin,
                                               numel == kSizeSaturated ? std::string("more than 2^63") : std::to_string(numel), t.dtype));
    spans.emplace_back(begin, end);
    t.bytes.assign(data.begin() + static_cast<std::ptrdiff_t>(base + static_cast<std::size_t>(begin)),
                   data.begin() + static_cast<std::ptrdiff_t>(base + static_cast<std::size_t>(end)));
    f.tensors.emplace(name, std::move(t));
  }
  // As in the safetensors library (safetensors/src/tensor.rs, Metadata::validate): tensors tile the data
  // section without gaps or overlaps, and nothing follows the last one.
  std::sort(spans.begin(), spans.end());
  std::int64_t at = 0;
  for (const auto& [begin, end] : spans) {
    if (begin != at) throw InputError(path, "", fmt::format("tensor data at byte {} does not follow the previous tensor (ends at {})", begin, at));
    at = end;
  }
  if (at != payload) throw InputError(path, "", fmt::format("{} bytes after the last tensor's data", payload - at));
  return f;
}

SafetensorsFile read_safetensors(const std::string& path, std::int64_t max_bytes) {
  return decode_safetensors(read_input_file(path, max_bytes), path);
}

std::string encode_safetensors(const SafetensorsFile& file) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {  // std::map order: offsets ascend with the names
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so that the data section is 8-byte aligned
  std::string out;
  out.reserve(8 + h.size() + offset);
  for (int i = 0; i < 8; ++i) out += static_cast<char>(static_cast<std::uint64_t>(h.size()) >> (8 * i));
  out += h;
  for (const auto& [name, t] : file.tensors) out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  write_file_atomic(path, encode_safetensors(file));
}

StoredTensor store_floats(const std::vector<float>& values, const std::vector<std::int64_t>& shape, DType dt) {
  StoredTensor t;
  t.shape = shape;
  if (dt == DType::kF32) {
    t.dtype = "F32";
    t.bytes.resize(values.size() * 4);
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  }
  t.dtype = dt == DType::kBF16 ? "BF16" : "F16";
  t.bytes.resize(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint16_t u;
    if (dt == DType::kBF16) {
      std::uint32_t w;
      std::memcpy(&w, &values[i], 4);
      u = static_cast<std::uint16_t>(w >> 16);  // exact: the value is a bf16 value
    } else {
      u = half_bits(values[i]);
    }
    std::memcpy(t.bytes.data() + 2 * i, &u, 2);
  }
  return t;
}

StoredTensor store_int32(const std::vector<std::int32_t>& values, const std::vector<std::int64_t>& shape) {
  StoredTensor t{"I32", shape, std::vector<std::uint8_t>(values.size() * 4)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

StoredTensor store_int64(const std::vector<std::int64_t>& values, const std::vector<std::int64_t>& shape) {
  StoredTensor t{"I64", shape, std::vector<std::uint8_t>(values.size() * 8)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::vector<float> load_floats(const StoredTensor& t) {
  std::vector<float> v;
  if (t.dtype == "F32") {
    v.resize(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  } else if (t.dtype == "F64") {
    for (std::size_t i = 0; i < t.bytes.size(); i += 8) {
      double d;
      std::memcpy(&d, t.bytes.data() + i, 8);
      v.push_back(static_cast<float>(d));
    }
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    for (std::size_t i = 0; i < t.bytes.size(); i += 2) {
      std::uint16_t u;
      std::memcpy(&u, t.bytes.data() + i, 2);
      if (t.dtype == "BF16") {
        const std::uint32_t w = static_cast<std::uint32_t>(u) << 16;
        float f;
        std::memcpy(&f, &w, 4);
        v.push_back(f);
      } else {
        v.push_back(half_value(u));
      }
    }
  } else {
    throw std::invalid_argument("not a float tensor: " + t.dtype);
  }
  return v;
}

std::vector<std::int32_t> load_int32(const StoredTensor& t) {
  std::vector<std::int32_t> v;
  if (t.dtype == "I32") {
    v.resize(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  } else if (t.dtype == "I64") {
    for (std::size_t i = 0; i < t.bytes.size(); i += 8) {
      std::int64_t x;
      std::memcpy(&x, t.bytes.data() + i, 8);
      v.push_back(static_cast<std::int32_t>(x));
    }
  } else {
    throw std::invalid_argument("not an integer tensor: " + t.dtype);
  }
  return v;
}

}  // namespace flashcheck
