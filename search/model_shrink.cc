#include "search/model_shrink.h"

namespace flashcheck {
namespace {

using Rows = std::vector<std::vector<std::int64_t>>;

// Drops column `col` of every row.
void drop_column(Rows& rows, std::size_t col) {
  for (auto& r : rows)
    if (col < r.size()) r.erase(r.begin() + static_cast<std::ptrdiff_t>(col));
}

void keep_row(ModelCase& m, std::size_t b) {
  if (m.attention_mask) *m.attention_mask = Rows{(*m.attention_mask)[b]};
  if (m.position_ids && m.position_ids->size() > 1) *m.position_ids = Rows{(*m.position_ids)[b]};
  m.batch = 1;
}

// A query token fewer: the last (or, with first = true, the first) of the new tokens.
std::optional<ModelCase> drop_query(const ModelCase& m, bool first) {
  if (m.q_len <= 1 || m.varlen_kwargs || m.query_length) return std::nullopt;
  ModelCase c = m;
  c.q_len -= 1;
  const std::size_t i = first ? 0 : static_cast<std::size_t>(m.q_len - 1);
  if (c.attention_mask) drop_column(*c.attention_mask, static_cast<std::size_t>(m.past) + i);
  if (c.position_ids) drop_column(*c.position_ids, i);
  return c;
}

std::optional<ModelCase> drop_past(const ModelCase& m) {
  if (m.past <= 0) return std::nullopt;
  ModelCase c = m;
  c.past -= 1;
  if (c.attention_mask) drop_column(*c.attention_mask, 0);
  if (c.static_cache_len) *c.static_cache_len -= 1;
  if (c.varlen_kwargs) return std::nullopt;
  return c;
}

}  // namespace

std::vector<ModelCase> shrink_candidates(const ModelCase& m) {
  std::vector<ModelCase> out;
  auto add = [&](std::optional<ModelCase> c) {
    if (c && !(*c == m) && validate(*c).empty()) out.push_back(std::move(*c));
  };
  if (m.batch > 1 && !m.varlen_kwargs)
    for (std::int64_t b = 0; b < m.batch; ++b) {
      ModelCase c = m;
      keep_row(c, static_cast<std::size_t>(b));
      add(c);
    }
  if (m.heads > 1) {
    ModelCase c = m;
    c.heads = c.kv_heads = 1;
    add(c);
    c = m;
    c.heads = m.group();
    c.kv_heads = 1;
    add(c);
    if (m.kv_heads % 2 == 0) {
      c = m;
      c.heads /= 2;
      c.kv_heads /= 2;
      add(c);
    }
  }
  for (std::int64_t d : {std::int64_t{8}, m.head_dim / 2})
    if (d >= 8 && d < m.head_dim) {
      ModelCase c = m;
      c.head_dim = d;
      add(c);
    }
  add(drop_query(m, false));
  add(drop_query(m, true));
  add(drop_past(m));
  auto without = [&](auto&& clear) {
    ModelCase c = m;
    clear(c);
    add(c);
  };
  if (m.sliding_window) without([](ModelCase& c) { c.sliding_window.reset(); });
  if (m.softcap) without([](ModelCase& c) { c.softcap.reset(); });
  if (m.scale) without([](ModelCase& c) { c.scale.reset(); });
  if (m.attention_mask) without([](ModelCase& c) { c.attention_mask.reset(); });
  if (m.position_ids) without([](ModelCase& c) { c.position_ids.reset(); c.position_ids_3d = false; });
  if (m.use_cache && m.past == 0 && !m.static_cache_len) without([](ModelCase& c) { c.use_cache = false; });
  if (m.static_cache_len && *m.static_cache_len > m.filled_kv())
    without([](ModelCase& c) { *c.static_cache_len -= 1; });
  if (m.via_generate) without([](ModelCase& c) { c.via_generate = false; });
  if (m.dtype != DType::kBF16) without([](ModelCase& c) { c.dtype = DType::kBF16; });
  return out;
}

ShrinkOutcome shrink_model_case(const ModelCase& m,
                                const std::function<std::optional<std::size_t>(const std::vector<ModelCase>&)>& still_fails,
                                int max_rounds) {
  ShrinkOutcome s{.smallest = m};
  for (int round = 0; round < max_rounds; ++round) {
    const std::vector<ModelCase> batch = shrink_candidates(s.smallest);
    if (batch.empty()) return s;
    s.attempts += static_cast<int>(batch.size());
    const std::optional<std::size_t> hit = still_fails(batch);
    if (!hit) return s;
    s.smallest = batch[*hit];
    ++s.steps;
  }
  s.budget_exhausted = true;
  return s;
}

}  // namespace flashcheck
