// Model cases on disk for Python to read: the export directory (DIR/manifest.json, schema flashcheck.export/1,
// plus one safetensors file per case) that `flashcheck export` writes for tools/hf_crosscheck/crosscheck.py and
// `flashcheck hf-live` writes for tools/hf_live/live.py. The manifest carries the tolerance rule's constants
// (core/tolerance.h) so that the Python judge reads them from here rather than restating them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/hf_profiles.h"
#include "core/model_case.h"

namespace flashcheck::cli {

using NamedModelCase = std::pair<std::string, ModelCase>;

// The model cases of every fixture file under `fixture_paths` ("<file>#m<i>[:<name>]"), then `generated`
// sampled ones ("generated-NNNN"). Throws InputError for a missing path or a malformed fixture.
std::vector<NamedModelCase> collect_model_cases(const std::vector<std::string>& fixture_paths, std::int64_t generated,
                                                std::uint64_t seed);

// core/tolerance.h's integration rule as data: k_integration, floor_offset, floor_spacings, noise_lambda,
// unit_roundoff32 and each dtype's format (mantissa_bits, min_normal_exp).
nlohmann::json tolerance_json();

// Writes DIR/manifest.json and the tensors (q, k, v, the HF-eager oracle's eager_out, attention_mask,
// position_ids, the profile's flash plan with its flash_rows, and its SDPA call with the SDPA path's output
// sdpa_out). It replaces only what an earlier export wrote there (the files its manifest lists) unless `force`:
// any other file in the way is an InputError naming it, raised before anything is written. Throws OutputError
// when DIR cannot be written.
void write_export(const std::string& dir, const std::vector<NamedModelCase>& cases, hf::Profile profile,
                  bool force = false);

}  // namespace flashcheck::cli
