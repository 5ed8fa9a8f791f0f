// The Python bridge: a plugin (include/flashcheck/plugin.h) that runs attention kernels written in Python.
// A kernel is named `py:package.module:function`; the module gives its contract (the function's
// `contract` attribute, or the module's CONTRACT) and the function receives torch tensors made from the
// harness's buffers without a copy (DLPack). docs/PYTHON_KERNELS.md has the interface and an example.
//
// The interpreter starts on first use, in the worker process that resolves or runs the kernel, with the
// Python of FLASHCHECK_PYTHON (default: the interpreter whose torch flashcheck was built with), so that its
// site-packages (torch, the kernel's own packages) are importable.
#include <Python.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <string>

#include "flashcheck/plugin.h"

namespace {

// The Python side: turns DLPack capsules into torch tensors, calls the kernel, and reports a failure as
// the last line of its traceback. Never raises.
constexpr const char* kShim = R"PY(
import importlib, json, sys, traceback, types

def _last_line(exc):
    # The traceback's last line, "ExcType: message", cut at the message's first line break.
    return traceback.format_exception_only(type(exc), exc)[-1].strip().split("\n")[0]

def load(spec):
    try:
        module_name, _, function_name = spec.partition(":")
        if not module_name or not function_name:
            return False, "expected py:package.module:function"
        module = importlib.import_module(module_name)
        fn = getattr(module, function_name)
        contract = getattr(fn, "contract", None) or getattr(module, "CONTRACT", None)
        if contract is None:
            return False, f"{spec}: no contract (give the function a `contract` attribute or the module a CONTRACT dict)"
        backward = getattr(fn, "backward", None)
        if backward is not None and backward != "autograd" and not callable(backward):
            return False, f"{spec}: `backward` must be a function or \"autograd\", not {backward!r}"
        return True, (fn, json.dumps(contract), backward is not None)
    except BaseException as exc:
        return False, _last_line(exc)

_TENSORS = ("q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv")

def call(fn, capsules, scalars):
    try:
        import torch
        t = {name: (torch.from_dlpack(c) if c is not None else None) for name, c in capsules.items()}
        args = types.SimpleNamespace(**{n: x for n, x in t.items() if n not in _TENSORS}, **scalars)
        fn(t["q"], t["k"], t["v"], t["out"], t["lse"], args)
        return ""
    except BaseException as exc:
        return _last_line(exc) or type(exc).__name__

def call_backward(fn, capsules, scalars):
    # fn.backward(dout, q, k, v, out, lse, dq, dk, dv, args) writes the gradients; "autograd" takes them through
    # torch's autograd of the forward itself, run again on leaves that require them.
    try:
        import torch
        t = {name: (torch.from_dlpack(c) if c is not None else None) for name, c in capsules.items()}
        args = types.SimpleNamespace(**{n: x for n, x in t.items() if n not in _TENSORS}, **scalars)
        backward = fn.backward
        if backward == "autograd":
            leaves = [t[n].detach().clone().requires_grad_(True) for n in ("q", "k", "v")]
            out = torch.zeros_like(t["out"])
            lse = torch.zeros_like(t["lse"]) if t["lse"] is not None else None
            with torch.enable_grad():
                fn(*leaves, out, lse, args)
                # No sequence wrote a row (all of them empty): every gradient is zero.
                grads = (torch.autograd.grad(out, leaves, t["dout"], allow_unused=True) if out.requires_grad
                         else (None, None, None))
            for name, g in zip(("dq", "dk", "dv"), grads):
                if g is None:
                    t[name].zero_()
                else:
                    t[name].copy_(g)
        else:
            backward(t["dout"], t["q"], t["k"], t["v"], t["out"], t["lse"], t["dq"], t["dk"], t["dv"], args)
        return ""
    except BaseException as exc:
        return _last_line(exc) or type(exc).__name__
)PY";

struct Loaded {
  FlashcheckKernel kernel{};
  std::string name, contract;
  PyObject* fn = nullptr;
};

