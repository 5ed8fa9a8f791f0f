#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kernels/kernel.h"

namespace flashcheck::cli {
namespace {

std::string_view support_name(Support s) {
  switch (s) {
    case Support::kNative: return "native";
    case Support::kTranslated: return "translated";
    default: return "no";
  }
}

nlohmann::json contract_json(const Kernel& k) {
  const Contract& c = k.contract();
  nlohmann::json dtypes = nlohmann::json::array(), layouts = nlohmann::json::array(), strides = nlohmann::json::array();
  for (DType t : c.dtypes) dtypes.push_back(to_string(t));
  for (QLayout l : c.layouts) layouts.push_back(to_string(l));
  for (KvStrides s : c.kv_strides) strides.push_back(to_string(s));
  nlohmann::json j = {
      {"name", k.name()},
      {"device", k.device()},
      {"summary", c.summary},
      {"features",
       {{"bottom_right", support_name(c.bottom_right)},
        {"top_left", support_name(c.top_left)},
        {"window", support_name(c.window)},
        {"softcap", support_name(c.softcap)},
        {"gqa", support_name(c.gqa)},
        {"varlen", support_name(c.varlen)},
        {"seqused_k", support_name(c.seqused_k)},
        {"leftpad", support_name(c.leftpad)},
        {"paged", support_name(c.paged)},
        {"kv_cache", support_name(c.kv_cache)},
        {"zero_length", support_name(c.zero_length)},
        {"dv_differs", support_name(c.dv_differs)},
        {"slack", support_name(c.slack)}}},
      {"dtypes", dtypes},
      {"max_head_dim", c.max_head_dim},
      {"head_dim_multiple", c.head_dim_multiple},
      {"page_size_multiple", c.page_size_multiple},
      {"layouts", layouts},
      {"kv_strides", strides},
      {"empty_row", to_string(c.empty_row)},
      {"returns_lse", c.returns_lse},
      {"deterministic", c.deterministic},
      {"writes_into_buffer", c.writes_into_buffer},
      {"notes", c.notes},
      {"coverage_exempt", c.coverage_exempt},
  };
  if (k.is_mutant()) j["mutant"] = k.mutant_description();
  return j;
}

}  // namespace

int run_list(const ListOptions& o) {
  const Registry& reg = builtin_registry();
  std::vector<Kernel*> ks = reg.kernels();
  if (o.mutants) ks = reg.mutants();
  if (o.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const Kernel* k : ks) arr.push_back(contract_json(*k));
    std::cout << arr.dump(2) << "\n";
    return kExitOk;
  }
  for (const Kernel* k : ks) {
    const nlohmann::json j = contract_json(*k);
    fmt::print("{}\n  {}\n", k->name(), k->is_mutant() ? std::string(k->mutant_description()) : j["summary"].get<std::string>());
    std::string native, translated, no;
    for (const auto& [f, s] : j["features"].items()) {
      const std::string v = s.get<std::string>();
      (v == "native" ? native : v == "translated" ? translated : no) += " " + f;
    }
    fmt::print("  native:    {}\n  translated:{}\n  no:        {}\n", native.empty() ? " -" : native.substr(1),
               translated.empty() ? " -" : translated, no.empty() ? "-" : no.substr(1));
    std::string dts;
    for (const auto& d : j["dtypes"]) dts += " " + d.get<std::string>();
    fmt::print("  dtypes:{}  head dim <= {} (multiple of {})  empty rows: {}  lse: {}  deterministic: {}\n", dts,
               k->contract().max_head_dim, k->contract().head_dim_multiple, to_string(k->contract().empty_row),
               k->contract().returns_lse ? "yes" : "no", k->contract().deterministic ? "yes" : "no");
    for (const std::string& n : k->contract().notes) fmt::print("  note: {}\n", n);
    for (const auto& [feature, why] : k->contract().coverage_exempt)
      fmt::print("  coverage not required: {} ({})\n", feature, why);
    fmt::print("\n");
  }
  return kExitOk;
}

}  // namespace flashcheck::cli
