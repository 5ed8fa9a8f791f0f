#include "core/case_json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/detail/json_reader.h"

namespace flashcheck {

using nlohmann::json;

json case_to_json(const KernelCase& c) {
  json seqs = json::array();
  for (const Sequence& s : c.seqs) {
    json js = {{"q_len", s.q_len}, {"k_len", s.k_len}};
    if (s.seqused_k) js["seqused_k"] = *s.seqused_k;
    if (s.leftpad_k) js["leftpad_k"] = s.leftpad_k;
    if (c.kv_cache) {
      js["cache_len"] = s.cache_len;
      js["new_len"] = s.new_len;
    }
    seqs.push_back(std::move(js));
  }
  json kv = {{"storage", to_string(c.kv_storage)}, {"strides", to_string(c.kv_strides)}, {"cache", c.kv_cache}};
  if (c.kv_storage == KvStorage::kPaged) {
    kv["page_size"] = c.paging.page_size;
    kv["extra_pages"] = c.paging.extra_pages;
    if (c.paging.block_table.empty()) kv["table_seed"] = c.paging.table_seed;
    else kv["block_table"] = c.paging.block_table;
  }
  json j = {
      {"dtype", to_string(c.dtype)},
      {"heads", c.heads},
      {"kv_heads", c.kv_heads},
      {"head_dim", c.head_dim},
      {"v_head_dim", c.v_head_dim},
      {"causal", c.causal},
      {"alignment", to_string(c.alignment)},
      {"window", {c.window.left, c.window.right}},
      {"softcap", c.softcap},
      {"layout", to_string(c.layout)},
      {"kv", std::move(kv)},
      {"seqs", std::move(seqs)},
      {"data",
       {{"dist", to_string(c.data.dist)},
        {"q_scale", c.data.q_scale},
        {"k_scale", c.data.k_scale},
        {"v_scale", c.data.v_scale},
        {"v_onehot", c.data.v_onehot},
        {"poison", c.data.poison},
        {"seed", c.data.seed}}},
  };
  if (c.slack != Slack{}) j["slack"] = {{"q_rows", c.slack.q_rows}, {"kv_rows", c.slack.kv_rows}};  // absent: no slack
  if (c.dout) j["dout"] = {{"dist", to_string(c.dout->kind)}, {"scale", c.dout->scale}};  // absent: forward only
  if (!c.name.empty()) j["name"] = c.name;
  j["scale"] = c.scale ? json(*c.scale) : json(nullptr);
  return j;
}

namespace {

template <typename E>
E parse_field(const detail::JsonReader& r, std::string_view key, E fallback, std::optional<E> (*parse)(std::string_view),
              std::string_view allowed) {
  if (!r.has(key)) return fallback;
  const std::string s = r.string(key);
  if (auto v = parse(s)) return *v;
  r.fail(key, fmt::format("unknown value \"{}\" (expected one of {})", s, allowed));
}

}  // namespace

KernelCase case_from_json(const json& j, const std::string& source, const std::string& path) {
  const detail::JsonReader r(j, source, path);
  r.only({"name", "dtype", "heads", "kv_heads", "head_dim", "v_head_dim", "causal", "alignment", "window", "softcap",
          "scale", "layout", "kv", "seqs", "data", "note", "expect", "slack", "dout"});
  KernelCase c;
  c.name = r.string("name", "");
  c.dtype = parse_field<DType>(r, "dtype", DType::kBF16, parse_dtype, "fp16, bf16, fp32");
  if (!r.has("dtype")) r.fail("dtype", "required field is missing");
  c.heads = r.integer("heads");
  c.kv_heads = r.integer("kv_heads", c.heads);
  c.head_dim = r.integer("head_dim");
  c.v_head_dim = r.integer("v_head_dim", c.head_dim);
  c.causal = r.boolean("causal", false);
  c.alignment = parse_field<Alignment>(r, "alignment", Alignment::kBottomRight, parse_alignment, "bottom_right, top_left");
  if (r.has("window")) {
    const json& w = r.array("window");
    if (w.size() != 2) r.fail("window", fmt::format("expected [left, right], found {} values", w.size()));
    c.window = {r.as_integer(w[0], "window[0]"), r.as_integer(w[1], "window[1]")};
  }
  c.softcap = r.number("softcap", 0.0);
  if (r.has("scale")) c.scale = r.number("scale", 0.0);
  c.layout = parse_field<QLayout>(r, "layout", QLayout::kVarlen, parse_layout, "varlen, padded_bshd, padded_bhsd");

  if (r.has("kv")) {
    const detail::JsonReader kv = r.object("kv");
    kv.only({"storage", "strides", "cache", "page_size", "extra_pages", "table_seed", "block_table"});
    c.kv_storage = parse_field<KvStorage>(kv, "storage", KvStorage::kPacked, parse_kv_storage, "packed, paged");
    c.kv_strides = parse_field<KvStrides>(kv, "strides", KvStrides::kContiguous, parse_kv_strides,
                                          "contiguous, gapped, expanded");
    c.kv_cache = kv.boolean("cache", false);
    c.paging.page_size = kv.integer("page_size", c.paging.page_size);
    c.paging.extra_pages = kv.integer("extra_pages", 0);
    c.paging.table_seed = kv.unsigned_integer("table_seed", 0);
    if (kv.has("block_table")) {
      const json& rows = kv.array("block_table");
      for (std::size_t b = 0; b < rows.size(); ++b) {
        const std::string key = fmt::format("block_table[{}]", b);
        if (!rows[b].is_array()) kv.fail(key, "expected an array of page indices");
        std::vector<std::int32_t> row;
        for (std::size_t i = 0; i < rows[b].size(); ++i) {
          const std::int64_t page = kv.as_integer(rows[b][i], fmt::format("{}[{}]", key, i));
          if (page < INT32_MIN || page > INT32_MAX) kv.fail(fmt::format("{}[{}]", key, i), "page index out of int32 range");
          row.push_back(static_cast<std::int32_t>(page));
        }
        c.paging.block_table.push_back(std::move(row));
      }
    }
  }

  if (r.has("slack")) {
    const detail::JsonReader sl = r.object("slack");
    sl.only({"q_rows", "kv_rows"});
    c.slack.q_rows = sl.integer("q_rows", 0);
    c.slack.kv_rows = sl.integer("kv_rows", 0);
  }

  const json& seqs = r.array("seqs");
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const detail::JsonReader s(seqs[b], source, r.field(fmt::format("seqs[{}]", b)));
    s.only({"q_len", "k_len", "seqused_k", "leftpad_k", "cache_len", "new_len"});
    Sequence q;
    q.q_len = s.integer("q_len");
    q.k_len = s.integer("k_len");
    if (s.has("seqused_k")) q.seqused_k = s.integer("seqused_k");
    q.leftpad_k = s.integer("leftpad_k", 0);
    q.cache_len = s.integer("cache_len", 0);
    q.new_len = s.integer("new_len", 0);
    c.seqs.push_back(q);
  }

