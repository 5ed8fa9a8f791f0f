// flashcheck._native: the engine's fp64 reference, low-precision baseline and tolerance rule for Python callers
// (python/flashcheck/reference.py wraps it for torch tensors). A case arrives as the JSON of a fixture case
// (core/case_json.h, validated by the fixture reader's rules) and its tensors as float32 arrays in the case's
// packed layout, so that Python and the C++ properties judge by the same code: one reference, one rule.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/case_json.h"
#include "core/case_tensors.h"
#include "core/compare.h"
#include "core/error.h"
#include "core/kernel_case.h"
#include "core/verdict.h"
#include "reference/host/attention.h"
#include "reference/host/baseline.h"
#include "reference/host/gradients.h"

namespace py = pybind11;
using flashcheck::AttentionResult;
using flashcheck::CaseTensors;
using flashcheck::GradientResult;
using flashcheck::HostTensor;
using flashcheck::KernelCase;

namespace {

using FloatIn = py::array_t<float, py::array::c_style | py::array::forcecast>;
using DoubleIn = py::array_t<double, py::array::c_style | py::array::forcecast>;

KernelCase parse_case(const std::string& case_json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(case_json);
  } catch (const nlohmann::json::exception& e) {
    throw py::value_error(std::string("case: not JSON: ") + e.what());
  }
  try {
    return flashcheck::case_from_json(j, "case", "");
  } catch (const flashcheck::InputError& e) {
    throw py::value_error(e.what());
  }
}

HostTensor host_tensor(const FloatIn& a) {
  HostTensor t;
  t.shape.assign(a.shape(), a.shape() + a.ndim());
  t.data.assign(a.data(), a.data() + a.size());
  return t;
}

CaseTensors case_tensors(const KernelCase& c, const FloatIn& q, const FloatIn& k, const FloatIn& v,
                         const std::optional<FloatIn>& dout) {
  CaseTensors t;
  t.q = host_tensor(q);
  t.k = host_tensor(k);
  t.v = host_tensor(v);
  if (dout) t.dout = host_tensor(*dout);
  if (const std::string bad = flashcheck::check_shapes(c, t); !bad.empty()) throw py::value_error("tensors: " + bad);
  return t;
}

flashcheck::EmptyRow parse_empty_row(const std::string& s) {
  const auto e = flashcheck::parse_empty_row(s);
  if (!e) throw py::value_error("empty_row: expected zero, nan or uniform, not '" + s + "'");
  return *e;
}

