#include "cli/export_cases.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <set>
#include <stdexcept>

#include "core/dtype.h"
#include "core/error.h"
#include "core/files.h"
#include "core/input_limits.h"
#include "core/json_input.h"
#include "core/fixture.h"
#include "core/model_case_json.h"
#include "core/model_tensors.h"
#include "core/safetensors.h"
#include "core/tolerance.h"
#include "oracles/hf_eager.h"
#include "oracles/hf_flash_path.h"
#include "oracles/hf_sdpa_path.h"
#include "search/samples.h"

namespace flashcheck::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The files an earlier export left in `dir` (its manifest and the tensors it lists): an export may replace
// them. Throws InputError when a manifest.json is there that no export wrote.
std::set<std::string> earlier_export(const fs::path& dir) {
  const std::string manifest = (dir / "manifest.json").string();
  if (!path_exists(manifest)) return {};
  const json j = parse_json_input(read_input_file(manifest, limits::kMaxFixtureBytes * 16), manifest);
  if (!j.is_object() || j.value("schema", "") != "flashcheck.export/1" || !j.contains("cases") || !j["cases"].is_array())
    throw InputError(manifest, "schema", "not a manifest written by flashcheck export (--force replaces it)");
  std::set<std::string> ours{"manifest.json"};
  for (const json& c : j["cases"])
    if (c.is_object() && c.contains("tensors") && c["tensors"].is_string()) {
      const std::string name = c["tensors"].get<std::string>();
      if (name.find('/') == std::string::npos && name != "..") ours.insert(name);
    }
  return ours;
}

// Before an export writes `files` into `dir`: the earlier export's files it may replace; a user's file in the way
// is an InputError unless `force`.
std::set<std::string> replaceable_files(const fs::path& dir, const std::vector<std::string>& files, bool force) {
  ensure_output_dir(dir.string());
  std::set<std::string> ours;
  try {
    ours = earlier_export(dir);
  } catch (const InputError&) {
    if (!force) throw;
  }
  if (!force)
    for (const std::string& f : files)
      if (!ours.count(f) && path_exists((dir / f).string()))
        throw InputError((dir / f).string(), "", "exists and was not written by an earlier export (--force replaces it)");
  return ours;
}

json flash_json(const hf::FlashPlan& plan) {
  json j = {{"profile", hf::to_string(plan.profile)}, {"branch", hf::to_string(plan.branch)}};
  if (plan.branch == hf::FlashBranch::kError) {
    j["error"] = plan.error;
    return j;
  }
  const hf::FlashCall& c = plan.call;
  json call = {{"kind", c.varlen ? "varlen" : "dense"},
               {"causal", c.causal},
               {"window_size", c.window ? json::array({c.window->first, c.window->second}) : json(nullptr)},
               {"softcap", c.softcap ? json(*c.softcap) : json(nullptr)},
               {"softmax_scale", c.scale}};
  if (c.varlen) {
    call["cu_seqlens_q"] = c.cu_q;
    call["cu_seqlens_k"] = c.cu_k;
    call["max_seqlen_q"] = c.max_q;
    call["max_seqlen_k"] = c.max_k;
  }
  j["call"] = std::move(call);
  return j;
}

// The SDPA path's call as tools/hf_crosscheck/crosscheck.py records it from torch's scaled_dot_product_attention.
json sdpa_json(const hf::SdpaPlan& plan) {
  if (plan.raises) return {{"branch", "error"}, {"error", plan.error}};
  return {{"branch", "call"},
          {"mask", !plan.mask_skipped},
          {"is_causal", plan.is_causal},
          {"keys", plan.keys},
          {"gqa", hf::to_string(plan.gqa)},
          {"softcap_dropped", plan.softcap_dropped}};
}

