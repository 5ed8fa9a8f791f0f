#include "core/model_case.h"

#include <cmath>
#include <fmt/format.h>

#include "core/checked.h"
#include "core/input_limits.h"

namespace flashcheck {
namespace {

// Keeps the naive oracles' work bounded: B * Hq * Lq * Lk score elements.
constexpr std::int64_t kMaxScores = std::int64_t{1} << 28;
// Values of position ids, mask entries and the varlen kwargs: RoPE table indices and token counts.
constexpr std::int64_t kMaxIndex = std::int64_t{1} << 31;
constexpr std::int64_t kMaxStaticCache = std::int64_t{1} << 20;

bool nondecreasing(const std::vector<std::int64_t>& v) {
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] < v[i - 1]) return false;
  return true;
}

}  // namespace

double ModelCase::softmax_scale() const { return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim)); }

std::vector<std::vector<std::int64_t>> ModelCase::effective_position_ids() const {
  if (position_ids) return *position_ids;
  std::vector<std::int64_t> row(static_cast<std::size_t>(q_len));
  for (std::int64_t i = 0; i < q_len; ++i) row[static_cast<std::size_t>(i)] = past + i;
  return {row};
}

bool ModelCase::key_valid(std::int64_t b, std::int64_t j) const {
  if (!attention_mask) return true;
  const auto& row = (*attention_mask)[static_cast<std::size_t>(b)];
  return j < static_cast<std::int64_t>(row.size()) && row[static_cast<std::size_t>(j)] != 0;
}

