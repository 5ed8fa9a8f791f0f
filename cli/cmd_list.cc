#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/report.h"
#include "core/hf_profiles.h"
#include "kernels/contract_json.h"
#include "kernels/kernel.h"

namespace flashcheck::cli {
namespace {

// The HF profiles with the releases each claims: tools/hf_crosscheck/matrix.sh --long checks every boundary.
int list_profiles(bool json) {
  nlohmann::json arr = nlohmann::json::array();
  for (const hf::ProfileSpec& p : hf::profile_table()) {
    const auto [sdpa_first, sdpa_last] = hf::sdpa_release_range(p);
    arr.push_back({{"name", p.name},
                   {"releases", p.releases},
                   {"first_release", p.first_release},
                   {"last_release", p.last_release},
                   {"sdpa_first_release", sdpa_first},
                   {"sdpa_last_release", sdpa_last}});
  }
  if (json) {
    std::cout << arr.dump(2) << "\n";
    return kExitOk;
  }
  for (const nlohmann::json& p : arr) {
    const std::string first = p["first_release"], last = p["last_release"];
    const std::string sdpa_first = p["sdpa_first_release"], sdpa_last = p["sdpa_last_release"];
    fmt::print("{:<14} {}\n", p["name"].get<std::string>(),
               first.empty() ? std::string("no release") : fmt::format("{} - {}{}", first, last,
                   sdpa_first == first && sdpa_last == last ? "" : fmt::format(" (SDPA {} - {})", sdpa_first, sdpa_last)));
  }
  return kExitOk;
}

}  // namespace

int run_list(const ListOptions& o) {
  if (o.profiles) return list_profiles(o.json);
  const Registry& reg = builtin_registry();
  std::vector<Kernel*> ks = reg.kernels();
  if (o.mutants) ks = reg.mutants();
  if (!o.kernels.empty()) {
    ks.clear();
    if (!resolve_kernels(o.kernels, ks)) return kExitUsage;
  }
  if (o.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const Kernel* k : ks) arr.push_back(kernel_json(*k));
    std::cout << arr.dump(2) << "\n";
    return kExitOk;
  }
  for (const Kernel* k : ks) {
    const nlohmann::json j = kernel_json(*k);
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
    if (!k->contract().finite_unused_slots.empty())
      fmt::print("  unused input slots must be finite: {}\n", k->contract().finite_unused_slots);
    for (const auto& [feature, why] : k->contract().coverage_exempt)
      fmt::print("  coverage not required: {} ({})\n", feature, why);
    const BackwardContract& bw = k->contract().backward;
    if (!bw.available) {
      fmt::print("  backward: none (forward only)\n");
    } else {
      std::string dtypes;
      for (DType t : bw.dtypes) dtypes += std::string(dtypes.empty() ? "" : " ") + std::string(to_string(t));
      fmt::print("  backward: yes  deterministic: {}  zeros outside the sequences' keys: {}{}{}\n",
                 bw.deterministic ? "yes" : "no", bw.zeroes_unused_keys ? "yes" : "no",
                 bw.without.empty() ? "" : fmt::format("  without: {}", fmt::join(bw.without, " ")),
                 dtypes.empty() ? "" : "  dtypes: " + dtypes);
      for (const std::string& n : bw.notes) fmt::print("  backward note: {}\n", n);
      for (const auto& [feature, why] : bw.coverage_exempt)
        fmt::print("  backward coverage not required: {} ({})\n", feature, why);
    }
    fmt::print("\n");
  }
  return kExitOk;
}

}  // namespace flashcheck::cli
