// Deliberate integration bugs for the mutation self-test (docs/MUTANTS.md). Each is one switch of
// hf-main's row (core/hf_profiles.h) set to what an older transformers release did, so a mutant plans
// through exactly the code an intact profile does. A defect lives on one path: the flash path
// (oracles/hf_flash_path.h) or the SDPA path (oracles/hf_sdpa_path.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/hf_profiles.h"

namespace flashcheck::hf {

enum class PathDefect : std::uint8_t {
  kNone,
  kAnyPositionIds,     // every position_ids tensor takes the varlen path, not only packed ones (v4.54)
  kStartAtZero,        // sequences start where position == 0, not at min(position_ids) (before #47525)
  kWindowWW,           // window (W, W) instead of (W - 1, W - 1): W + 1 keys (#39408)
  kCallerQueryLength,  // a query_length unequal to the key length means decoding (#39843, #40399)
  kSdpaWindowLost,     // SDPA: the is_causal shortcut ignores the sliding window (#28980, fixed by #30127)
  kSdpaMisaligned,     // SDPA: the shortcut taken for several queries over a cache (fixed by #30311)
  kSdpaIgnoresPadding, // SDPA: the shortcut taken though the 2D mask has padding
};

// The integration paths of transformers that the harness replays.
enum class HfPath : std::uint8_t { kFlash, kSdpa };
std::string_view to_string(HfPath p);
struct PathDefectInfo {
  PathDefect defect;
  std::string_view name, description, imitates;
  HfPath path = HfPath::kFlash;  // the path whose integration property it breaks
};
// Every defect but kNone.
const std::vector<PathDefectInfo>& path_defects();

// The switches with the defect's override applied (kNone: unchanged).
ProfileSwitches with_defect(ProfileSwitches s, PathDefect defect);

}  // namespace flashcheck::hf
