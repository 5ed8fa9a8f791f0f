// `flashcheck fixture new`: a kernel-level fixture from flags, so that a reported issue ("wrong output with GQA 3:1
// and left padding on kernel X") becomes a committed, replayable case in one command. The case is checked by the
// same rules a fixture file is (core/kernel_case.h validate), written atomically, never over an existing file, and
// read back as replay will read it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <filesystem>

#include "cli/commands.h"
#include "cli/report.h"
#include "core/comma_list.h"
#include "core/error.h"
#include "core/fixture.h"
#include "properties/property.h"

namespace flashcheck::cli {
namespace {

constexpr const char* kCommand = "flashcheck fixture new";

// A count as the flags take it: decimal digits only, at most 9 of them.
bool parse_count(const std::string& s, std::int64_t& v) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  v = std::stoll(s);
  return true;
}

// "1x7,3x3" -> {q_len, k_len} pairs; "" with the reason when it is not that.
std::string parse_seqs(const std::string& spec, std::vector<Sequence>& out) {
  for (const std::string& item : comma_list(spec)) {
    const std::size_t x = item.find('x');
    Sequence s;
    if (x == std::string::npos || !parse_count(item.substr(0, x), s.q_len) || !parse_count(item.substr(x + 1), s.k_len))
      return fmt::format("'{}' is not QxK (queries x keys, e.g. 1x7)", printable(item, 40));
    out.push_back(s);
  }
  return "";
}

// One entry per sequence ("3,0,2"), or one for every sequence ("3").
std::string per_sequence(const char* flag, const std::string& spec, std::size_t n, std::vector<std::int64_t>& out) {
  for (const std::string& item : comma_list(spec)) {
    std::int64_t v = 0;
    if (!parse_count(item, v)) return fmt::format("{}: '{}' is not a count", flag, printable(item, 40));
    out.push_back(v);
  }
  if (out.size() == 1) out.resize(n, out.front());
  if (out.size() != n) return fmt::format("{}: {} values for {} sequences", flag, out.size(), n);
  return "";
}

int refuse(const std::string& why) {
  fmt::print(stderr, "{}: {}\n", kCommand, why);
  return kExitUsage;
}

}  // namespace

int run_fixture_new(const FixtureNewOptions& o) {
  if (o.out.empty() || std::filesystem::path(o.out).extension() != ".json") return refuse("--out must name a .json file");
  if (!find_property(o.property)) return refuse(fmt::format("--property: unknown property '{}'", printable(o.property, 60)));
  KernelCase c;
  c.name = o.name;
  if (std::string why = parse_seqs(o.seqs, c.seqs); !why.empty()) return refuse("--seqs: " + why);
  if (!o.leftpad.empty()) {
    std::vector<std::int64_t> v;
    if (std::string why = per_sequence("--leftpad", o.leftpad, c.seqs.size(), v); !why.empty()) return refuse(why);
    for (std::size_t b = 0; b < v.size(); ++b) c.seqs[b].leftpad_k = v[b];
  }
  if (!o.seqused.empty()) {
    std::vector<std::int64_t> v;
    if (std::string why = per_sequence("--seqused-k", o.seqused, c.seqs.size(), v); !why.empty()) return refuse(why);
    for (std::size_t b = 0; b < v.size(); ++b) c.seqs[b].seqused_k = v[b];
  }
  const std::optional<DType> dt = parse_dtype(o.dtype);
  if (!dt) return refuse(fmt::format("--dtype: '{}' is not fp32, fp16 or bf16", printable(o.dtype, 40)));
  c.dtype = *dt;
  c.heads = o.heads;
  c.kv_heads = o.kv_heads > 0 ? o.kv_heads : o.heads;
  c.head_dim = o.head_dim;
  c.v_head_dim = o.v_head_dim > 0 ? o.v_head_dim : o.head_dim;
  c.causal = o.causal;
  c.alignment = o.top_left ? Alignment::kTopLeft : Alignment::kBottomRight;
  if (!o.window.empty()) {
    const std::size_t comma = o.window.find(',');
    try {
      if (comma == std::string::npos) throw std::invalid_argument("no comma");
      c.window.left = std::stoll(o.window.substr(0, comma));
      c.window.right = std::stoll(o.window.substr(comma + 1));
    } catch (const std::exception&) {
      return refuse(fmt::format("--window: '{}' is not LEFT,RIGHT (-1 for unbounded)", printable(o.window, 40)));
    }
  }
  c.softcap = o.softcap;
  c.data.seed = o.seed;
  if (o.backward) c.dout = DoutRecipe{};
  if (const std::vector<FieldError> errors = validate(c); !errors.empty()) {
    std::vector<std::string> lines;
    for (const FieldError& e : errors) lines.push_back(fmt::format("cases[0].{}: {}", e.field, e.reason));
    return refuse(fmt::format("the case is not valid:\n  {}", fmt::join(lines, "\n  ")));
  }
  FixtureCase fc;
  fc.kcase = c;
  fc.note = o.note;
  for (const std::string& e : o.expect) {
    const std::size_t eq = e.find('=');
    const std::size_t colon = e.find(':', eq == std::string::npos ? 0 : eq);
    const std::string kernel = e.substr(0, eq);
    const std::string verdict = eq == std::string::npos ? "" : e.substr(eq + 1, colon == std::string::npos ? std::string::npos : colon - eq - 1);
    const std::optional<VerdictKind> kind = parse_verdict_kind(verdict);
    if (kernel.empty() || !kind)
      return refuse(fmt::format("--expect: '{}' is not KERNEL=VERDICT[:WHY] (VERDICT: pass, fail, error, crash, timeout, unsupported)",
                                printable(e, 80)));
    Expectation x;
    x.verdict = *kind;
    if (colon != std::string::npos) x.why = e.substr(colon + 1);
    fc.expect[kernel] = x;
  }
  Fixture f;
  f.path = o.out;
  f.title = o.title;
  f.source = o.source;
  f.description = o.description;
  f.property = o.property;
  f.cases.push_back(std::move(fc));
  if (!save_fixture(f, Overwrite::kKeep)) return refuse(fmt::format("{} exists: choose another --out (or delete it)", o.out));
  const Fixture back = load_fixture(o.out);  // as replay reads it
  fmt::print("wrote {}: {} case, property {}\nreplay it: {} replay {}{}\n", o.out, back.cases.size(), back.property,
             command_name(), o.out, o.expect.empty() ? "  (no --expect: every kernel is expected to pass)" : "");
  return kExitOk;
}

}  // namespace flashcheck::cli