void write_case(const fs::path& dir, const std::string& file, const ModelCase& m, const hf::FlashPlan& plan,
                const hf::SdpaPlan& sdpa, hf::Profile profile) {
  const ModelTensors t = materialize(m);
  const hf::EagerResult eager = hf::eager_attention(m, t, profile);
  SafetensorsFile f;
  f.metadata["format"] = "flashcheck.export/1";
  f.tensors["q"] = store_floats(t.q.data, t.q.shape, m.dtype);
  f.tensors["k"] = store_floats(t.k.data, t.k.shape, m.dtype);
  f.tensors["v"] = store_floats(t.v.data, t.v.shape, m.dtype);
  f.tensors["eager_out"] = store_floats(eager.out.data, eager.out.shape, m.dtype);
  if (m.attention_mask) {
    std::vector<std::int64_t> flat;
    for (const auto& row : *m.attention_mask) flat.insert(flat.end(), row.begin(), row.end());
    f.tensors["attention_mask"] = store_int64(flat, {m.batch, m.past + m.q_len});
  }
  const auto pos = m.effective_position_ids();
  std::vector<std::int64_t> flat;
  for (int copy = 0; copy < (m.position_ids_3d ? 3 : 1); ++copy)
    for (const auto& row : pos) flat.insert(flat.end(), row.begin(), row.end());
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(pos.size()), m.q_len};
  if (m.position_ids_3d) shape.insert(shape.begin(), 3);
  f.tensors["position_ids"] = store_int64(flat, shape);
  if (plan.branch != hf::FlashBranch::kError)
    f.tensors["flash_rows"] = store_int64(plan.row_source, {static_cast<std::int64_t>(plan.row_source.size())});
  if (!sdpa.raises) {
    const hf::SdpaRun run = hf::run_sdpa_path(sdpa, m, t);
    if (run.kind == VerdictKind::kPass) f.tensors["sdpa_out"] = store_floats(run.out, eager.out.shape, m.dtype);
  }
  write_safetensors((dir / file).string(), f);
}

json format_json(DType t) {
  const detail::FloatFormat f = detail::format_of(t);
  return {{"mantissa_bits", f.mantissa_bits}, {"min_normal_exp", f.min_normal_exp}};
}

}  // namespace

std::vector<NamedModelCase> collect_model_cases(const std::vector<std::string>& fixture_paths, std::int64_t generated,
                                                std::uint64_t seed) {
  std::vector<NamedModelCase> cases;
  for (const std::string& p : fixture_paths) {
    if (!fs::exists(p)) throw InputError(p, "", "no such file or directory");
    for (const std::string& file : find_fixture_files(p)) {
      const Fixture fx = load_fixture(file);
      for (std::size_t i = 0; i < fx.model_cases.size(); ++i) {
        const ModelCase& m = fx.model_cases[i].mcase;
        cases.emplace_back(fmt::format("{}#m{}{}", fs::path(file).filename().string(), i, m.name.empty() ? "" : ":" + m.name), m);
      }
    }
  }
  std::int64_t i = 0;
  for (ModelCase& m : sample_model_cases(generated, seed)) cases.emplace_back(fmt::format("generated-{:04}", i++), std::move(m));
  return cases;
}

json tolerance_json() {
  return {{"source", "core/tolerance.h"},
          {"k_integration", tolerance::kIntegration},
          {"floor_offset", tolerance::kFloorOffset},
          {"floor_spacings", tolerance::kFloorSpacings},
          {"noise_lambda", tolerance::kNoiseLambda},
          {"unit_roundoff32", tolerance::kUnitRoundoff32},
          {"formats", {{"fp16", format_json(DType::kF16)}, {"bf16", format_json(DType::kBF16)}, {"fp32", format_json(DType::kF32)}}}};
}

void write_export(const std::string& out, const std::vector<NamedModelCase>& cases, hf::Profile profile, bool force) {
  const fs::path dir(out);
  std::vector<std::string> files{"manifest.json"};
  for (std::size_t i = 0; i < cases.size(); ++i) files.push_back(fmt::format("{:04}.safetensors", i));
  const std::set<std::string> earlier = replaceable_files(dir, files, force);
  json manifest = {{"schema", "flashcheck.export/1"},
                   {"profile", hf::to_string(profile)},
                   {"profile_releases", json::array({hf::profile_spec(profile).first_release, hf::profile_spec(profile).last_release})},
                   {"profile_sdpa_releases", [&] {
                      const auto [first, last] = hf::sdpa_release_range(hf::profile_spec(profile));
                      return json::array({first, last});
                    }()},
                   {"tolerance", tolerance_json()},
                   {"cases", json::array()}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& [name, m] = cases[i];
    const std::string file = fmt::format("{:04}.safetensors", i);
    const hf::FlashPlan plan = hf::plan_flash_path(profile, m);
    const hf::SdpaPlan sdpa = hf::plan_sdpa_path(profile, m);
    write_case(dir, file, m, plan, sdpa, profile);
    manifest["cases"].push_back({{"name", name},
                                 {"case", model_case_to_json(m)},
                                 {"tensors", file},
                                 {"flash", flash_json(plan)},
                                 {"sdpa", sdpa_json(sdpa)}});
  }
  // The manifest last, so that it names only complete files; then the earlier export's files this one lacks.
  write_file_atomic((dir / "manifest.json").string(), manifest.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
  for (const std::string& f : earlier)
    if (std::find(files.begin(), files.end(), f) == files.end()) remove_file((dir / f).string());
}

}  // namespace flashcheck::cli