py::array_t<double> array_of(const std::vector<double>& v, std::vector<py::ssize_t> shape) {
  py::array_t<double> a(shape);
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

std::vector<double> values_of(const DoubleIn& a, std::size_t expected, const char* name) {
  if (static_cast<std::size_t>(a.size()) != expected)
    throw py::value_error(std::string(name) + ": " + std::to_string(a.size()) + " elements, the case needs " +
                          std::to_string(expected));
  return {a.data(), a.data() + a.size()};
}

// The verdict as the harness prints and writes it: JSON (core/verdict.h) and the one-line description.
py::dict verdict_dict(const flashcheck::Verdict& v) {
  py::dict d;
  d["json"] = to_json(v).dump();
  d["line"] = flashcheck::describe(v);
  d["passed"] = v.passed();
  return d;
}

py::dict reference(const std::string& case_json, const FloatIn& q, const FloatIn& k, const FloatIn& v,
                   const std::optional<FloatIn>& dout, const std::string& empty_row) {
  const KernelCase c = parse_case(case_json);
  const CaseTensors t = case_tensors(c, q, k, v, dout);
  const flashcheck::EmptyRow convention = parse_empty_row(empty_row);
  py::dict r;
  {
    py::gil_scoped_release unlocked;
    const AttentionResult truth = flashcheck::reference::host_attention(c, t, convention);
    const AttentionResult base = flashcheck::reference::low_precision_baseline(c, t, convention);
    py::gil_scoped_acquire locked;
    const py::ssize_t rows = q.shape(0), heads = c.heads, dv = c.v_head_dim;
    r["out"] = array_of(truth.out, {rows, heads, dv});
    r["lse"] = array_of(truth.lse, {rows, heads});
    r["baseline_out"] = array_of(base.out, {rows, heads, dv});
  }
  if (c.backward()) {
    GradientResult g, lowp;
    {
      py::gil_scoped_release unlocked;
      g = flashcheck::reference::host_gradients(c, t);
      lowp = flashcheck::reference::low_precision_gradients(c, t);
    }
    std::vector<py::ssize_t> q_shape(q.shape(), q.shape() + q.ndim()), k_shape(k.shape(), k.shape() + k.ndim()),
        v_shape(v.shape(), v.shape() + v.ndim());
    r["dq"] = array_of(g.dq, q_shape);
    r["dk"] = array_of(g.dk, k_shape);
    r["dv"] = array_of(g.dv, v_shape);
    r["baseline_dq"] = array_of(lowp.dq, q_shape);
    r["baseline_dk"] = array_of(lowp.dk, k_shape);
    r["baseline_dv"] = array_of(lowp.dv, v_shape);
  }
  return r;
}

// The conformance verdict of an output (and LSE) computed elsewhere, as the conformance property gives it.
py::dict judge(const std::string& case_json, const FloatIn& q, const FloatIn& k, const FloatIn& v, const DoubleIn& out,
               const std::optional<DoubleIn>& lse, const std::string& empty_row) {
  const KernelCase c = parse_case(case_json);
  const CaseTensors t = case_tensors(c, q, k, v, std::nullopt);
  const flashcheck::EmptyRow convention = parse_empty_row(empty_row);
  AttentionResult got;
  const auto cells = static_cast<std::size_t>(q.shape(0) * c.heads);
  got.out = values_of(out, cells * c.v_head_dim, "out");
  if (lse) got.lse = values_of(*lse, cells, "lse");
  flashcheck::Verdict verdict;
  verdict.kernel = "python";
  {
    py::gil_scoped_release unlocked;
    const AttentionResult truth = flashcheck::reference::host_attention(c, t, convention);
    const AttentionResult base = flashcheck::reference::low_precision_baseline(c, t, convention);
    const flashcheck::Comparison cmp = flashcheck::compare(c, got, truth, base, convention, flashcheck::tolerance_for(c));
    verdict.cmp = cmp;
    verdict.reason = flashcheck::failure_reason(cmp);
  }
  verdict.kind = verdict.reason.empty() ? flashcheck::VerdictKind::kPass : flashcheck::VerdictKind::kFail;
  return verdict_dict(verdict);
}

// The grad-conformance verdict of dQ, dK and dV computed elsewhere.
py::dict judge_gradients(const std::string& case_json, const FloatIn& q, const FloatIn& k, const FloatIn& v,
                         const FloatIn& dout, const DoubleIn& dq, const DoubleIn& dk, const DoubleIn& dv,
                         bool zero_unused_keys) {
  const KernelCase c = parse_case(case_json);
  if (!c.backward()) throw py::value_error("case: judge_gradients needs a backward case (a dout recipe)");
  const CaseTensors t = case_tensors(c, q, k, v, dout);
  GradientResult got;
  got.dq = values_of(dq, t.q.data.size(), "dq");
  got.dk = values_of(dk, t.k.data.size(), "dk");
  got.dv = values_of(dv, t.v.data.size(), "dv");
  flashcheck::Verdict verdict;
  verdict.kernel = "python";
  verdict.property = "grad-conformance";
  py::dict all;
  {
    py::gil_scoped_release unlocked;
    const GradientResult truth = flashcheck::reference::host_gradients(c, t);
    const GradientResult lowp = flashcheck::reference::low_precision_gradients(c, t);
    const flashcheck::GradientComparisons cmp = flashcheck::compare_gradients(c, got, truth, lowp, zero_unused_keys);
    verdict.cmp = cmp.decisive();
    verdict.reason = flashcheck::failure_reason(cmp);
    py::gil_scoped_acquire locked;
    for (const flashcheck::Comparison* one : {&cmp.dq, &cmp.dk, &cmp.dv}) {
      flashcheck::Verdict part = verdict;
      part.cmp = *one;
      part.reason = flashcheck::failure_reason(*one);
      part.kind = part.reason.empty() ? flashcheck::VerdictKind::kPass : flashcheck::VerdictKind::kFail;
      all[one->tensor.c_str()] = verdict_dict(part);
    }
  }
  verdict.kind = verdict.reason.empty() ? flashcheck::VerdictKind::kPass : flashcheck::VerdictKind::kFail;
  py::dict d = verdict_dict(verdict);
  d["gradients"] = all;
  return d;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "flashcheck's fp64 reference, low-precision baseline and tolerance rule (see flashcheck.reference)";
  m.def("reference", &reference, py::arg("case_json"), py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("dout") = std::nullopt, py::arg("empty_row") = "zero");
  m.def("judge", &judge, py::arg("case_json"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
        py::arg("lse") = std::nullopt, py::arg("empty_row") = "zero");
  m.def("judge_gradients", &judge_gradients, py::arg("case_json"), py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("dout"), py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("zero_unused_keys") = false);
}
