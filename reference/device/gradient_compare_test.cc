// GPU tests (label gpu) of the device gradient comparator (reference/device/gradient_compare.h) against the host's
// compare_gradient and mean_cells_of (core/compare.h) on the same data: random gradients of several shapes (empty,
// without defined rows, head dim 1, a few thousand elements with gaps, enough for every thread to take several
// elements) in fp16, bf16 and fp32, softcap on and off, with and without noise and terms, and with the elements the
// rule treats apart planted: NaN outputs, infinite and NaN truths, truths past the dtype's range met by a saturated
// output (skipped) or not (judged), cells without content, ties of the largest error, and garbage on the rows that
// are not defined. Counts, maxima, floor, bound and the worst element must be the host's exactly; the sums behind
// the means may differ in their last bits (1e-12 relative).
#include "reference/device/gradient_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/compare.h"
#include "core/device/device_memory.h"
#include "core/tolerance.h"

namespace flashcheck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Shape {
  const char* name;
  std::int64_t rows, heads, dim;
  std::vector<RowSpan> spans;
};

// What is planted on top of the random data.
struct Plants {
  bool noise = true, terms = true;  // the arrays exist (else the device gets null, the host empty vectors)
  bool nonfinite = false;           // NaN and inf outputs, +-inf and NaN truths
  bool beyond = false;              // truths past the dtype's range: saturated outputs (skipped) and others
  bool ties = false;                // several elements share the largest error, which is finite
  bool no_content = false;          // a row and a cell with zero truth and terms, an element with terms only
};

struct HostGradient {
  DType dt = DType::kF16;
  bool softcap = false;
  Shape shape;
  std::vector<float> got, baseline;
  std::vector<double> truth, noise, terms;
  std::vector<std::size_t> ties;  // flat indices planted with the same largest error, in increasing order
};

std::vector<std::size_t> defined_elements(const Shape& s) {
  std::vector<std::size_t> at;
  for (const RowSpan& span : s.spans)
    for (std::int64_t row = span.begin; row < span.end; ++row)
      for (std::int64_t x = 0; x < s.heads * s.dim; ++x) at.push_back(static_cast<std::size_t>(row * s.heads * s.dim + x));
  return at;
}

