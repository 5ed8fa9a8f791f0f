#include "kernels/contract_json.h"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/error.h"

namespace flashcheck {
namespace {

using nlohmann::json;

std::string_view support_name(Support s) {
  switch (s) {
    case Support::kNative: return "native";
    case Support::kTranslated: return "translated";
    default: return "no";
  }
}

// The feature fields, in the order `list` prints them.
const std::array<std::pair<const char*, Support Contract::*>, 13>& feature_fields() {
  static const std::array<std::pair<const char*, Support Contract::*>, 13> f{{
      {"bottom_right", &Contract::bottom_right},
      {"top_left", &Contract::top_left},
      {"window", &Contract::window},
      {"softcap", &Contract::softcap},
      {"gqa", &Contract::gqa},
      {"varlen", &Contract::varlen},
      {"seqused_k", &Contract::seqused_k},
      {"leftpad", &Contract::leftpad},
      {"paged", &Contract::paged},
      {"kv_cache", &Contract::kv_cache},
      {"zero_length", &Contract::zero_length},
      {"dv_differs", &Contract::dv_differs},
      {"slack", &Contract::slack},
  }};
  return f;
}

// Reads contract fields with the source and field named in every error.
class Reader {
 public:
  // `prefix` names the object the fields sit in ("backward."), for the messages.
  Reader(const json& j, std::string source, std::string prefix = "")
      : j_(j), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    throw InputError(source_, prefix_ + field, reason);
  }
  bool has(const char* key) const { return j_.contains(key); }
  const json& at(const char* key) const { return j_.at(key); }

  std::string string(const char* key, const std::string& dflt) const {
    if (!has(key)) return dflt;
    if (!at(key).is_string()) fail(key, "must be a string");
    return at(key).get<std::string>();
  }
  bool boolean(const char* key, bool dflt) const {
    if (!has(key)) return dflt;
    if (!at(key).is_boolean()) fail(key, "must be true or false");
    return at(key).get<bool>();
  }
  std::int64_t integer(const char* key, std::int64_t dflt, std::int64_t lo, std::int64_t hi) const {
    if (!has(key)) return dflt;
    const json& v = at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer");
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      fail(key, fmt::format("must be in [{}, {}]", lo, hi));
    const std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi) fail(key, fmt::format("{} is outside [{}, {}]", x, lo, hi));
    return x;
  }
  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    if (!has(key)) return out;
    if (!at(key).is_array()) fail(key, "must be an array of strings");
    for (std::size_t i = 0; i < at(key).size(); ++i) {
      if (!at(key)[i].is_string()) fail(fmt::format("{}[{}]", key, i), "must be a string");
      out.push_back(at(key)[i].get<std::string>());
    }
    return out;
  }
  // An enum from its name, e.g. "bf16" or "varlen".
  template <class T, class Parse>
  std::vector<T> names(const char* key, Parse parse, const char* what) const {
    std::vector<T> out;
    const std::vector<std::string> s = strings(key);
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto v = parse(s[i]);
      if (!v) fail(fmt::format("{}[{}]", key, i), fmt::format("unknown {} \"{}\"", what, s[i]));
      out.push_back(*v);
    }
    return out;
  }

 private:
  const json& j_;
  std::string source_, prefix_;
};

}  // namespace

json kernel_json(const Kernel& k) {
  const Contract& c = k.contract();
  json dtypes = json::array(), layouts = json::array(), strides = json::array(), features = json::object();
  for (DType t : c.dtypes) dtypes.push_back(to_string(t));
  for (QLayout l : c.layouts) layouts.push_back(to_string(l));
  for (KvStrides s : c.kv_strides) strides.push_back(to_string(s));
  for (const auto& [name, field] : feature_fields()) features[name] = support_name(c.*field);
  json j = {
      {"name", k.name()},
      {"device", k.device()},
      {"summary", c.summary},
      {"features", features},
      {"dtypes", dtypes},
      {"max_head_dim", c.max_head_dim},
      {"head_dim_multiple", c.head_dim_multiple},
      {"head_dims", c.head_dims},
      {"page_size_multiple", c.page_size_multiple},
      {"layouts", layouts},
      {"kv_strides", strides},
      {"empty_row", to_string(c.empty_row)},
      {"returns_lse", c.returns_lse},
      {"deterministic", c.deterministic},
      {"writes_into_buffer", c.writes_into_buffer},
      {"finite_unused_slots", c.finite_unused_slots},
      {"notes", c.notes},
      {"coverage_exempt", c.coverage_exempt},
  };
  if (c.backward.available) {
    json bw_dtypes = json::array();
    for (DType t : c.backward.dtypes) bw_dtypes.push_back(to_string(t));
    j["backward"] = {{"deterministic", c.backward.deterministic},
                     {"zeroes_unused_keys", c.backward.zeroes_unused_keys},
                     {"writes_into_buffer", c.backward.writes_into_buffer},
                     {"without", c.backward.without},
                     {"dtypes", bw_dtypes},
                     {"notes", c.backward.notes}};
    if (!c.backward.coverage_exempt.empty()) j["backward"]["coverage_exempt"] = c.backward.coverage_exempt;
  }
  if (k.is_mutant()) j["mutant"] = k.mutant_description();
  return j;
}

