// The outcome of running one case on one kernel under one property, with the evidence behind it.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace flashcheck {

enum class VerdictKind : std::uint8_t {
  kPass,
  kFail,         // the kernel's answer is wrong
  kUnsupported,  // the case is outside the kernel's declared contract: never a pass
  kError,        // the kernel or its adapter raised an error
  kCrash,        // the process running the kernel died
  kTimeout,      // the kernel did not finish in time
};

std::string_view to_string(VerdictKind k);
std::optional<VerdictKind> parse_verdict_kind(std::string_view s);

// Location of one output element: sequence b, query head h, row i within the sequence, channel d.
struct ElementLoc {
  std::int64_t b = -1, h = -1, i = -1, d = -1;
  double out = 0, truth = 0, baseline = 0;
  bool valid() const { return b >= 0; }
};

// Error statistics of one comparison under the tolerance rule (core/compare.h).
struct Comparison {
  std::string tensor;       // what was compared: "" the output, "dq", "dk" or "dv" a gradient
  double err_max = 0;       // max |out - truth| over valid, non-empty rows (inf when out is NaN/Inf there)
  double base_max = 0;      // max |baseline - truth| over the same elements
  double bound = 0;         // k * base_max + floor
  double floor = 0;         // max over elements of max(2 ulp_dtype(|truth| + 0.3), 8 u32 sensitivity)
  double err_mean = 0;
  double base_mean = 0;
  double mean_bound = 0;
  std::int64_t compared = 0;     // elements on valid rows
  std::int64_t mismatches = 0;   // elements whose error exceeds `bound`
  std::int64_t nonfinite = 0;    // NaN/Inf in the output where the truth is finite
  std::int64_t empty_rows = 0;   // (row, head) cells with no visible key
  std::int64_t empty_wrong = 0;  // of those, cells that break the declared convention
  ElementLoc worst;              // element with the largest error
  ElementLoc first_empty_wrong;  // first empty-row element that breaks the convention
  bool lse_checked = false;
  double lse_err = 0, lse_base = 0, lse_bound = 0;
  ElementLoc lse_worst;  // d = -1

  double ratio() const;      // err_max / base_max (0 when both are 0, inf when only the baseline is exact)
  double bound_use() const;  // err_max / bound: how much of the tolerance the worst element used (<= 1 passes)
};

struct Verdict {
  VerdictKind kind = VerdictKind::kPass;
  std::string kernel;
  std::string property = "conformance";
  std::string reason;  // why it failed, is unsupported or errored; empty on pass
  std::optional<Comparison> cmp;
  double seconds = 0;

  bool passed() const { return kind == VerdictKind::kPass; }
};

nlohmann::json to_json(const Verdict& v);
Verdict verdict_from_json(const nlohmann::json& j);

// "pass  err 1.2e-03 base 9.8e-04 ratio 1.22 (bound 2.0e-03) worst (b0,h3,i17,d5) out .. truth .. base .."
std::string describe(const Verdict& v);

}  // namespace flashcheck
