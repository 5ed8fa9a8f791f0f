#include "kernels/native/mutants.h"

#include <functional>

#include "kernels/native/tiled_cpu.h"

namespace flashcheck {
namespace {

struct MutantSpec {
  MutantInfo info;
  std::function<void(detail::TiledFaults&)> inject;
};

const std::vector<MutantSpec>& specs() {
  using F = detail::TiledFaults;
  static const std::vector<MutantSpec> s = {
      {{"mutant-top-left-causal", "causal diagonal aligned top-left instead of bottom-right",
        "flash-attention#466 (FA2 before v2.1)"},
       [](F& f) { f.top_left_causal = true; }},
      {{"mutant-kv-head-modulo", "query head h reads KV head h % Hk instead of h / (H / Hk)",
        "GQA head mapping bugs of early Llama-2-70B flash patches"},
       [](F& f) { f.kv_head_modulo = true; }},
      {{"mutant-window-off-by-one", "left window bound exclusive (W keys instead of W + 1)",
        "transformers#39408 sliding-window off-by-one"},
       [](F& f) { f.window_left_off_by_one = true; }},
      {{"mutant-skip-rescale", "online softmax: accumulator not rescaled when the running max grows", ""},
       [](F& f) { f.skip_rescale = true; }},
      {{"mutant-drop-last-partial-tile", "a trailing partial key tile is skipped",
        "triton#621-style hard-coded block size"},
       [](F& f) { f.drop_last_partial_tile = true; }},
      {{"mutant-ignore-seqused-k", "seqused_k ignored: the whole allocated segment is attended", ""},
       [](F& f) { f.ignore_seqused_k = true; }},
      {{"mutant-ignore-leftpad", "leftpad_k ignored: padded cache slots are attended",
        "FA2 forbids paged + leftpad; kernels that drop cache_leftpad"},
       [](F& f) { f.ignore_leftpad = true; }},
      {{"mutant-softcap-after-mask", "softcap applied after masking: masked keys get weight e^-cap", ""},
       [](F& f) { f.softcap_after_mask = true; }},
      {{"mutant-softcap-before-scale", "softcap applied to the unscaled dot product, scale applied after", ""},
       [](F& f) { f.softcap_before_scale = true; }},
      {{"mutant-scale-one-over-d", "default scale 1/d instead of 1/sqrt(d)", ""},
       [](F& f) { f.scale_one_over_d = true; }},
      {{"mutant-lowp-accumulation", "P.V accumulated in the input dtype instead of fp32", ""},
       [](F& f) { f.lowp_accumulation = true; }},
      {{"mutant-empty-row-nan", "rows without a visible key return NaN (0/0)",
        "PyTorch SDPA before 2.5 (#103749)"},
       [](F& f) { f.empty_row_nan = true; }},
      {{"mutant-empty-row-mean", "rows without a visible key return the mean of V", "HF eager's finfo.min masking"},
       [](F& f) { f.empty_row_mean = true; }},
      {{"mutant-cu-seqlens-off-by-one", "K segment of every sequence after the first read one row late", ""},
       [](F& f) { f.cu_seqlens_k_off_by_one = true; }},
      {{"mutant-page-boundary", "the first row of each page after the first is read from the previous page",
        "paged-KV block-table indexing bugs (flash-attention#2709 class)"},
       [](F& f) { f.page_boundary = true; }},
      {{"mutant-write-past-end", "one extra output row written after the last query row", "FA3 #9 out-of-bound writes"},
       [](F& f) { f.write_past_end = true; }},
      {{"mutant-skip-last-row", "the last query row of every sequence is never written",
        "flash-attention zero-length/uninitialised output (v2.3.4 fix)"},
       [](F& f) { f.skip_last_row = true; }},
      {{"mutant-read-past-end",
        "the last sequence's keys run to the end of the K buffer (its length from the buffer, not cu_seqlens_k)",
        ""},
       [](F& f) { f.read_past_end = true; }},
      {{"mutant-nondeterministic-order", "key tiles visited in an order that changes between runs",
        "split-KV / atomic accumulation order"},
       [](F& f) { f.nondeterministic_order = true; }},
      {{"mutant-segfault-tile-overrun", "the process dies (SIGSEGV) when a key length is one past a whole 32-key tile",
        ""},
       [](F& f) { f.segfault_tile_overrun = true; }},
  };
  return s;
}

}  // namespace

const std::vector<MutantInfo>& mutant_catalog() {
  static const std::vector<MutantInfo> catalog = [] {
    std::vector<MutantInfo> v;
    for (const auto& s : specs()) v.push_back(s.info);
    return v;
  }();
  return catalog;
}

void register_mutants(Registry& r) {
  for (const auto& s : specs()) {
    detail::TiledFaults f;
    s.inject(f);
    // Small tiles so that tile-boundary defects show up on short sequences.
    r.add(std::make_unique<TiledCpuKernel>(s.info.name, TiledConfig{16, 32}, f, s.info.description));
  }
}

}  // namespace flashcheck