std::vector<FieldError> validate(const ModelCase& m) {
  std::vector<FieldError> errors;
  auto fail = [&](std::string field, std::string reason) { errors.push_back({std::move(field), std::move(reason)}); };
  if (m.batch < 1 || m.batch > 4096) fail("batch", fmt::format("{} is outside [1, 4096]", m.batch));
  if (m.q_len < 1 || m.q_len > 65536)
    fail("q_len", fmt::format("{} is outside [1, 65536] (transformers rejects empty queries)", m.q_len));
  if (m.past < 0 || m.past > 65536) fail("past", fmt::format("{} is outside [0, 65536]", m.past));
  if (m.heads < 1 || m.heads > 1024) fail("heads", fmt::format("{} is outside [1, 1024]", m.heads));
  if (m.kv_heads < 1 || m.kv_heads > 1024) fail("kv_heads", fmt::format("{} is outside [1, 1024]", m.kv_heads));
  if (m.heads >= 1 && m.kv_heads >= 1 && m.heads % m.kv_heads != 0)
    fail("kv_heads", fmt::format("heads {} is not a multiple of kv_heads {}", m.heads, m.kv_heads));
  if (m.head_dim < 1 || m.head_dim > 512) fail("head_dim", fmt::format("{} is outside [1, 512]", m.head_dim));
  if (m.sliding_window && (*m.sliding_window < 1 || *m.sliding_window > kMaxIndex))
    fail("sliding_window", fmt::format("{} is outside [1, {}]", *m.sliding_window, kMaxIndex));
  if (m.softcap && !(std::isfinite(*m.softcap) && *m.softcap > 0)) fail("softcap", "must be a positive finite number");
  if (m.scale && !(std::isfinite(*m.scale) && *m.scale > 0)) fail("scale", "must be a positive finite number");
  for (const auto& [field, v] : {std::pair{"data.q_scale", m.data.q_scale}, std::pair{"data.k_scale", m.data.k_scale},
                                 std::pair{"data.v_scale", m.data.v_scale}})
    if (!std::isfinite(v) || v < 0) fail(field, fmt::format("{} must be finite and >= 0", v));
    else if (const std::string why = recipe_overflow_reason(m.data.dist, v, m.dtype); !why.empty())
      fail(field, why);
  if (m.past > 0 && !m.use_cache) fail("use_cache", fmt::format("past {} > 0 needs a cache object (use_cache)", m.past));
  if (m.static_cache_len) {
    if (!m.use_cache) fail("static_cache_len", "a static cache needs use_cache");
    if (*m.static_cache_len < m.past + m.q_len || *m.static_cache_len > kMaxStaticCache)
      fail("static_cache_len", fmt::format("{} slots: a static cache holds past {} + q_len {} and at most {}", *m.static_cache_len,
                                           m.past, m.q_len, kMaxStaticCache));
  }
  if (m.attention_mask) {
    const auto& rows = *m.attention_mask;
    if (static_cast<std::int64_t>(rows.size()) != m.batch)
      fail("attention_mask", fmt::format("{} rows for batch {}", rows.size(), m.batch));
    for (std::size_t b = 0; b < rows.size(); ++b)
      if (static_cast<std::int64_t>(rows[b].size()) != m.past + m.q_len) {
        fail(fmt::format("attention_mask[{}]", b),
             fmt::format("{} columns; the 2D mask covers past + q_len = {} columns", rows[b].size(), m.past + m.q_len));
        break;
      }
    for (std::size_t b = 0; b < rows.size(); ++b)
      for (std::size_t j = 0; j < rows[b].size(); ++j)
        if (rows[b][j] < 0 || rows[b][j] >= kMaxIndex) {
          fail(fmt::format("attention_mask[{}][{}]", b, j), fmt::format("mask values must be in [0, {}) (nonzero = valid)", kMaxIndex));
          b = rows.size() - 1;
          break;
        }
  }
  if (m.position_ids) {
    const auto& rows = *m.position_ids;
    if (rows.size() != 1 && static_cast<std::int64_t>(rows.size()) != m.batch)
      fail("position_ids", fmt::format("{} rows; expected 1 or batch {}", rows.size(), m.batch));
    for (std::size_t b = 0; b < rows.size(); ++b)
      if (static_cast<std::int64_t>(rows[b].size()) != m.q_len) {
        fail(fmt::format("position_ids[{}]", b), fmt::format("{} columns for q_len {}", rows[b].size(), m.q_len));
        break;
      }
    for (std::size_t b = 0; b < rows.size(); ++b)
      for (std::size_t i = 0; i < rows[b].size(); ++i)
        if (rows[b][i] < 0 || rows[b][i] >= kMaxIndex) {
          fail(fmt::format("position_ids[{}][{}]", b, i),
               fmt::format("{} is outside [0, {}) (positions index the rotary table)", rows[b][i], kMaxIndex));
          b = rows.size() - 1;
          break;
        }
  }
  if (m.query_length && (*m.query_length < 1 || *m.query_length > 65536))
    fail("query_length", fmt::format("{} is outside [1, 65536]", *m.query_length));
  if (m.varlen_kwargs) {
    const VarlenKwargs& k = *m.varlen_kwargs;
    if (k.cu_seq_lens_q.size() < 2) fail("varlen_kwargs.cu_seq_lens_q", "needs at least two entries");
    if (k.cu_seq_lens_k.size() < 2) fail("varlen_kwargs.cu_seq_lens_k", "needs at least two entries");
    if (!nondecreasing(k.cu_seq_lens_q)) fail("varlen_kwargs.cu_seq_lens_q", "must be non-decreasing");
    if (!nondecreasing(k.cu_seq_lens_k)) fail("varlen_kwargs.cu_seq_lens_k", "must be non-decreasing");
    for (const auto& [field, cu] : {std::pair{"varlen_kwargs.cu_seq_lens_q", &k.cu_seq_lens_q},
                                    std::pair{"varlen_kwargs.cu_seq_lens_k", &k.cu_seq_lens_k}})
      for (std::size_t i = 0; i < cu->size(); ++i)
        if ((*cu)[i] < 0 || (*cu)[i] >= kMaxIndex) {
          fail(fmt::format("{}[{}]", field, i), fmt::format("{} is outside [0, {})", (*cu)[i], kMaxIndex));
          break;
        }
    if (k.max_length_q < 0 || k.max_length_k < 0 || k.max_length_q >= kMaxIndex || k.max_length_k >= kMaxIndex)
      fail("varlen_kwargs", fmt::format("max lengths must be in [0, {})", kMaxIndex));
  }
  if (errors.empty()) {
    const std::int64_t scores = size_product({m.batch, m.heads, m.q_len, m.kv_len()});
    // Q, K, V and the output as float, a few times over (oracle, flash path, kernel), and the eager
    // oracle's scores, probabilities and masks.
    const std::int64_t bytes = size_add(size_mul(size_add(size_product({m.batch, m.q_len, m.heads, m.head_dim, 2}),
                                                          size_product({m.batch, m.kv_len(), m.kv_heads, m.head_dim, 2})),
                                                 16),
                                        size_mul(scores, 16));
    if (scores > kMaxScores)
      fail("", fmt::format("{} score elements exceed the oracle's limit of {}", scores, kMaxScores));
    else if (bytes > limits::kMaxCaseBytes)
      fail("", fmt::format("the case needs {} bytes of memory; the limit is {} (core/input_limits.h)", bytes, limits::kMaxCaseBytes));
  }
  return errors;
}

