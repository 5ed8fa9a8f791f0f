#include "core/safetensors.h"

#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/error.h"

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

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file");
  std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 8) throw InputError(path, "", "file shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[static_cast<std::size_t>(i)];
  if (n > data.size() - 8) throw InputError(path, "", fmt::format("header length {} exceeds the file size", n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(data.begin() + 8, data.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, "header", std::string("malformed JSON: ") + e.what());
  }
  if (!header.is_object()) throw InputError(path, "header", "not a JSON object");
  const std::size_t base = 8 + n, payload = data.size() - base;
  SafetensorsFile f;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InputError(path, name, "metadata must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw InputError(path, name + "." + k, "metadata values must be strings");
        f.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    try {
      StoredTensor t;
      t.dtype = entry.at("dtype").get<std::string>();
      t.shape = entry.at("shape").get<std::vector<std::int64_t>>();
      const auto off = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      const std::int64_t es = dtype_size(t.dtype);
      if (es == 0) throw InputError(path, name, fmt::format("unsupported dtype {}", t.dtype));
      if (off.size() != 2 || off[0] > off[1] || off[1] > payload)
        throw InputError(path, name, "data_offsets outside the data section");
      std::int64_t numel = 1;
      for (std::int64_t d : t.shape) {
        if (d < 0) throw InputError(path, name, "negative dimension");
        numel *= d;
      }
      if (static_cast<std::uint64_t>(numel * es) != off[1] - off[0])
        throw InputError(path, name, fmt::format("{} bytes for {} elements of {}", off[1] - off[0], numel, t.dtype));
      t.bytes.assign(data.begin() + static_cast<std::ptrdiff_t>(base + off[0]),
                     data.begin() + static_cast<std::ptrdiff_t>(base + off[1]));
      f.tensors.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(path, name, std::string("malformed entry: ") + e.what());
    }
  }
  return f;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {  // std::map order: offsets ascend with the names
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so that the data section is 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path, "", "cannot write file");
  std::uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(h.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& [name, t] : file.tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!out) throw InputError(path, "", "write failed");
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
