#include "reference/host/logical_kv.h"

#include <algorithm>

namespace flashcheck::reference::detail {

LogicalKv gather_sequence(const KernelCase& c, const CaseGeometry& g, const CaseTensors& t, std::size_t b) {
  const SeqGeometry& s = g.seqs[b];
  const Sequence& seq = c.seqs[b];
  const std::int64_t kd = c.kv_heads * c.head_dim, vd = c.kv_heads * c.v_head_dim;
  LogicalKv kv;
  kv.lk = std::max<std::int64_t>(s.lk, 0);
  kv.k.resize(static_cast<std::size_t>(kv.lk * kd));
  kv.v.resize(static_cast<std::size_t>(kv.lk * vd));
  for (std::int64_t j = 0; j < kv.lk; ++j) {
    const std::int64_t p = s.p0 + j;
    const float* ksrc;
    const float* vsrc;
    if (c.kv_cache && p >= seq.cache_len) {
      const std::int64_t row = s.new_start + (p - seq.cache_len);
      ksrc = t.k_new.data.data() + row * kd;
      vsrc = t.v_new.data.data() + row * vd;
    } else {
      std::int64_t row;
      if (c.kv_storage == KvStorage::kPaged) {
        const std::int64_t page = t.block_table[b][static_cast<std::size_t>(p / c.paging.page_size)];
        row = page * c.paging.page_size + p % c.paging.page_size;
      } else {
        row = s.k_start + p;
      }
      ksrc = t.k.data.data() + row * kd;
      vsrc = t.v.data.data() + row * vd;
    }
    std::copy(ksrc, ksrc + kd, kv.k.begin() + j * kd);
    std::copy(vsrc, vsrc + vd, kv.v.begin() + j * vd);
  }
  return kv;
}

}  // namespace flashcheck::reference::detail
