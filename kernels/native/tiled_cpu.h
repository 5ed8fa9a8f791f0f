// tiled-cpu: the project's own port of the FlashAttention-2 forward algorithm to the CPU. Tiles of
// block_m query rows by block_n keys, online softmax with fp32 running max/sum/accumulator, P rounded
// to the input dtype before P.V (as FA2 converts P to fp16/bf16 for its second GEMM), output rounded
// once. Reads its inputs through the varlen/kvcache API arguments (kernels/flash_args.h), like a GPU
// kernel would: cu_seqlens, seqused_k, leftpad_k, cache_seqlens + appended tokens, block table.
#pragma once

#include <string>

#include "kernels/kernel.h"

namespace flashcheck {

struct TiledConfig {
  int block_m = 64;
  int block_n = 64;
};

namespace detail {

// Single-point defects, each imitating a real bug class; tiled-cpu itself has all of them off. The
// mutants of kernels/native/mutants switch one on to prove that some property catches it.
struct TiledFaults {
  bool top_left_causal = false;         // diagonal aligned top-left (flash-attention#466, pre-2.1 FA2)
  bool kv_head_modulo = false;          // query head h reads KV head h % Hk instead of h / (H / Hk)
  bool window_left_off_by_one = false;  // left bound i + off - left treated as exclusive
  bool skip_rescale = false;            // accumulator not rescaled when the running max grows
  bool drop_last_partial_tile = false;  // a trailing partial key tile is skipped
  bool ignore_seqused_k = false;
  bool ignore_leftpad = false;
  bool softcap_after_mask = false;      // tanh applied after masking: masked keys get weight e^-cap
  bool softcap_before_scale = false;    // cap * tanh(s / cap) * scale instead of cap * tanh(scale * s / cap)
  bool scale_one_over_d = false;        // 1 / d instead of 1 / sqrt(d) when no scale is given
  bool lowp_accumulation = false;       // P.V accumulated in the input dtype
  bool empty_row_nan = false;           // 0/0 on rows without a visible key
  bool empty_row_mean = false;          // mean of V on rows without a visible key
  bool cu_seqlens_k_off_by_one = false; // K segment of sequence b > 0 read one row late
  bool page_boundary = false;           // first row of every page after the first read from the previous page
  bool write_past_end = false;          // one extra row written after the last query row
  bool skip_last_row = false;           // the last query row of every sequence is never written
  bool nondeterministic_order = false;  // key tiles visited in an order that changes between runs
  bool segfault_tile_overrun = false;   // dies with SIGSEGV when a key length is one past a whole 32-key tile
  bool read_past_end = false;           // the last sequence's keys run to the end of the K buffer
  // LSE defects (the output stays correct): what a consumer that merges partial results by their LSE trips over.
  bool lse_shift = false;               // every LSE 1e-3 too large
  bool lse_base2 = false;               // the LSE in base 2 (the kernel's internal log2 domain leaks out)
  bool lse_next_row = false;            // row i of a tile reports the LSE of row i + 1
  bool lse_padded_order = false;        // LSEs laid out (batch, max_seqlen_q) but returned as packed rows
  // Backward defects (run_backward only; the forward stays correct).
  bool bw_gqa_first_head_only = false;   // dK/dV of a KV head from the first query head of its group only
  bool bw_dpsum_wrong_row = false;       // dpsum (rowsum(dO * O)) of row i taken from row i + 1 of its tile
  bool bw_drop_softcap_derivative = false;  // dS not multiplied by 1 - tanh^2 under softcap
  bool bw_window_off_by_one = false;     // left window bound exclusive in the backward only
  bool bw_skip_last_key_tile = false;    // the last key tile of a sequence gets no dK/dV (its dQ share stays)
  bool bw_dq_scaled_twice = false;       // dQ multiplied by the softmax scale twice
  bool bw_empty_row_lse_minus_inf = false;  // rows without a key recompute P with LSE -inf: exp(-inf + inf) = NaN
  bool bw_nondeterministic_dq = false;   // dQ accumulated over key tiles in an order that changes between runs
  bool bw_dv_tail_dropped = false;       // dV channels past the last multiple of 8 never written (dv % 8 != 0)
  bool bw_segfault_tile_overrun = false; // the backward dies (SIGSEGV) when a key length is one past a 32-key tile
};

}  // namespace detail

class TiledCpuKernel : public Kernel {
 public:
  TiledCpuKernel(std::string name, TiledConfig cfg, detail::TiledFaults faults = {}, std::string mutant_description = "");

  std::string_view name() const override { return name_; }
  const Contract& contract() const override { return contract_; }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override;
  // FlashAttention-2's backward (kernels/native/tiled_cpu_backward.cc).
  void run_backward(const KernelCase& c, const CaseTensors& in, const OutputBuffer& fwd, GradBuffer& grads) override;
  bool is_mutant() const override { return !mutant_description_.empty(); }
  std::string_view mutant_description() const override { return mutant_description_; }

  static Contract tiled_contract(const TiledConfig& cfg);

 private:
  std::string name_;
  TiledConfig cfg_;
  detail::TiledFaults faults_;
  std::string mutant_description_;
  Contract contract_;
  unsigned runs_ = 0;  // drives the nondeterministic-order faults
};

// Registers tiled-cpu (64 x 64 tiles) and tiled-cpu-16x32 (small tiles: more tile boundaries per case).
void register_tiled_cpu_kernels(Registry& r);

}  // namespace flashcheck