  if (r.has("data")) {
    const detail::JsonReader d = r.object("data");
    d.only({"dist", "q_scale", "k_scale", "v_scale", "v_onehot", "poison", "seed"});
    c.data.dist = parse_field<Distribution>(d, "dist", Distribution::kNormal, parse_distribution,
                                            "normal, uniform, integers, large");
    c.data.q_scale = d.number("q_scale", 1.0);
    c.data.k_scale = d.number("k_scale", 1.0);
    c.data.v_scale = d.number("v_scale", 1.0);
    c.data.v_onehot = d.boolean("v_onehot", false);
    c.data.poison = d.boolean("poison", true);
    c.data.seed = d.unsigned_integer("seed", 0);
  }

  if (r.has("dout")) {
    const detail::JsonReader g = r.object("dout");
    g.only({"dist", "scale"});
    DoutRecipe d;
    d.kind = parse_field<DoutKind>(g, "dist", DoutKind::kNormal, parse_dout_kind, "normal, zero_rows, onehot");
    d.scale = g.number("scale", 1.0);
    c.dout = d;
  }

  // Field paths of validate() are relative to the case; prefix them with where the case sits.
  const std::vector<FieldError> errors = validate(c);
  if (!errors.empty()) {
    const FieldError& e = errors.front();
    std::string reason = e.reason;
    if (errors.size() > 1) reason += fmt::format(" (and {} more problem{})", errors.size() - 1, errors.size() > 2 ? "s" : "");
    throw InputError(source, path.empty() ? e.field : path + "." + e.field, reason);
  }
  return c;
}

}  // namespace flashcheck