HostGradient make_gradient(DType dt, bool softcap, const Shape& shape, const Plants& plants, std::uint64_t seed) {
  HostGradient g;
  g.dt = dt;
  g.softcap = softcap;
  g.shape = shape;
  const auto n = static_cast<std::size_t>(shape.rows * shape.heads * shape.dim);
  g.got.resize(n);
  g.baseline.resize(n);
  g.truth.resize(n);
  if (plants.noise) g.noise.resize(n);
  if (plants.terms) g.terms.resize(n);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> octave(-4, 4);
  std::uniform_real_distribution<double> chance(0.0, 1.0);
  for (std::size_t at = 0; at < n; ++at) {
    double t = chance(rng) < 0.04 ? 0.0 : std::ldexp(normal(rng), octave(rng));
    const double sp = rounding_floor(dt, t);
    // The kernel: within a spacing mostly, a few outliers far out (some past the bound, some not).
    const double m = chance(rng) < 0.03 ? 2.0 + 38.0 * chance(rng) : 1.0;
    g.truth[at] = t;
    g.got[at] = static_cast<float>(t + sp * unit(rng) * m);
    g.baseline[at] = static_cast<float>(round_to(dt, chance(rng) < 0.5 ? t : t + sp * unit(rng)));
    if (plants.noise) g.noise[at] = std::fabs(normal(rng)) * (std::fabs(t) + 0.01) * 50.0;
    if (plants.terms) {
      const double r = chance(rng);
      g.terms[at] = r < 0.1 ? 0.0 : r < 0.3 ? 0.5 * std::fabs(t) : std::fabs(t) * (1.0 + 3.0 * std::fabs(normal(rng)));
      if (t == 0.0 && r > 0.5) g.terms[at] = std::ldexp(1.0, octave(rng));
    }
  }
  // Garbage on the rows no span defines: must not count anywhere.
  std::vector<bool> is_defined(n, false);
  const std::vector<std::size_t> def = defined_elements(shape);
  for (std::size_t at : def) is_defined[at] = true;
  for (std::size_t at = 0; at < n; ++at) {
    if (is_defined[at]) continue;
    switch (at % 4) {
      case 0: g.got[at] = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: g.truth[at] = kInf; break;
      case 2: g.got[at] = 1e30f; break;
      default: g.truth[at] = 1e300; break;
    }
  }
  if (def.empty()) return g;
  const std::size_t d = def.size();
  auto pick = [&](std::size_t num, std::size_t den) { return def[std::min(d - 1, d * num / den)]; };
  if (plants.no_content) {
    const std::int64_t cell_dim = shape.heads * shape.dim;
    auto clear = [&](std::size_t first, std::size_t count) {
      for (std::size_t at = first; at < first + count && at < n; ++at) {
        g.truth[at] = 0.0;
        if (plants.terms) g.terms[at] = 0.0;
        g.baseline[at] = 0.0f;
        g.got[at] = static_cast<float>(1e-3 * unit(rng));  // an error the max check holds, no part of the mean
      }
    };
    const std::size_t row_start = pick(1, 3) / static_cast<std::size_t>(cell_dim) * static_cast<std::size_t>(cell_dim);
    clear(row_start, static_cast<std::size_t>(cell_dim));  // a whole row
    clear(pick(2, 3) / static_cast<std::size_t>(shape.dim) * static_cast<std::size_t>(shape.dim),
          static_cast<std::size_t>(shape.dim));  // one (row, head) cell
    if (plants.terms) {
      const std::size_t at = pick(3, 4);
      g.truth[at] = 0.0;
      g.terms[at] = 2.0;  // content through its terms alone
    }
  }
  if (plants.nonfinite) {
    g.got[pick(1, 9)] = std::numeric_limits<float>::quiet_NaN();
    g.got[pick(2, 9)] = std::numeric_limits<float>::infinity();
    g.truth[pick(3, 9)] = kInf;
    g.truth[pick(4, 9)] = -kInf;
    g.truth[pick(5, 9)] = kNaN;
    g.got[pick(6, 9)] = -std::numeric_limits<float>::infinity();
    g.truth[pick(6, 9)] = -kInf;  // the same infinity: still nonfinite for the gradient rule
    g.got[pick(7, 9)] = std::numeric_limits<float>::quiet_NaN();
    g.truth[pick(7, 9)] = kNaN;
  }
  if (plants.beyond) {
    const double top = detail::format_of(dt).max_finite;  // exactly a float
    auto plant = [&](std::size_t at, double truth, double out) {
      g.truth[at] = truth;
      g.got[at] = static_cast<float>(out);
      g.baseline[at] = static_cast<float>(round_to(dt, truth));  // the dtype's infinity
    };
    plant(pick(1, 8), 1.01 * top, top);                      // saturated: skipped
    plant(pick(2, 8), -1.01 * top, -kInf);                   // saturated at infinity: skipped, not nonfinite
    plant(pick(3, 8), 1.01 * top, kInf);                     // the same, positive
    plant(pick(4, 8), 1.01 * top, -top);                     // the wrong sign: judged
    plant(pick(5, 8), -1.01 * top, -0.5 * top);              // short of the range: judged
    if (dt == DType::kF16) plant(pick(6, 8), 7e4, 65504.0);  // an fp16 dK of 7e4: skipped
    plant(pick(7, 8), top, kInf);                            // the truth is in range: nonfinite
  }
  if (plants.ties) {
    // Errors of exactly 4096 (all values exact in float), far above the random ones; the earliest is the worst.
    const std::size_t where[] = {pick(3, 5), pick(1, 5), def[d - 1], pick(1, 2)};
    for (std::size_t k = 0; k < std::size(where); ++k) {
      const std::size_t at = where[k];
      const double t = k % 2 ? 0.5 : -1.5;
      g.truth[at] = t;
      g.got[at] = static_cast<float>(t + 4096.0);
      g.baseline[at] = static_cast<float>(t);
      g.ties.push_back(at);
    }
    // A second element right after the earliest one in the same warp, with the same error.
    const std::size_t first = *std::min_element(g.ties.begin(), g.ties.end());
    const auto next = std::find(def.begin(), def.end(), first) + 1;
    if (next != def.end()) {
      g.truth[*next] = 2.0;
      g.got[*next] = 4098.0f;
      g.baseline[*next] = 2.0f;
      g.ties.push_back(*next);
    }
    std::sort(g.ties.begin(), g.ties.end());
    g.ties.erase(std::unique(g.ties.begin(), g.ties.end()), g.ties.end());
  }
  return g;
}

