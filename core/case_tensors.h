// The input tensors of one KernelCase, on the host, in the storage layout the case describes.
// Values are kept as float: every value is exactly representable in the case's dtype, and float holds
// fp16, bf16 and fp32 values without loss.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/kernel_case.h"
#include "core/rng.h"

namespace flashcheck {

struct HostTensor {
  std::vector<std::int64_t> shape;  // row-major, contiguous
  std::vector<float> data;

  HostTensor() = default;
  HostTensor(std::vector<std::int64_t> s, float fill);
  std::int64_t numel() const;
  bool empty() const { return shape.empty(); }
};

struct CaseTensors {
  HostTensor q;      // (total_q, H, d)
  HostTensor k;      // packed: (total_k, Hk, d); paged: (num_pages, page_size, Hk, d)
  HostTensor v;      // as k, with dv
  HostTensor k_new;  // kv_cache: (total_new, Hk, d); otherwise empty
  HostTensor v_new;  // kv_cache: (total_new, Hk, dv)
  HostTensor dout;   // backward cases: the upstream gradient, laid out like the output (q_rows, H, dv)
  std::vector<std::vector<std::int32_t>> block_table;  // paged only
};

// Attention output in packed form, from a kernel or a reference.
struct AttentionResult {
  std::vector<double> out;          // (total_q, H, dv)
  std::vector<double> lse;          // (total_q, H); empty when the kernel does not return it
  std::vector<std::uint8_t> empty;  // references only: (total_q, H), 1 where the row sees no key
  // References only: the first-order sensitivity of each output element (and each row's LSE) to fp32
  // rounding, in units of the fp32 unit roundoff. core/compare.cc turns it into the fp32 noise floor.
  std::vector<double> noise;      // (total_q, H, dv)
  std::vector<double> lse_noise;  // (total_q, H)
};

// Gradients of a backward case w.r.t. the inputs, in the inputs' packed layouts (slack rows included), from a
// kernel or a reference. Backward cases have packed K/V (core/kernel_case.h KernelCase::dout).
struct GradientResult {
  std::vector<double> dq;  // (q_rows, H, d)
  std::vector<double> dk;  // (kv_rows, Hk, d)
  std::vector<double> dv;  // (kv_rows, Hk, dv)
  // References only: each element's first-order sensitivity to fp32 rounding, units of u (core/tolerance.h), and
  // the magnitude of its terms (the root sum of their squares, dpsum's dependence on the output's rounding included;
  // reference/host/exact_row.h KeyGrad): the scale at which a kernel that rounds its terms to the dtype errs.
  std::vector<double> dq_noise, dk_noise, dv_noise;
  std::vector<double> dq_terms, dk_terms, dv_terms;
};

// The shapes materialize() gives the tensors of a validated case (k_new/v_new empty without a cache),
// computed without allocating them.
struct TensorShapes {
  std::vector<std::int64_t> q, k, v, k_new, v_new, dout;
};
TensorShapes tensor_shapes(const KernelCase& c);

// Generates the tensors of a validated case from its data recipe: counter-based values rounded to the
// dtype; NaN poison in allocated slots outside every sequence (slack rows included) when data.poison is set.
CaseTensors materialize(const KernelCase& c);

// The value of one logical element: tensor (kQ, kK, kV, or kDO for the upstream gradient), sequence b, logical
// position (the query row, or the key position counted before leftpad), head, channel. Layout-free: the same logical case in
// packed, paged or cache form has the same values.
using ValueSource = std::function<float(TensorId t, std::int64_t b, std::int64_t pos, std::int64_t head, std::int64_t ch)>;

// Lays out values from `src` in the storage the case describes (same poison rule as above). Values must
// already be exact in the case's dtype.
CaseTensors materialize(const KernelCase& c, const ValueSource& src);

// Reads logical elements back from tensors laid out for `c`; valid only for positions the case uses, and
// only while `c` and `t` live (it refers to both).
// The properties rebuild transformed cases with it; the adapters gather logical keys with it.
ValueSource logical_values(const KernelCase& c, const CaseTensors& t);

// Checks that tensors (for example, loaded from a fixture) have the shapes the case requires.
// Returns "" when they do, else a message naming the tensor and both shapes.
std::string check_shapes(const KernelCase& c, const CaseTensors& t);

}  // namespace flashcheck