Contract contract_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source, "", "the contract must be a JSON object");
  const Reader r(j, source);
  Contract c;
  c.summary = r.string("summary", "");
  if (r.has("features")) {
    const json& f = r.at("features");
    if (!f.is_object()) r.fail("features", "must be an object of feature: native | translated | no");
    for (const auto& [key, value] : f.items()) {
      Support Contract::* field = nullptr;
      for (const auto& [name, member] : feature_fields())
        if (key == name) field = member;
      if (!field) r.fail("features." + key, "unknown feature");
      const std::string s = value.is_string() ? value.get<std::string>() : "";
      if (s == "native") c.*field = Support::kNative;
      else if (s == "translated") c.*field = Support::kTranslated;
      else if (s == "no") c.*field = Support::kNo;
      else r.fail("features." + key, "must be \"native\", \"translated\" or \"no\"");
    }
  }
  if (!r.has("dtypes")) r.fail("dtypes", "missing: the dtypes the kernel takes (fp16, bf16, fp32)");
  c.dtypes = r.names<DType>("dtypes", parse_dtype, "dtype");
  if (c.dtypes.empty()) r.fail("dtypes", "must name at least one dtype");
  c.max_head_dim = r.integer("max_head_dim", c.max_head_dim, 1, 1024);
  c.head_dim_multiple = r.integer("head_dim_multiple", c.head_dim_multiple, 1, 1024);
  if (r.has("head_dims")) {
    const json& dims = r.at("head_dims");
    if (!dims.is_array()) r.fail("head_dims", "must be an array of head dims (whole numbers 1..1024)");
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (!dims[i].is_number_integer() || dims[i].get<std::int64_t>() < 1 || dims[i].get<std::int64_t>() > 1024)
        r.fail(fmt::format("head_dims[{}]", i), "must be a whole number in [1, 1024]");
      c.head_dims.push_back(dims[i].get<std::int64_t>());
    }
  }
  c.page_size_multiple = r.integer("page_size_multiple", c.page_size_multiple, 1, 1 << 20);
  if (r.has("layouts")) c.layouts = r.names<QLayout>("layouts", parse_layout, "layout");
  if (r.has("kv_strides")) c.kv_strides = r.names<KvStrides>("kv_strides", parse_kv_strides, "K/V stride kind");
  if (r.has("empty_row")) {
    const auto e = parse_empty_row(r.string("empty_row", ""));
    if (!e) r.fail("empty_row", "must be \"zero\", \"nan\" or \"uniform\"");
    c.empty_row = *e;
  }
  c.returns_lse = r.boolean("returns_lse", c.returns_lse);
  c.deterministic = r.boolean("deterministic", c.deterministic);
  c.writes_into_buffer = r.boolean("writes_into_buffer", c.writes_into_buffer);
  c.finite_unused_slots = r.string("finite_unused_slots", "");
  c.notes = r.strings("notes");
  if (r.has("backward")) {
    const json& b = r.at("backward");
    if (!b.is_object())
      r.fail("backward", "must be an object (deterministic, zeroes_unused_keys, writes_into_buffer, without, dtypes, notes)");
    for (const auto& [key, value] : b.items())
      if (key != "deterministic" && key != "zeroes_unused_keys" && key != "writes_into_buffer" && key != "without" &&
          key != "dtypes" && key != "notes" && key != "coverage_exempt")  // the last: the harness's bookkeeping
        r.fail("backward." + key, "unknown field");
    const Reader br(b, source, "backward.");
    c.backward.available = true;
    c.backward.deterministic = br.boolean("deterministic", true);
    c.backward.zeroes_unused_keys = br.boolean("zeroes_unused_keys", true);
    c.backward.writes_into_buffer = br.boolean("writes_into_buffer", false);
    c.backward.without = br.strings("without");
    for (std::size_t i = 0; i < c.backward.without.size(); ++i) {
      const auto& names = contract_feature_names();
      if (std::find(names.begin(), names.end(), c.backward.without[i]) == names.end())
        br.fail(fmt::format("without[{}]", i), fmt::format("unknown feature \"{}\"", c.backward.without[i]));
    }
    c.backward.dtypes = br.names<DType>("dtypes", parse_dtype, "dtype");
    c.backward.notes = br.strings("notes");
  }
  return c;
}

}  // namespace flashcheck