PyObject* g_shim = nullptr;
std::map<std::string, std::unique_ptr<Loaded>>& loaded() {
  static std::map<std::string, std::unique_ptr<Loaded>> m;
  return m;
}

void put(char* error, size_t size, const std::string& msg) {
  if (size == 0) return;
  std::snprintf(error, size, "%s", msg.c_str());
}

// Starts the interpreter once. Returns "" or why it could not.
std::string start_python() {
  if (g_shim) return "";
  // Extension modules (torch's among them) resolve the C API from the global namespace: make libpython's
  // symbols global even though this plugin was opened locally.
  if (!::dlopen(FLASHCHECK_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) &&
      !::dlopen(FLASHCHECK_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL))
    return std::string("cannot load ") + FLASHCHECK_LIBPYTHON;
  const char* env = std::getenv("FLASHCHECK_PYTHON");
  const std::string python = env && *env ? env : FLASHCHECK_PYTHON_DEFAULT;
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;  // the harness's worker owns its signals
  config.parse_argv = 0;
  // The interpreter's own path: a virtual environment's pyvenv.cfg is found from it, and with it the
  // environment's site-packages.
  PyStatus st = PyConfig_SetBytesString(&config, &config.program_name, python.c_str());
  if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) return std::string("cannot start Python (") + python + "): " + (st.err_msg ? st.err_msg : "?");
  // Modules next to the working directory, and FLASHCHECK_PYTHONPATH, are importable as kernels.
  PyRun_SimpleString(
      "import os, sys\n"
      "sys.path[:0] = [p for p in os.environ.get('FLASHCHECK_PYTHONPATH', '').split(os.pathsep) if p] + [os.getcwd()]\n");
  PyObject* code = Py_CompileString(kShim, "<flashcheck python bridge>", Py_file_input);
  PyObject* module = code ? PyImport_ExecCodeModule("flashcheck_bridge", code) : nullptr;
  Py_XDECREF(code);
  if (!module) {
    PyErr_Print();
    return "the bridge's Python shim failed to load";
  }
  g_shim = module;
  return "";
}

// A DLPack capsule over a harness-owned tensor: torch.from_dlpack consumes it, and the deleter frees only
// the wrapper (the memory stays the harness's).
PyObject* capsule(const DLTensor* t) {
  if (!t) Py_RETURN_NONE;
  auto* m = new DLManagedTensor{*t, nullptr, [](DLManagedTensor* self) { delete self; }};
  return PyCapsule_New(m, "dltensor", [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {  // never consumed
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      m->deleter(m);
    }
  });
}

// The tensors and scalars of a forward call, as the shim takes them.
PyObject* forward_capsules(const FlashcheckRunArgs* a) {
  PyObject* caps = PyDict_New();
  const std::pair<const char*, DLTensor*> tensors[] = {
      {"q", a->q}, {"k", a->k}, {"v", a->v}, {"out", a->out}, {"lse", a->lse}, {"k_new", a->k_new},
      {"v_new", a->v_new}, {"cu_seqlens_q", a->cu_seqlens_q}, {"cu_seqlens_k", a->cu_seqlens_k},
      {"seqused_k", a->seqused_k}, {"leftpad_k", a->leftpad_k}, {"cache_seqlens", a->cache_seqlens},
      {"cu_seqlens_k_new", a->cu_seqlens_k_new}, {"block_table", a->block_table}};
  for (const auto& [name, t] : tensors) {
    PyObject* c = capsule(t);
    PyDict_SetItemString(caps, name, c);
    Py_DECREF(c);
  }
  return caps;
}

PyObject* forward_scalars(const FlashcheckRunArgs* a) {
  return Py_BuildValue(
      "{s:i,s:i,s:i,s:i,s:d,s:d,s:O,s:O,s:i,s:i}", "batch", a->batch, "max_seqlen_q", a->max_seqlen_q, "max_seqlen_k",
      a->max_seqlen_k, "page_size", a->page_size, "softmax_scale", static_cast<double>(a->softmax_scale), "softcap",
      static_cast<double>(a->softcap), "causal", a->is_causal ? Py_True : Py_False, "top_left",
      a->top_left ? Py_True : Py_False, "window_left", a->window_left, "window_right", a->window_right);
}

