#include "cli/export_cases.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>

#include "core/dtype.h"
#include "core/error.h"
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

void write_export(const std::string& out, const std::vector<NamedModelCase>& cases, hf::Profile profile) {
  const fs::path dir(out);
  fs::create_directories(dir);
  json manifest = {{"schema", "flashcheck.export/1"},
                   {"profile", hf::to_string(profile)},
                   {"profile_releases", json::array({hf::profile_spec(profile).first_release, hf::profile_spec(profile).last_release})},
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
  std::ofstream f(dir / "manifest.json", std::ios::trunc);
  f << manifest.dump(1) << "\n";
  if (!f) throw std::runtime_error(fmt::format("cannot write {}", (dir / "manifest.json").string()));
}

}  // namespace flashcheck::cli
