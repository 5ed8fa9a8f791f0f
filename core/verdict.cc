#include "core/verdict.h"

#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace flashcheck {
namespace {

constexpr std::array<std::pair<std::string_view, VerdictKind>, 6> kKinds{{{"pass", VerdictKind::kPass},
                                                                         {"fail", VerdictKind::kFail},
                                                                         {"unsupported", VerdictKind::kUnsupported},
                                                                         {"error", VerdictKind::kError},
                                                                         {"crash", VerdictKind::kCrash},
                                                                         {"timeout", VerdictKind::kTimeout}}};

// JSON has no NaN or infinity: write them as strings, read them back.
nlohmann::json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}
double num_of(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  return s == "-inf" ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

nlohmann::json loc_json(const ElementLoc& l) {
  return {{"b", l.b}, {"h", l.h}, {"i", l.i}, {"d", l.d}, {"out", num(l.out)}, {"truth", num(l.truth)}, {"baseline", num(l.baseline)}};
}
ElementLoc loc_of(const nlohmann::json& j) {
  return {j.at("b").get<std::int64_t>(), j.at("h").get<std::int64_t>(), j.at("i").get<std::int64_t>(),
          j.at("d").get<std::int64_t>(), num_of(j.at("out")), num_of(j.at("truth")), num_of(j.at("baseline"))};
}

std::string loc_str(const ElementLoc& l) {
  if (!l.valid()) return "-";
  const std::string where = l.d >= 0 ? fmt::format("b{},h{},i{},d{}", l.b, l.h, l.i, l.d) : fmt::format("b{},h{},i{}", l.b, l.h, l.i);
  return fmt::format("({}) out {:.6g} truth {:.6g} base {:.6g}", where, l.out, l.truth, l.baseline);
}

}  // namespace

std::string_view to_string(VerdictKind k) {
  for (const auto& [name, value] : kKinds)
    if (value == k) return name;
  return "?";
}

std::optional<VerdictKind> parse_verdict_kind(std::string_view s) {
  for (const auto& [name, value] : kKinds)
    if (name == s) return value;
  return std::nullopt;
}

nlohmann::json to_json(const Verdict& v) {
  nlohmann::json j = {{"verdict", to_string(v.kind)}, {"kernel", v.kernel}, {"property", v.property},
                      {"reason", v.reason}, {"seconds", v.seconds}};
  if (v.cmp) {
    const Comparison& c = *v.cmp;
    j["comparison"] = {{"err_max", num(c.err_max)},   {"base_max", num(c.base_max)},   {"ratio", num(c.ratio())}, {"bound_use", num(c.bound_use())},
                       {"bound", num(c.bound)},       {"floor", num(c.floor)},         {"err_mean", num(c.err_mean)},
                       {"base_mean", num(c.base_mean)}, {"mean_bound", num(c.mean_bound)}, {"compared", c.compared},
                       {"mismatches", c.mismatches},  {"nonfinite", c.nonfinite},      {"empty_rows", c.empty_rows},
                       {"empty_wrong", c.empty_wrong}, {"worst", loc_json(c.worst)}};
    if (c.first_empty_wrong.valid()) j["comparison"]["first_empty_wrong"] = loc_json(c.first_empty_wrong);
    if (!c.tensor.empty()) j["comparison"]["tensor"] = c.tensor;
    if (c.lse_checked)
      j["comparison"]["lse"] = {{"err", num(c.lse_err)}, {"base", num(c.lse_base)}, {"bound", num(c.lse_bound)},
                                {"worst", loc_json(c.lse_worst)}};
  }
  return j;
}

Verdict verdict_from_json(const nlohmann::json& j) {
  Verdict v;
  v.kind = parse_verdict_kind(j.at("verdict").get<std::string>()).value_or(VerdictKind::kError);
  v.kernel = j.value("kernel", "");
  v.property = j.value("property", "conformance");
  v.reason = j.value("reason", "");
  v.seconds = j.value("seconds", 0.0);
  if (j.contains("comparison")) {
    const auto& c = j.at("comparison");
    Comparison m;
    m.err_max = num_of(c.at("err_max"));
    m.base_max = num_of(c.at("base_max"));
    m.bound = num_of(c.at("bound"));
    m.floor = num_of(c.at("floor"));
    m.err_mean = num_of(c.at("err_mean"));
    m.base_mean = num_of(c.at("base_mean"));
    m.mean_bound = num_of(c.at("mean_bound"));
    m.compared = c.at("compared").get<std::int64_t>();
    m.mismatches = c.at("mismatches").get<std::int64_t>();
    m.nonfinite = c.at("nonfinite").get<std::int64_t>();
    m.empty_rows = c.at("empty_rows").get<std::int64_t>();
    m.empty_wrong = c.at("empty_wrong").get<std::int64_t>();
    m.worst = loc_of(c.at("worst"));
    m.tensor = c.value("tensor", "");
    if (c.contains("first_empty_wrong")) m.first_empty_wrong = loc_of(c.at("first_empty_wrong"));
    if (c.contains("lse")) {
      m.lse_checked = true;
      m.lse_err = num_of(c.at("lse").at("err"));
      m.lse_base = num_of(c.at("lse").at("base"));
      m.lse_bound = num_of(c.at("lse").at("bound"));
      m.lse_worst = loc_of(c.at("lse").at("worst"));
    }
    v.cmp = m;
  }
  return v;
}

std::string describe(const Verdict& v) {
  std::string s = fmt::format("{:<11}", to_string(v.kind));
  if (v.cmp) {
    const Comparison& c = *v.cmp;
    if (!c.tensor.empty()) s += " " + c.tensor;
    s += fmt::format(" err {:.3e} base {:.3e} ratio {:.3g} bound {:.3e} worst {}", c.err_max, c.base_max, c.ratio(),
                     c.bound, loc_str(c.worst));
    if (c.empty_rows) s += fmt::format(" empty {}/{} wrong", c.empty_wrong, c.empty_rows);
    if (c.lse_checked) s += fmt::format(" lse {:.2e}/{:.2e}", c.lse_err, c.lse_bound);
  }
  if (!v.reason.empty()) s += " -- " + v.reason;
  return s;
}

}  // namespace flashcheck
