#include "oracles/hf_flash_path.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <fmt/format.h>
#include <numeric>

#include "core/geometry.h"

namespace flashcheck::hf {
namespace {

using Rows = std::vector<std::vector<std::uint8_t>>;  // a boolean 2D mask [B][cols]

// What torch raises for .max() of an empty tensor: the #39814 symptom.
constexpr const char* kEmptyMaxError =
    "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' "
    "argument.";

// torch's IndexError names whichever out-of-range index its (parallel) gather met first, so only the
// part every run shares is reproduced.
std::string index_error(std::int64_t /*index*/, std::int64_t size) {
  return fmt::format("is out of bounds for dimension 0 with size {}", size);
}

std::vector<std::int64_t> cumulative(const std::vector<std::int64_t>& lens) {
  std::vector<std::int64_t> cu{0};
  for (std::int64_t n : lens) cu.push_back(cu.back() + n);
  return cu;
}

std::int64_t max_diff(const std::vector<std::int64_t>& cu) {
  std::int64_t mx = 0;
  for (std::size_t i = 1; i < cu.size(); ++i) mx = std::max(mx, cu[i] - cu[i - 1]);
  return mx;
}

// The boolean 2D mask the flash path receives (masking_utils.flash_attention_mask): bool(M) sliced to the
// last kv_length columns, or none when it is all true. Dropping an all-true mask shorter than kv_length (a
// static cache) runs the dense kernel over unfilled slots (F13), hence keep_short_all_true_mask.
std::optional<Rows> flash_mask(const ProfileSwitches& s, const ModelCase& m) {
  if (!m.attention_mask) return std::nullopt;
  const std::int64_t kv_length = m.static_cache_len ? *m.static_cache_len : m.past + m.q_len;
  Rows rows;
  bool all = true;
  for (const auto& r : *m.attention_mask) {
    const std::int64_t n = static_cast<std::int64_t>(r.size());
    const std::int64_t from = std::max<std::int64_t>(0, n - kv_length);
    std::vector<std::uint8_t> row;
    for (std::int64_t j = from; j < n; ++j) {
      row.push_back(r[static_cast<std::size_t>(j)] != 0);
      all = all && row.back();
    }
    rows.push_back(std::move(row));
  }
  const std::int64_t cols = static_cast<std::int64_t>(rows.front().size());
  if (all && (!s.keep_short_all_true_mask || cols == kv_length)) return std::nullopt;
  return rows;
}

// Flattened position_ids as the path sees them: [rows, Lq], or three copies for M-RoPE [3, rows, Lq].
std::vector<std::int64_t> flat_positions(const ModelCase& m) {
  std::vector<std::int64_t> flat;
  const auto pos = m.effective_position_ids();
  for (int copy = 0; copy < (m.position_ids_3d ? 3 : 1); ++copy)
    for (const auto& row : pos) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

// _is_packed_sequence (v4.56+): batch 1 and position_ids differ from arange(L) + min anywhere. For a 3-D
// tensor the arange has length shape[1] (the batch) and broadcasts: any entry != min counts.
bool is_packed_sequence(const ModelCase& m) {
  if (m.batch != 1) return false;
  const std::vector<std::int64_t> flat = flat_positions(m);
  const std::int64_t mn = *std::min_element(flat.begin(), flat.end());
  if (m.position_ids_3d) return std::any_of(flat.begin(), flat.end(), [&](std::int64_t x) { return x != mn; });
  for (std::size_t i = 0; i < flat.size(); ++i)
    if (flat[i] != static_cast<std::int64_t>(i) + mn) return true;
  return false;
}

bool nondecreasing_rows(const ModelCase& m) {
  for (const auto& row : m.effective_position_ids())
    for (std::size_t i = 1; i < row.size(); ++i)
      if (row[i] < row[i - 1]) return false;
  return true;
}

// Rows of the flattened tensor that a varlen call reads with these cu_seqlens: [cu[0], cu[last]).
void mark_varlen_rows(FlashPlan& plan) {
  const FlashCall& c = plan.call;
  plan.row_source.assign(plan.row_source.size(), kUnwritten);
  for (std::int64_t r = c.cu_q.front(); r < c.cu_q.back(); ++r)
    if (r < static_cast<std::int64_t>(plan.row_source.size())) plan.row_source[static_cast<std::size_t>(r)] = r;
}

std::vector<std::int64_t> iota_rows(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// The padding-free branch of _flash_attention_forward: q, k, v flattened, the kernel called with cu_seqlens as
// given, the output viewed back.
void padding_free(FlashPlan& plan, const ModelCase& m, std::vector<std::int64_t> cu_q, std::vector<std::int64_t> cu_k,
                  std::int64_t max_q, std::int64_t max_k) {
  FlashCall& c = plan.call;
  c.varlen = true;
  c.q_rows = iota_rows(m.batch * m.q_len);
  c.k_rows = iota_rows(m.batch * m.kv_len());
  c.cu_q = std::move(cu_q);
  c.cu_k = std::move(cu_k);
  c.max_q = max_q;
  c.max_k = max_k;
  plan.out_len = m.q_len;
  plan.row_source.assign(static_cast<std::size_t>(m.batch * m.q_len), kUnwritten);
  mark_varlen_rows(plan);
}

// cu_seqlens from position_ids for packed training (prepare_fa_kwargs_from_position_ids): a sequence
// starts at every flat index whose position is the start value; 0 is not prepended.
std::vector<std::int64_t> packed_cu(const std::vector<std::int64_t>& flat, std::int64_t start_value) {
  std::vector<std::int64_t> cu;
  for (std::size_t i = 0; i < flat.size(); ++i)
    if (flat[i] == start_value) cu.push_back(static_cast<std::int64_t>(i));
  cu.push_back(static_cast<std::int64_t>(flat.size()));
  return cu;
}

// _get_unpad_data on the key side: the valid (b, j) of the mask, with K/V trimmed to its columns (a
// static cache longer than the mask, #37866). Returns the flat indices in the mask's [B * cols] space.
std::vector<std::int64_t> unpad_keys(FlashCall& c, const ModelCase& m, const Rows& mask) {
  const std::int64_t cols = static_cast<std::int64_t>(mask.front().size());
  std::vector<std::int64_t> idx_k, nk;
  for (std::int64_t b = 0; b < m.batch; ++b) {
    std::int64_t n = 0;
    for (std::int64_t j = 0; j < cols; ++j)
      if (mask[static_cast<std::size_t>(b)][static_cast<std::size_t>(j)]) {
        idx_k.push_back(b * cols + j);
        c.k_rows.push_back(b * m.kv_len() + j);
        ++n;
      }
    nk.push_back(n);
  }
  c.cu_k = cumulative(nk);
  c.max_k = *std::max_element(nk.begin(), nk.end());
  return idx_k;
}

// The valid entries of the last `n` mask columns, as flat indices in [B * n] space, with their counts.
std::vector<std::int64_t> unpad_last_columns(const Rows& mask, std::int64_t n, std::vector<std::int64_t>& counts) {
  const std::int64_t cols = static_cast<std::int64_t>(mask.front().size());
  std::vector<std::int64_t> idx;
  for (std::size_t b = 0; b < mask.size(); ++b) {
    std::int64_t c = 0;
    for (std::int64_t j = cols - n; j < cols; ++j)
      if (mask[b][static_cast<std::size_t>(j)]) {
        idx.push_back(static_cast<std::int64_t>(b) * n + (j - (cols - n)));
        ++c;
      }
    counts.push_back(c);
  }
  return idx;
}

// pad_input: a zero tensor [B * out_len] with output row r scattered to idx_q[r]. The query rows are
// q.reshape(B * Lq)[idx_q]; both index spaces match q only when the caller's query_length is q's length.
void scatter_queries(FlashPlan& plan, const ModelCase& m, const std::vector<std::int64_t>& idx_q, std::int64_t out_len) {
  const std::int64_t B = m.batch, Lq = m.q_len;
  auto fail = [&](std::int64_t index, std::int64_t size) {
    plan.branch = FlashBranch::kError;
    plan.error = index_error(index, size);
  };
  for (std::int64_t x : idx_q)  // the gather from q comes first
    if (x >= B * Lq) return fail(x, B * Lq);
  for (std::int64_t x : idx_q)  // then pad_input's scatter into [B * out_len]
    if (x >= B * out_len) return fail(x, B * out_len);
  plan.call.q_rows = idx_q;
  plan.out_len = out_len;
  plan.row_source.assign(static_cast<std::size_t>(B * out_len), kZeroRow);
  for (std::size_t r = 0; r < idx_q.size(); ++r) plan.row_source[static_cast<std::size_t>(idx_q[r])] = static_cast<std::int64_t>(r);
}

// The mask branch (_upad_input, identical from v4.55 to 5.x), then pad_input's zero-filled re-padding.
void mask_branch(FlashPlan& plan, const ModelCase& m, const Rows& mask, std::int64_t query_length) {
  FlashCall& c = plan.call;
  plan.branch = FlashBranch::kMask;
  const std::vector<std::int64_t> idx_k = unpad_keys(c, m, mask);
  const std::int64_t kv_seq_len = std::min(m.kv_len(), static_cast<std::int64_t>(mask.front().size()));
  std::vector<std::int64_t> idx_q;
  if (query_length == kv_seq_len) {
    idx_q = idx_k;
    c.cu_q = c.cu_k;
    c.max_q = c.max_k;
    plan.note = "mask branch: query_length equals the kv length (prefill)";
  } else if (query_length == 1) {
    if (m.q_len != 1) {
      plan.branch = FlashBranch::kError;
      plan.error = fmt::format("the varlen kernel received a 4-D query: query_length is 1 but q has {} tokens", m.q_len);
      return;
    }
    idx_q = iota_rows(m.batch);
    c.cu_q = iota_rows(m.batch + 1);
    c.max_q = 1;
    plan.note = "mask branch: decode (query_length 1), every row keeps its query";
  } else {
    std::vector<std::int64_t> nq;
    idx_q = unpad_last_columns(mask, std::min<std::int64_t>(query_length, kv_seq_len), nq);
    c.cu_q = cumulative(nq);
    c.max_q = *std::max_element(nq.begin(), nq.end());
    plan.note = "mask branch: the last query_length mask columns select the queries";
  }
  scatter_queries(plan, m, idx_q, query_length);
}

void dense_branch(FlashPlan& plan, const ModelCase& m) {
  plan.branch = FlashBranch::kDense;
  plan.call.varlen = false;
  plan.out_len = m.q_len;
  plan.row_source = iota_rows(m.batch * m.q_len);
}

// The kernel arguments every version passes, with its window convention.
void kernel_kwargs(FlashPlan& plan, const ModelCase& m, const ProfileSwitches& s) {
  FlashCall& c = plan.call;
  c.causal = m.causal;
  c.scale = m.softmax_scale();
  c.softcap = m.softcap;
  if (m.sliding_window && m.kv_len() > *m.sliding_window) {
    const std::int64_t w = *m.sliding_window;
    // flash-attn's window is inclusive: (W - 1, W - 1) is W keys under causal masking, as eager; (W, W) is one
    // key too many (#39408, F9).
    c.window = s.window_size_w_w ? std::make_pair(w, w) : std::make_pair(w - 1, w - 1);
  }
}

// The varlen kwargs generate() computed itself in v4.54-4.55.2: cu_q from the last positions (1 per row when
// decoding), cu_k = cumsum(last) + 1 (#39474: short by one per earlier row, F6) or cumsum(last + 1) (#40029).
VarlenKwargs generate_kwargs(const ModelCase& m, GenerateKwargs how) {
  auto pos = m.effective_position_ids();
  while (static_cast<std::int64_t>(pos.size()) < m.batch) pos.push_back(pos.front());
  VarlenKwargs k;
  std::vector<std::int64_t> last, q_lens;
  for (const auto& row : pos) last.push_back(row.back());
  // #39474 asks whether the step has one token; #40029's prepare_fa_kwargs_from_position_ids whether position_ids do.
  const bool decode = how == GenerateKwargs::kShortByOne ? m.past > 0 && m.q_len == 1 : m.q_len == 1;
  for (std::int64_t l : last) q_lens.push_back(decode ? 1 : l + 1);
  k.cu_seq_lens_q = cumulative(q_lens);
  k.cu_seq_lens_k = {0};
  std::int64_t sum = 0;
  for (std::int64_t l : last) {
    sum += how == GenerateKwargs::kShortByOne ? l : l + 1;
    k.cu_seq_lens_k.push_back(how == GenerateKwargs::kShortByOne ? sum + 1 : sum);
  }
  k.max_length_q = *std::max_element(q_lens.begin(), q_lens.end());
  k.max_length_k = *std::max_element(last.begin(), last.end()) + 1;
  return k;
}

void plan_fastchat(FlashPlan& plan, const ModelCase& m) {
  const std::int64_t Lq = m.q_len, P = m.past;
  FlashCall& c = plan.call;
  c.causal = true;  // hard-coded by the patch; no window, no softcap, the default scale
  c.scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  if (m.static_cache_len) {
    plan.branch = FlashBranch::kError;
    plan.error = "the FastChat patch predates StaticCache";
    return;
  }
  // _prepare_decoder_attention_mask: the mask of the new chunk with `past` all-true columns prepended,
  // so padding inside the cached past is forgotten; None when everything is valid.
  Rows mask;
  bool all = true;
  if (m.attention_mask)
    for (const auto& r : *m.attention_mask) {
      std::vector<std::uint8_t> row(static_cast<std::size_t>(P), 1);
      for (std::size_t j = r.size() - static_cast<std::size_t>(Lq); j < r.size(); ++j) {
        row.push_back(r[j] != 0);
        all = all && row.back();
      }
      mask.push_back(std::move(row));
    }
  if (!m.attention_mask || all) {
    dense_branch(plan, m);
    plan.note = "fastchat: no padding in the new chunk, flash_attn_func(causal=True)";
    return;
  }
  // unpad_input(q, mask[:, -q_len:]) and unpad_input(kv, mask): no decode special case.
  plan.branch = FlashBranch::kMask;
  unpad_keys(c, m, mask);
  std::vector<std::int64_t> nq;
  const std::vector<std::int64_t> idx_q = unpad_last_columns(mask, Lq, nq);
  c.cu_q = cumulative(nq);
  c.max_q = *std::max_element(nq.begin(), nq.end());
  scatter_queries(plan, m, idx_q, Lq);
  plan.note = "fastchat: padding in the new chunk, past columns assumed valid, flash_attn_varlen_kvpacked_func";
}

// Every call must stay inside the tensors it reads; FlashAttention does not check, so a plan that would
// read past them is reported as the illegal memory access it causes on a GPU.
void check_bounds(FlashPlan& plan) {
  if (plan.branch == FlashBranch::kError || !plan.call.varlen) return;
  const FlashCall& c = plan.call;
  auto fail = [&](std::string why) {
    plan.branch = FlashBranch::kError;
    plan.error = std::move(why);
  };
  if (c.cu_q.size() != c.cu_k.size())
    return fail(fmt::format("cu_seqlens_q has {} entries and cu_seqlens_k {}", c.cu_q.size(), c.cu_k.size()));
  for (std::size_t i = 1; i < c.cu_q.size(); ++i)
    if (c.cu_q[i] < c.cu_q[i - 1] || c.cu_k[i] < c.cu_k[i - 1]) return fail("cu_seqlens decrease: a negative sequence length");
  if (c.cu_q.back() > static_cast<std::int64_t>(c.q_rows.size()) || c.cu_k.back() > static_cast<std::int64_t>(c.k_rows.size()))
    return fail(fmt::format(
        "illegal memory access: cu_seqlens reach query row {} and key row {}, but the call has {} query and {} key rows",
        c.cu_q.back(), c.cu_k.back(), c.q_rows.size(), c.k_rows.size()));
}

}  // namespace

std::string_view to_string(FlashBranch b) {
  switch (b) {
    case FlashBranch::kMask: return "mask";
    case FlashBranch::kVarlenKwargs: return "varlen_kwargs";
    case FlashBranch::kPacked: return "packed";
    case FlashBranch::kDense: return "dense";
    case FlashBranch::kError: return "error";
  }
  return "?";
}

FlashPlan plan_flash_path(Profile p, const ModelCase& m, PathDefect defect) {
  return plan_with_switches(p, with_defect(profile_spec(p).switches, defect), m);
}

FlashPlan plan_with_switches(Profile p, const ProfileSwitches& s, const ModelCase& m) {
  FlashPlan plan;
  plan.profile = p;
  if (s.fastchat_monkey_patch) {
    plan_fastchat(plan, m);
    check_bounds(plan);
    return plan;
  }
  kernel_kwargs(plan, m, s);
  const std::int64_t query_length = m.caller_query_length();
  if (const std::optional<Rows> mask = flash_mask(s, m)) {
    mask_branch(plan, m, *mask, query_length);
    check_bounds(plan);
    return plan;
  }

  // The padding-free branch: caller-provided kwargs, or cu_seqlens derived from position_ids.
  std::optional<VarlenKwargs> kwargs = m.varlen_kwargs;
  if (!kwargs && m.via_generate && s.generate_kwargs != GenerateKwargs::kNone) kwargs = generate_kwargs(m, s.generate_kwargs);
  bool packed = false;
  switch (s.packed_trigger) {
    case PackedTrigger::kPackedSequence: packed = is_packed_sequence(m); break;
    case PackedTrigger::kAnyPositionIds: packed = true; break;  // the model always passes its default arange
    case PackedTrigger::kBatch1Decreasing:
      packed = m.batch == 1 && (kwargs.has_value() || (m.q_len != 1 && !nondecreasing_rows(m)));
      if (!packed && !(s.caller_kwargs_any_batch && kwargs)) kwargs.reset();
      break;
    case PackedTrigger::kNever: break;
  }
  if (kwargs) {
    plan.branch = FlashBranch::kVarlenKwargs;
    plan.note = "varlen kwargs used as given";
    padding_free(plan, m, kwargs->cu_seq_lens_q, kwargs->cu_seq_lens_k, kwargs->max_length_q, kwargs->max_length_k);
    check_bounds(plan);
    return plan;
  }
  if (!packed) {
    dense_branch(plan, m);
    plan.note = "no mask and no packing: flash_fn on the padded tensors";
    return plan;
  }

  plan.branch = FlashBranch::kPacked;
  const std::vector<std::int64_t> flat = flat_positions(m);
  if (s.query_length_selects_decoding && query_length != m.kv_len()) {
    // #39843's "decoding mode": cu_seqlens from each row's last position.
    if (m.position_ids_3d) {
      // position_ids[:, -1] of a [3, rows, L] tensor is 2-D, and torch.cat with the 1-D zero rejects it
      // (seen on v4.55.4 by tools/hf_crosscheck/matrix.sh).
      plan.branch = FlashBranch::kError;
      plan.error = "Tensors must have same number of dimensions: got 1 and 2";
      plan.note = "packed, decoding mode: 3-D position_ids";
      return plan;
    }
    const auto pos = m.effective_position_ids();
    std::vector<std::int64_t> last, q_lens, k_lens;
    for (const auto& row : pos) {
      last.push_back(row.back());
      q_lens.push_back(row.size() == 1 ? 1 : row.back() + 1);
      k_lens.push_back(row.back() + 1);
    }
    plan.note = "packed: query_length differs from the key length, so cu_seqlens come from the last positions";
    padding_free(plan, m, cumulative(q_lens), cumulative(k_lens), *std::max_element(q_lens.begin(), q_lens.end()),
                 *std::max_element(last.begin(), last.end()) + 1);
    check_bounds(plan);
    return plan;
  }
  const std::int64_t start = s.sequences_start_at_min ? *std::min_element(flat.begin(), flat.end()) : 0;
  const std::vector<std::int64_t> cu = packed_cu(flat, start);
  if (cu.size() < 2) {
    plan.branch = FlashBranch::kError;
    // With max_seqlen = max(position_ids) + 1 the call goes ahead and FlashAttention rejects the empty batch;
    // taking the longest cu_seqlens step, torch's .max() of no steps raises first (#39814).
    plan.error = s.max_seqlen_from_max_position ? "batch size must be postive" : kEmptyMaxError;
    plan.note = "packed: no position is 0, so cu_seqlens has a single entry";
    return plan;
  }
  const std::int64_t mx = s.max_seqlen_from_max_position ? *std::max_element(flat.begin(), flat.end()) + 1 : max_diff(cu);
  plan.note = fmt::format("packed: sequences start where position == {}", start);
  padding_free(plan, m, cu, cu, mx, mx);
  check_bounds(plan);
  return plan;
}

KernelCase call_case(const FlashPlan& plan, const ModelCase& m) {
  const FlashCall& c = plan.call;
  KernelCase k;
  k.heads = m.heads;
  k.kv_heads = m.kv_heads;
  k.head_dim = k.v_head_dim = m.head_dim;
  k.dtype = m.dtype;
  k.causal = c.causal;
  k.alignment = Alignment::kBottomRight;
  if (c.window) k.window = {c.window->first, c.causal ? 0 : c.window->second};
  k.softcap = c.softcap ? *c.softcap : 0.0;
  k.scale = c.scale;
  k.data = m.data;
  k.data.poison = false;
  if (c.varlen) {
    for (std::size_t b = 0; b + 1 < c.cu_q.size(); ++b)
      k.seqs.push_back({c.cu_q[b + 1] - c.cu_q[b], c.cu_k[b + 1] - c.cu_k[b]});
  } else {
    for (std::int64_t b = 0; b < m.batch; ++b) k.seqs.push_back({m.q_len, m.kv_len()});
  }
  return k;
}

FlashRun run_flash_path(const FlashPlan& plan, const ModelCase& m, const ModelTensors& t, Kernel& kernel, const HostTensor* dout) {
  FlashRun run;
  if (plan.branch == FlashBranch::kError) {
    run.kind = VerdictKind::kError;
    run.reason = plan.error;
    return run;
  }
  const std::int64_t H = m.heads, Hk = m.kv_heads, D = m.head_dim;
  const std::size_t qrow = static_cast<std::size_t>(H * D), krow = static_cast<std::size_t>(Hk * D);
  run.out.assign(static_cast<std::size_t>(m.batch * plan.out_len) * qrow, std::nan(""));
  for (std::size_t r = 0; r < plan.row_source.size(); ++r)
    if (plan.row_source[r] == kZeroRow) std::fill_n(run.out.begin() + static_cast<std::ptrdiff_t>(r * qrow), qrow, 0.0);

  KernelCase kc = call_case(plan, m);
  if (dout) {
    kc.dout = DoutRecipe{};  // a backward call; its dO comes from the model's below
    run.grads = GradientResult{};
    run.grads->dq.assign(static_cast<std::size_t>(m.batch * m.q_len) * qrow, 0.0);
    run.grads->dk.assign(static_cast<std::size_t>(m.batch * m.kv_len()) * krow, 0.0);
    run.grads->dv.assign(static_cast<std::size_t>(m.batch * m.kv_len()) * krow, 0.0);
  }
  if (kc.seqs.empty()) return run;  // nothing to compute: every row stays as the path left it
  const ContractCheck support = kernel.check(kc);
  if (!support.supported) {
    run.kind = VerdictKind::kUnsupported;
    run.reason = fmt::format("the {} call: {}", to_string(plan.branch), support.reason);
    return run;
  }
  // The rows the kernel reads, packed from 0 as a KernelCase lays them out.
  const FlashCall& c = plan.call;
  std::vector<std::int64_t> q_rows = c.q_rows, k_rows = c.k_rows;
  if (c.varlen) {
    q_rows = std::vector<std::int64_t>(c.q_rows.begin() + c.cu_q.front(), c.q_rows.begin() + c.cu_q.back());
    k_rows = std::vector<std::int64_t>(c.k_rows.begin() + c.cu_k.front(), c.k_rows.begin() + c.cu_k.back());
  } else {
    q_rows.resize(static_cast<std::size_t>(m.batch * m.q_len));
    std::iota(q_rows.begin(), q_rows.end(), 0);
    k_rows.resize(static_cast<std::size_t>(m.batch * m.kv_len()));
    std::iota(k_rows.begin(), k_rows.end(), 0);
  }
  CaseTensors in;
  in.q = HostTensor({static_cast<std::int64_t>(q_rows.size()), H, D}, 0.0f);
  in.k = HostTensor({static_cast<std::int64_t>(k_rows.size()), Hk, D}, 0.0f);
  in.v = HostTensor({static_cast<std::int64_t>(k_rows.size()), Hk, D}, 0.0f);
  for (std::size_t r = 0; r < q_rows.size(); ++r)
    std::copy_n(t.q.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(q_rows[r]) * qrow), qrow,
                in.q.data.begin() + static_cast<std::ptrdiff_t>(r * qrow));
  for (std::size_t r = 0; r < k_rows.size(); ++r) {
    const auto from = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(k_rows[r]) * krow);
    std::copy_n(t.k.data.begin() + from, krow, in.k.data.begin() + static_cast<std::ptrdiff_t>(r * krow));
    std::copy_n(t.v.data.begin() + from, krow, in.v.data.begin() + static_cast<std::ptrdiff_t>(r * krow));
  }
  const CaseGeometry g = geometry(kc);
  const std::int64_t first = c.varlen ? c.cu_q.front() : 0;  // call rows are numbered from cu[0]
  if (dout) {
    // The re-padding's backward: each output row's dO goes to the call row it came from.
    in.dout = HostTensor({g.total_q, H, D}, 0.0f);
    for (std::size_t o = 0; o < plan.row_source.size(); ++o) {
      const std::int64_t local = plan.row_source[o] - first;
      if (plan.row_source[o] < 0 || local < 0 || local >= g.total_q) continue;
      for (std::size_t x = 0; x < qrow; ++x) in.dout.data[static_cast<std::size_t>(local) * qrow + x] += dout->data[o * qrow + x];
    }
  }
  OutputBuffer buf(g.total_q * H * D, g.total_q * H, canary_margin(kc));
  buf.poison();
  GradBuffer grads;
  try {
    kernel.run(kc, in, buf);
    if (dout) {
      grads = GradBuffer(kc);
      kernel.run_backward(kc, in, buf, grads);
    }
  } catch (const std::exception& e) {
    run.kind = VerdictKind::kError;
    run.reason = e.what();
    return run;
  }
  if (dout) {
    // index_first_axis's backward: the call's gradient rows scatter-add into the layer's q, k, v.
    for (std::size_t r = 0; r < q_rows.size(); ++r)
      for (std::size_t x = 0; x < qrow; ++x)
        run.grads->dq[static_cast<std::size_t>(q_rows[r]) * qrow + x] += grads.dq()[r * qrow + x];
    for (std::size_t r = 0; r < k_rows.size(); ++r)
      for (std::size_t x = 0; x < krow; ++x) {
        run.grads->dk[static_cast<std::size_t>(k_rows[r]) * krow + x] += grads.dk()[r * krow + x];
        run.grads->dv[static_cast<std::size_t>(k_rows[r]) * krow + x] += grads.dv()[r * krow + x];
      }
  }
  // Scatter: output row r of the call lands where the plan says.
  for (std::size_t o = 0; o < plan.row_source.size(); ++o) {
    const std::int64_t r = plan.row_source[o];
    if (r < 0) continue;
    const std::int64_t local = r - first;
    if (local < 0 || local >= g.total_q) continue;
    for (std::size_t x = 0; x < qrow; ++x) {
      const float v = buf.out()[static_cast<std::size_t>(local) * qrow + x];
      run.out[o * qrow + x] = OutputBuffer::unwritten(v) ? std::nan("") : v;
    }
  }
  return run;
}

}  // namespace flashcheck::hf
