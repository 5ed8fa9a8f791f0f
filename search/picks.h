// Shrink-friendly choices for the RapidCheck generators (kernel and model level). RapidCheck's
// element/weightedElement choices do not shrink; every structural choice here is an index drawn from
// inRange instead, at full range whatever the size, so that it shrinks towards entry 0, the simplest one
// (the feature off, the first head dim, equal lengths, ...). Call only inside rc::gen::exec.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <rapidcheck.h>
#include <vector>

namespace flashcheck::detail {

inline std::size_t pick_index(std::size_t n) { return *rc::gen::resize(100, rc::gen::inRange<std::size_t>(0, n)); }

// Bucket i with probability w_i / sum(w), shrinking towards bucket 0.
inline std::size_t pick_weighted(std::initializer_list<std::size_t> weights) {
  std::size_t total = 0;
  for (std::size_t w : weights) total += w;
  std::size_t r = pick_index(total), i = 0;
  for (std::size_t w : weights) {
    if (r < w) return i;
    r -= w;
    ++i;
  }
  return i - 1;
}

// On with probability on / (on + off); shrinks to off.
inline bool toggle(std::size_t on, std::size_t off) { return pick_weighted({off, on}) == 1; }

template <typename T>
T pick(const std::vector<T>& v) {
  return v[pick_index(v.size())];
}

}  // namespace flashcheck::detail
