#include "core/model_case_json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/detail/json_reader.h"

namespace flashcheck {

using nlohmann::json;

json model_case_to_json(const ModelCase& m) {
  json j = {{"dtype", to_string(m.dtype)},
            {"batch", m.batch},
            {"q_len", m.q_len},
            {"past", m.past},
            {"heads", m.heads},
            {"kv_heads", m.kv_heads},
            {"head_dim", m.head_dim},
            {"causal", m.causal},
            {"sliding_window", m.sliding_window ? json(*m.sliding_window) : json(nullptr)},
            {"softcap", m.softcap ? json(*m.softcap) : json(nullptr)},
            {"scale", m.scale ? json(*m.scale) : json(nullptr)},
            {"attention_mask", m.attention_mask ? json(*m.attention_mask) : json(nullptr)},
            {"position_ids", m.position_ids ? json(*m.position_ids) : json(nullptr)},
            {"position_ids_3d", m.position_ids_3d},
            {"query_length", m.query_length ? json(*m.query_length) : json(nullptr)},
            {"use_cache", m.use_cache},
            {"static_cache_len", m.static_cache_len ? json(*m.static_cache_len) : json(nullptr)},
            {"via_generate", m.via_generate},
            {"data",
             {{"dist", to_string(m.data.dist)},
              {"q_scale", m.data.q_scale},
              {"k_scale", m.data.k_scale},
              {"v_scale", m.data.v_scale},
              {"v_onehot", m.data.v_onehot},
              {"seed", m.data.seed}}}};
  if (m.varlen_kwargs) {
    const VarlenKwargs& k = *m.varlen_kwargs;
    j["varlen_kwargs"] = {{"cu_seq_lens_q", k.cu_seq_lens_q},
                          {"cu_seq_lens_k", k.cu_seq_lens_k},
                          {"max_length_q", k.max_length_q},
                          {"max_length_k", k.max_length_k}};
  } else {
    j["varlen_kwargs"] = nullptr;
  }
  if (!m.name.empty()) j["name"] = m.name;
  return j;
}

namespace {

std::vector<std::vector<std::int64_t>> int_rows(const detail::JsonReader& r, std::string_view key) {
  const json& rows = r.array(key);
  std::vector<std::vector<std::int64_t>> out;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const std::string at = fmt::format("{}[{}]", key, b);
    if (!rows[b].is_array()) r.fail(at, "expected an array of integers, found " + detail::JsonReader::describe(rows[b]));
    std::vector<std::int64_t> row;
    for (std::size_t i = 0; i < rows[b].size(); ++i) row.push_back(r.as_integer(rows[b][i], fmt::format("{}[{}]", at, i)));
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::int64_t> int_list(const detail::JsonReader& r, std::string_view key) {
  const json& a = r.array(key);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(r.as_integer(a[i], fmt::format("{}[{}]", key, i)));
  return out;
}

}  // namespace

ModelCase model_case_from_json(const json& j, const std::string& source, const std::string& path) {
  const detail::JsonReader r(j, source, path);
  r.only({"name", "note", "expect", "dtype", "batch", "q_len", "past", "heads", "kv_heads", "head_dim", "causal",
          "sliding_window", "softcap", "scale", "attention_mask", "position_ids", "position_ids_3d", "query_length",
          "use_cache", "static_cache_len", "varlen_kwargs", "via_generate", "data"});
  ModelCase m;
  m.name = r.string("name", "");
  const std::string dt = r.string("dtype");
  if (auto d = parse_dtype(dt)) m.dtype = *d;
  else r.fail("dtype", fmt::format("unknown value \"{}\" (expected one of fp16, bf16, fp32)", dt));
  m.batch = r.integer("batch", 1);
  m.q_len = r.integer("q_len");
  m.past = r.integer("past", 0);
  m.heads = r.integer("heads");
  m.kv_heads = r.integer("kv_heads", m.heads);
  m.head_dim = r.integer("head_dim");
  m.causal = r.boolean("causal", true);
  if (r.has("sliding_window")) m.sliding_window = r.integer("sliding_window");
  if (r.has("softcap")) m.softcap = r.number("softcap", 0.0);
  if (r.has("scale")) m.scale = r.number("scale", 0.0);
  if (r.has("attention_mask")) m.attention_mask = int_rows(r, "attention_mask");
  if (r.has("position_ids")) m.position_ids = int_rows(r, "position_ids");
  m.position_ids_3d = r.boolean("position_ids_3d", false);
  if (r.has("query_length")) m.query_length = r.integer("query_length");
  m.use_cache = r.boolean("use_cache", m.past > 0);
  if (r.has("static_cache_len")) m.static_cache_len = r.integer("static_cache_len");
  m.via_generate = r.boolean("via_generate", false);
  if (r.has("varlen_kwargs")) {
    const detail::JsonReader k = r.object("varlen_kwargs");
    k.only({"cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k"});
    VarlenKwargs v;
    v.cu_seq_lens_q = int_list(k, "cu_seq_lens_q");
    v.cu_seq_lens_k = int_list(k, "cu_seq_lens_k");
    v.max_length_q = k.integer("max_length_q");
    v.max_length_k = k.integer("max_length_k");
    m.varlen_kwargs = std::move(v);
  }
  if (r.has("data")) {
    const detail::JsonReader d = r.object("data");
    d.only({"dist", "q_scale", "k_scale", "v_scale", "v_onehot", "seed", "poison"});
    const std::string dist = d.string("dist", "normal");
    if (auto v = parse_distribution(dist)) m.data.dist = *v;
    else d.fail("dist", fmt::format("unknown value \"{}\" (expected one of normal, uniform, integers, large)", dist));
    m.data.q_scale = d.number("q_scale", 1.0);
    m.data.k_scale = d.number("k_scale", 1.0);
    m.data.v_scale = d.number("v_scale", 1.0);
    m.data.v_onehot = d.boolean("v_onehot", false);
    m.data.seed = d.unsigned_integer("seed", 0);
  }
  m.data.poison = false;  // eager attends pad columns: they must hold real values
  const std::vector<FieldError> errors = validate(m);
  if (!errors.empty()) {
    const FieldError& e = errors.front();
    std::string reason = e.reason;
    if (errors.size() > 1) reason += fmt::format(" (and {} more problem{})", errors.size() - 1, errors.size() > 2 ? "s" : "");
    const std::string field = e.field.empty() ? path : path.empty() ? e.field : path + "." + e.field;
    throw InputError(source, field, reason);
  }
  return m;
}

}  // namespace flashcheck