// Calls the shim's `method` on the kernel; the shim returns "" or the error's last traceback line.
int call_shim(const Loaded* k, const char* method, PyObject* caps, PyObject* scalars, char* error, size_t error_size) {
  PyObject* result = PyObject_CallMethod(g_shim, method, "OOO", k->fn, caps, scalars);
  Py_DECREF(caps);
  Py_DECREF(scalars);
  int rc = FLASHCHECK_OK;
  if (!result) {
    PyErr_Clear();
    put(error, error_size, "the Python bridge failed to call the kernel");
    rc = FLASHCHECK_ERROR;
  } else if (PyUnicode_Check(result) && PyUnicode_GetLength(result) > 0) {
    put(error, error_size, PyUnicode_AsUTF8(result));
    rc = FLASHCHECK_ERROR;
  }
  Py_XDECREF(result);
  return rc;
}

int run(const FlashcheckKernel* self, const FlashcheckRunArgs* a, char* error, size_t error_size) {
  return call_shim(static_cast<const Loaded*>(self->user_data), "call", forward_capsules(a), forward_scalars(a), error,
                   error_size);
}

int run_backward(const FlashcheckKernel* self, const FlashcheckBackwardArgs* a, char* error, size_t error_size) {
  PyObject* caps = forward_capsules(a->forward);
  for (const auto& [name, t] : {std::pair<const char*, DLTensor*>{"dout", a->dout}, {"dq", a->dq}, {"dk", a->dk}, {"dv", a->dv}}) {
    PyObject* c = capsule(t);
    PyDict_SetItemString(caps, name, c);
    Py_DECREF(c);
  }
  return call_shim(static_cast<const Loaded*>(self->user_data), "call_backward", caps, forward_scalars(a->forward), error,
                   error_size);
}

const FlashcheckKernel* resolve(const char* name, char* error, size_t error_size) {
  auto& all = loaded();
  if (auto it = all.find(name); it != all.end()) return &it->second->kernel;
  if (const std::string why = start_python(); !why.empty()) {
    put(error, error_size, why);
    return nullptr;
  }
  const std::string spec = std::string(name).substr(std::strlen("py:"));
  PyObject* r = PyObject_CallMethod(g_shim, "load", "s", spec.c_str());
  if (!r) {
    PyErr_Clear();
    put(error, error_size, "the Python bridge failed to load " + spec);
    return nullptr;
  }
  const bool ok = PyObject_IsTrue(PyTuple_GetItem(r, 0));
  PyObject* value = PyTuple_GetItem(r, 1);
  if (!ok) {
    put(error, error_size, PyUnicode_AsUTF8(value));
    Py_DECREF(r);
    return nullptr;
  }
  auto l = std::make_unique<Loaded>();
  l->name = name;
  l->fn = PyTuple_GetItem(value, 0);
  Py_INCREF(l->fn);
  l->contract = PyUnicode_AsUTF8(PyTuple_GetItem(value, 1));
  const bool has_backward = PyObject_IsTrue(PyTuple_GetItem(value, 2));
  Py_DECREF(r);
  l->kernel = {l->name.c_str(), l->contract.c_str(), run, l.get(), has_backward ? run_backward : nullptr};
  const FlashcheckKernel* k = &l->kernel;
  all.emplace(name, std::move(l));
  return k;
}

const FlashcheckPlugin kPlugin = {FLASHCHECK_PLUGIN_ABI_VERSION, "python-bridge", 0, nullptr, "py:", resolve};

}  // namespace

extern "C" __attribute__((visibility("default"))) const FlashcheckPlugin* flashcheck_plugin(void) { return &kPlugin; }
