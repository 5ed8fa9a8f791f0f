// Where key j of a sequence lives: the address resolution that every device reference kernel shares
// (the SIMT kernels of attention.cu and the tensor-core kernel of attention_tc.cu), so that cache
// appends (k_new), paged storage and leftpad are resolved in one place. CUDA only.
#pragma once

#include "core/device/device_case.h"

namespace flashcheck::device {

struct KvLayout {
  DeviceInputs in;
  int page_size, Hk, d, dv;
  bool cache, paged;
};

// Row of K (or V) holding key j (logical position p0 + j) of sequence b, KV head kh.
__device__ inline const float* kv_row(const KvLayout& L, const DeviceSeq& s, int b, int j, int kh, bool value) {
  const int pos = s.p0 + j;
  const int dim = value ? L.dv : L.d;
  long long row;
  const float* base;
  if (L.cache && pos >= s.cache_len) {
    row = s.new_start + (pos - s.cache_len);
    base = value ? L.in.v_new : L.in.k_new;
  } else {
    row = L.paged ? static_cast<long long>(L.in.block_table[b * L.in.max_blocks + pos / L.page_size]) * L.page_size +
                        pos % L.page_size
                  : static_cast<long long>(s.k_start) + pos;
    base = value ? L.in.v : L.in.k;
  }
  return base + (row * L.Hk + kh) * dim;
}

}  // namespace flashcheck::device
