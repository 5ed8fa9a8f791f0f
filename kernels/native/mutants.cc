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
      // LSE defects: the output is correct, only a consumer of the LSE (a split-KV merge) sees them.
      {{"mutant-lse-shift", "the returned LSE 1e-3 too large (the output is correct)", ""},
       [](F& f) { f.lse_shift = true; }},
      {{"mutant-lse-base2", "the returned LSE in base 2, the kernel's internal exp2 domain (the output is correct)",
        "flash-attention keeps the softmax in base 2 (softmax_scale_log2) and converts the LSE on the way out"},
       [](F& f) { f.lse_base2 = true; }},
      {{"mutant-lse-next-row", "row i of a query tile returns the LSE of row i + 1 (the output is correct)", ""},
       [](F& f) { f.lse_next_row = true; }},
      {{"mutant-lse-padded-order",
        "LSEs laid out (batch, max_seqlen_q) and returned as packed rows: later sequences get other rows' or padding's LSE",
        "flash-attn's varlen softmax_lse: (batch, heads, max_seqlen_q) before the packed (heads, total_q) layout (flash-attention#725, #876); ring-flash-attention#47 followed the change"},
       [](F& f) { f.lse_padded_order = true; }},
      // Backward defects: the forward is correct, so only the gradient properties can see them.
      {{"mutant-bw-gqa-first-head", "backward: dK/dV of a KV head from the first query head of its group only",
        "GQA dK/dV not summed over the group (levanter#449, native-sparse-attention-triton#27)", true},
       [](F& f) { f.bw_gqa_first_head_only = true; }},
      {{"mutant-bw-dpsum-wrong-row", "backward: dpsum = rowsum(dO * O) of each row taken from the next row",
        "flash-attention#2481 (a race in the backward preprocess corrupts dQ and dK)", true},
       [](F& f) { f.bw_dpsum_wrong_row = true; }},
      {{"mutant-bw-softcap-derivative", "backward: dS not multiplied by softcap's derivative 1 - tanh^2", "", true},
       [](F& f) { f.bw_drop_softcap_derivative = true; }},
      {{"mutant-bw-window-off-by-one", "backward: left window bound exclusive (forward correct)", "", true},
       [](F& f) { f.bw_window_off_by_one = true; }},
      {{"mutant-bw-skip-last-key-tile", "backward: the last key tile of a sequence gets no dK/dV", "", true},
       [](F& f) { f.bw_skip_last_key_tile = true; }},
      {{"mutant-bw-dq-scaled-twice", "backward: dQ multiplied by the softmax scale twice", "", true},
       [](F& f) { f.bw_dq_scaled_twice = true; }},
      {{"mutant-bw-nan-dq-more-queries", "backward: rows without a key recompute P with LSE -inf (NaN gradients)",
        "flash-attention#443 (NaN dQ, varlen causal backward with more queries than keys, FA2 2.0.4)", true},
       [](F& f) { f.bw_empty_row_lse_minus_inf = true; }},
      {{"mutant-bw-nondeterministic-dq", "backward: dQ accumulated over key tiles in an order that changes between runs",
        "flash-attention's race-condition test (deterministic backward)", true},
       [](F& f) { f.bw_nondeterministic_dq = true; }},
      {{"mutant-bw-dv-tail", "backward: dV channels past the last multiple of 8 never written",
        "flash-attention#2552 (wrong dV when head_dim_v is not aligned to the reduce width)", true},
       [](F& f) { f.bw_dv_tail_dropped = true; }},
      {{"mutant-bw-segfault-tile-overrun",
        "backward: the process dies (SIGSEGV) when a key length is one past a whole 32-key tile (the forward is fine)", "",
        true},
       [](F& f) { f.bw_segfault_tile_overrun = true; }},
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
