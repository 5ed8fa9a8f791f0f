#include "core/model_tensors.h"

#include "core/recipe.h"

namespace flashcheck {

ModelTensors materialize(const ModelCase& m) {
  ModelTensors t;
  const std::int64_t B = m.batch, Lq = m.q_len, Lk = m.kv_len(), H = m.heads, Hk = m.kv_heads, D = m.head_dim;
  const DataRecipe& r = m.data;
  auto value = [&](TensorId id, double scale, std::int64_t b, std::int64_t pos, std::int64_t h, std::int64_t d) {
    return round_to_float(m.dtype, recipe_value(r.dist, r.seed, id, scale, static_cast<std::uint32_t>(b),
                                                static_cast<std::uint32_t>(pos), static_cast<std::uint32_t>(h),
                                                static_cast<std::uint32_t>(d)));
  };
  t.q = HostTensor({B, Lq, H, D}, 0.0f);
  t.k = HostTensor({B, Lk, Hk, D}, 0.0f);
  t.v = HostTensor({B, Lk, Hk, D}, 0.0f);
  std::size_t at = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Lq; ++i)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) t.q.data[at++] = value(TensorId::kQ, r.q_scale, b, m.past + i, h, d);
  at = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < Lk; ++j)
      for (std::int64_t g = 0; g < Hk; ++g)
        for (std::int64_t d = 0; d < D; ++d, ++at) {
          if (j >= m.filled_kv()) continue;  // unfilled static-cache slot
          t.k.data[at] = value(TensorId::kK, r.k_scale, b, j, g, d);
          t.v.data[at] = r.v_onehot ? static_cast<float>(onehot_value(static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(d),
                                                                      static_cast<std::uint32_t>(D)))
                                    : value(TensorId::kV, r.v_scale, b, j, g, d);
        }
  return t;
}

}  // namespace flashcheck