// The host's view of the same tensor.
GradientTensor host_tensor(const HostGradient& g) { return GradientTensor{"dk", g.shape.spans, g.shape.heads, g.shape.dim}; }

template <class T>
const T* upload(const std::string& name, const std::vector<T>& v) {
  T* p = device::slot_of<T>("gradient_compare_test." + name, v.size());
  device::copy_to_device(p, v.data(), v.size() * sizeof(T));
  return p;
}

// `tag` keeps the arrays of tensors that are on the device together apart.
device::DeviceGradientTensor device_tensor(const HostGradient& g, const std::string& tag = "") {
  device::DeviceGradientTensor t;
  t.name = "dk";
  t.rows = g.shape.rows;
  t.heads = g.shape.heads;
  t.dim = g.shape.dim;
  t.spans = g.shape.spans;
  t.got = upload(tag + "got", g.got);
  t.truth = upload(tag + "truth", g.truth);
  t.baseline = upload(tag + "baseline", g.baseline);
  t.noise = g.noise.empty() ? nullptr : upload(tag + "noise", g.noise);
  t.terms = g.terms.empty() ? nullptr : upload(tag + "terms", g.terms);
  return t;
}

Comparison host_compare(const HostGradient& g, std::int64_t mean_cells) {
  const std::vector<double> got(g.got.begin(), g.got.end()), base(g.baseline.begin(), g.baseline.end());
  return compare_gradient(g.dt, g.softcap, host_tensor(g), got, g.truth, base, g.noise, g.terms,
                          tolerance::k_max(g.softcap), mean_cells);
}

// Equal values, NaN equal to NaN.
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }
// Within 1e-12 relative (equal infinities and NaNs included).
bool close(double a, double b) {
  if (same(a, b)) return true;
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b));
}

void expect_same_comparison(const Comparison& d, const Comparison& h) {
  EXPECT_EQ(d.tensor, h.tensor) << "tensor";
  EXPECT_EQ(d.compared, h.compared) << "compared";
  EXPECT_EQ(d.nonfinite, h.nonfinite) << "nonfinite";
  EXPECT_EQ(d.mismatches, h.mismatches) << "mismatches";
  EXPECT_TRUE(same(d.err_max, h.err_max)) << "err_max: device " << d.err_max << " host " << h.err_max;
  EXPECT_TRUE(same(d.base_max, h.base_max)) << "base_max: device " << d.base_max << " host " << h.base_max;
  EXPECT_TRUE(same(d.floor, h.floor)) << "floor: device " << d.floor << " host " << h.floor;
  EXPECT_TRUE(same(d.bound, h.bound)) << "bound: device " << d.bound << " host " << h.bound;
  EXPECT_TRUE(close(d.err_mean, h.err_mean)) << "err_mean: device " << d.err_mean << " host " << h.err_mean;
  EXPECT_TRUE(close(d.base_mean, h.base_mean)) << "base_mean: device " << d.base_mean << " host " << h.base_mean;
  EXPECT_TRUE(close(d.mean_bound, h.mean_bound)) << "mean_bound: device " << d.mean_bound << " host " << h.mean_bound;
  EXPECT_EQ(d.worst.b, h.worst.b) << "worst.b";
  EXPECT_EQ(d.worst.h, h.worst.h) << "worst.h";
  EXPECT_EQ(d.worst.i, h.worst.i) << "worst.i";
  EXPECT_EQ(d.worst.d, h.worst.d) << "worst.d";
  EXPECT_TRUE(same(d.worst.out, h.worst.out)) << "worst.out: device " << d.worst.out << " host " << h.worst.out;
  EXPECT_TRUE(same(d.worst.truth, h.worst.truth)) << "worst.truth: device " << d.worst.truth << " host " << h.worst.truth;
  EXPECT_TRUE(same(d.worst.baseline, h.worst.baseline))
      << "worst.baseline: device " << d.worst.baseline << " host " << h.worst.baseline;
  // What the gradient rule never sets stays at its default.
  EXPECT_EQ(d.empty_rows, 0) << "empty_rows";
  EXPECT_EQ(d.empty_wrong, 0) << "empty_wrong";
  EXPECT_FALSE(d.lse_checked) << "lse_checked";
}