namespace {

std::string mask_kind(const ModelCase& m) {
  if (!m.attention_mask) return "";
  bool zeros = false, holes = false, empty_row = false, left = true, right = true;
  for (const auto& row : *m.attention_mask) {
    const std::size_t n = row.size();
    std::size_t first = n, last = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (row[j] != 0) {
        if (first == n) first = j;
        last = j;
      } else {
        zeros = true;
      }
    if (first == n) {
      empty_row = true;
      continue;
    }
    for (std::size_t j = first; j <= last; ++j) holes = holes || row[j] == 0;
    left = left && last + 1 == n;   // zeros, if any, only before the tokens
    right = right && first == 0;    // zeros, if any, only after them
  }
  if (!zeros) return " mask[ones]";
  std::string k = holes ? "holes" : left ? "left" : right ? "right" : "mixed";
  if (empty_row) k += "+empty-row";
  return " mask[" + k + "]";
}

}  // namespace

std::string summary(const ModelCase& m) {
  std::string s = fmt::format("b{} q{} p{} h{}/{} d{} {}", m.batch, m.q_len, m.past, m.heads, m.kv_heads, m.head_dim,
                              to_string(m.dtype));
  s += m.causal ? " causal" : " bidir";
  s += mask_kind(m);
  if (m.position_ids) {
    std::string row;
    const auto& r0 = m.position_ids->front();
    for (std::size_t i = 0; i < r0.size() && i < 8; ++i) row += fmt::format("{}{}", i ? "," : "", r0[i]);
    if (r0.size() > 8) row += ",...";
    s += fmt::format(" pos{}[{}]", m.position_ids->size() > 1 ? fmt::format("x{}", m.position_ids->size()) : "", row);
  }
  if (m.position_ids_3d) s += " pos3d";
  if (m.sliding_window) s += fmt::format(" W{}", *m.sliding_window);
  if (m.softcap) s += fmt::format(" cap{}", *m.softcap);
  if (m.query_length) s += fmt::format(" qlen={}", *m.query_length);
  if (m.use_cache) s += " cache";
  if (m.static_cache_len) s += fmt::format(" static{}", *m.static_cache_len);
  if (m.varlen_kwargs) s += " cu-kwargs";
  if (m.via_generate) s += " generate";
  return s;
}

double case_work(const ModelCase& m) {
  return static_cast<double>(m.batch) * static_cast<double>(m.q_len) * static_cast<double>(m.kv_len()) *
         static_cast<double>(m.heads) * 2.0 * static_cast<double>(m.head_dim);
}

}  // namespace flashcheck