// What the cases reached, so that a plant that stopped planting shows.
struct Coverage {
  int cases = 0, mismatching = 0, nonfinite = 0, tie_worst = 0, empty = 0;
};

void check_case(const HostGradient& g, Coverage& cov) {
  const device::DeviceGradientTensor t = device_tensor(g);
  const std::int64_t cells = mean_cells_of(host_tensor(g), g.truth, g.terms);
  EXPECT_EQ(device::device_mean_cells(t), cells) << "device_mean_cells";
  for (const std::int64_t mean_cells : {std::int64_t{0}, std::int64_t{1}, std::int64_t{5}, std::int64_t{1} << 40}) {
    SCOPED_TRACE("mean_cells " + std::to_string(mean_cells));
    const Comparison h = host_compare(g, mean_cells);
    const Comparison d = device::device_compare_gradient(g.dt, g.softcap, t, tolerance::k_max(g.softcap), mean_cells);
    expect_same_comparison(d, h);
    ++cov.cases;
    cov.mismatching += h.mismatches > 0 && h.nonfinite == 0 ? 1 : 0;
    cov.nonfinite += h.nonfinite > 0 ? 1 : 0;
    cov.empty += h.compared == 0 ? 1 : 0;
    if (!g.ties.empty()) {
      // The plant is the largest error and its first element the host's worst (the rule under test on the device).
      const std::size_t first = g.ties.front(), cell_dim = static_cast<std::size_t>(g.shape.heads * g.shape.dim);
      const auto row = static_cast<std::int64_t>(first / cell_dim);
      EXPECT_EQ(h.err_max, 4096.0) << "tie plant";
      EXPECT_EQ(h.worst.h * g.shape.dim + h.worst.d, static_cast<std::int64_t>(first % cell_dim)) << "tie plant";
      EXPECT_EQ(g.shape.spans[static_cast<std::size_t>(h.worst.b)].begin + h.worst.i, row) << "tie plant";
      cov.tie_worst += 1;
    }
  }
}

const char* dtype_name(DType dt) { return dt == DType::kF16 ? "fp16" : dt == DType::kBF16 ? "bf16" : "fp32"; }

std::vector<Shape> small_shapes() {
  return {
      {"one element", 1, 1, 1, {{0, 1}}},
      {"head dim 1 with an empty span", 300, 3, 1, {{0, 100}, {120, 120}, {130, 300}}},
      {"a few thousand with gaps", 97, 4, 17, {{2, 40}, {40, 41}, {45, 90}}},
  };
}

std::vector<Plants> variants() {
  std::vector<Plants> v;
  v.push_back({});
  v.push_back({.noise = false, .terms = false});
  v.push_back({.noise = true, .terms = false, .no_content = true});
  v.push_back({.noise = false, .terms = true, .no_content = true});
  v.push_back({.nonfinite = true});
  v.push_back({.noise = false, .terms = false, .nonfinite = true});
  v.push_back({.beyond = true});
  v.push_back({.noise = false, .terms = false, .beyond = true});
  v.push_back({.ties = true});
  v.push_back({.noise = false, .terms = false, .ties = true, .no_content = true});
  return v;
}

class DeviceGradientCompareGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!device::available()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(DeviceGradientCompareGpu, MatchesTheHostOnRandomGradientsWithPlants) {
  Coverage cov;
  std::uint64_t seed = 1;
  const std::vector<Plants> vs = variants();
  for (const Shape& shape : small_shapes())
    for (const DType dt : {DType::kF16, DType::kBF16, DType::kF32})
      for (const bool softcap : {false, true})
        for (std::size_t v = 0; v < vs.size(); ++v) {
          SCOPED_TRACE(std::string(shape.name) + " " + dtype_name(dt) + (softcap ? " softcap" : "") + " variant " +
                       std::to_string(v));
          check_case(make_gradient(dt, softcap, shape, vs[v], ++seed), cov);
        }
  // The plants reached what they are for (else the comparisons above prove less than they claim).
  EXPECT_GT(cov.mismatching, 0) << "no case had mismatches";
  EXPECT_GT(cov.nonfinite, 0) << "no case had nonfinite elements";
  EXPECT_GT(cov.tie_worst, 0) << "no case had ties";
}

TEST_F(DeviceGradientCompareGpu, EmptyTensorsGiveTheHostsAnswer) {
  const std::vector<Shape> shapes = {
      {"no rows", 0, 3, 8, {}},
      {"no defined row", 6, 2, 4, {}},
      {"empty spans only", 6, 2, 4, {{2, 2}, {4, 4}}},
      {"dim 0", 5, 2, 0, {{0, 5}}},
      {"no heads", 5, 0, 3, {{1, 4}}},
  };
  Coverage cov;
  std::uint64_t seed = 1000;
  for (const Shape& shape : shapes)
    for (const DType dt : {DType::kF16, DType::kBF16, DType::kF32})
      for (const bool softcap : {false, true})
        for (const bool arrays : {false, true}) {
          SCOPED_TRACE(std::string(shape.name) + " " + dtype_name(dt) + (softcap ? " softcap" : "") +
                       (arrays ? " noise and terms" : ""));
          check_case(make_gradient(dt, softcap, shape, Plants{.noise = arrays, .terms = arrays}, ++seed), cov);
        }
  EXPECT_EQ(cov.empty, cov.cases) << "an empty tensor compared elements";
}

// Over 2^18 elements: every thread of the first pass takes several (the grid-stride path), and ties fall in one
// thread, across warps and across blocks.
TEST_F(DeviceGradientCompareGpu, MatchesTheHostWhenThreadsTakeSeveralElements) {
  const Shape shape{"large", 1300, 8, 32, {{0, 500}, {510, 1300}}};
  Coverage cov;
  {
    SCOPED_TRACE("fp16 ties");
    check_case(make_gradient(DType::kF16, false, shape, Plants{.ties = true, .no_content = true}, 7), cov);
  }
  {
    SCOPED_TRACE("fp32 softcap nonfinite");
    check_case(make_gradient(DType::kF32, true, shape, Plants{.nonfinite = true}, 8), cov);
  }
  {
    SCOPED_TRACE("bf16 beyond range, no arrays");
    check_case(make_gradient(DType::kBF16, false, shape, Plants{.noise = false, .terms = false, .beyond = true}, 9),
               cov);
  }
  {
    SCOPED_TRACE("bf16 plain");
    check_case(make_gradient(DType::kBF16, true, shape, Plants{}, 10), cov);
  }
}

// grad-conformance's call: three tensors queued at once, dQ's content cells the mean's cell count for all three (the
// host's compare_gradients: mean_cells_of dQ, at least 1). Tensors of different shapes and plants, dQ empty in one.
TEST_F(DeviceGradientCompareGpu, ThreeTensorsAtOnceGiveTheHostsAnswers) {
  const std::vector<Plants> vs = variants();
  const std::vector<Shape> shapes = small_shapes();
  const Shape empty{"no defined row", 6, 2, 4, {}};
  std::uint64_t seed = 2000;
  int cases = 0, mismatching = 0;
  for (const DType dt : {DType::kF16, DType::kBF16})
    for (const bool softcap : {false, true})
      for (std::size_t v = 0; v < vs.size(); ++v) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (softcap ? " softcap" : "") + " variant " + std::to_string(v));
        const Shape& first = v % 4 == 3 ? empty : shapes[v % shapes.size()];
        const HostGradient g[3] = {make_gradient(dt, softcap, first, vs[v], ++seed),
                                   make_gradient(dt, softcap, shapes[(v + 1) % shapes.size()], vs[(v + 1) % vs.size()], ++seed),
                                   make_gradient(dt, softcap, shapes[(v + 2) % shapes.size()], vs[(v + 2) % vs.size()], ++seed)};
        const device::DeviceGradientTensor t[3] = {device_tensor(g[0], "a."), device_tensor(g[1], "b."), device_tensor(g[2], "c.")};
        const std::int64_t cells = std::max<std::int64_t>(mean_cells_of(host_tensor(g[0]), g[0].truth, g[0].terms), 1);
        const GradientComparisons d =
            device::device_compare_gradients(dt, softcap, t[0], t[1], t[2], tolerance::k_max(softcap));
        const Comparison* got[3] = {&d.dq, &d.dk, &d.dv};
        for (int i = 0; i < 3; ++i) {
          SCOPED_TRACE("tensor " + std::to_string(i));
          const Comparison h = host_compare(g[i], cells);
          expect_same_comparison(*got[i], h);
          mismatching += h.mismatches > 0 ? 1 : 0;
          ++cases;
        }
      }
  EXPECT_EQ(cases, 2 * 2 * static_cast<int>(vs.size()) * 3);
  EXPECT_GT(mismatching, 0) << "no tensor had mismatches";
}

TEST_F(DeviceGradientCompareGpu, TwoRunsGiveTheSameBits) {
  const Shape shape{"large", 1300, 8, 32, {{3, 700}, {700, 1290}}};
  const HostGradient g = make_gradient(DType::kBF16, false, shape, Plants{}, 11);
  const device::DeviceGradientTensor t = device_tensor(g);
  const Comparison a = device::device_compare_gradient(g.dt, g.softcap, t, 2.0, 1000);
  const Comparison b = device::device_compare_gradient(g.dt, g.softcap, t, 2.0, 1000);
  EXPECT_EQ(std::memcmp(&a.err_mean, &b.err_mean, sizeof(double)), 0) << "err_mean";
  EXPECT_EQ(std::memcmp(&a.base_mean, &b.base_mean, sizeof(double)), 0) << "base_mean";
  EXPECT_EQ(std::memcmp(&a.mean_bound, &b.mean_bound, sizeof(double)), 0) << "mean_bound";
}

TEST_F(DeviceGradientCompareGpu, RefusesSpansThatAreNotIncreasingDisjointRows) {
  const Shape ok{"ok", 10, 2, 3, {{0, 4}}};
  const HostGradient g = make_gradient(DType::kF16, false, ok, Plants{}, 12);
  device::DeviceGradientTensor t = device_tensor(g);
  for (const std::vector<RowSpan>& spans : std::vector<std::vector<RowSpan>>{
           {{0, 4}, {3, 6}}, {{5, 8}, {0, 2}}, {{0, 11}}, {{4, 2}}, {{-1, 2}}}) {
    t.spans = spans;
    EXPECT_THROW(device::device_compare_gradient(g.dt, g.softcap, t, 2.0, 1), std::invalid_argument);
    EXPECT_THROW(device::device_mean_cells(t), std::invalid_argument);
  }
  t.spans = {{0, 4}, {2, 2}, {4, 10}};  // an empty span anywhere defines nothing
  EXPECT_NO_THROW(device::device_compare_gradient(g.dt, g.softcap, t, 2.0, 1));
}

}  // namespace
}  // namespace flashcheck
