"""flashcheck.check: fuzz a Python attention kernel with the engine's properties, in its isolated workers.

The kernel follows the ``py:`` convention (docs/PYTHON_KERNELS.md): ``fn(q, k, v, out, lse, args)`` writes ``out``
(and ``lse``) in place, and its contract (what it supports) is ``fn.contract``, the module's ``CONTRACT``, or the
``contract=`` given here. The engine imports the kernel by name in a worker process: it must be defined at the top
level of a module that this process's sys.path reaches (a test file collected by pytest is), or of the script run.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Optional, Union

from . import _engine


class CheckFailed(AssertionError):
    """flashcheck found a discrepancy (or a crash) in the kernel; ``report`` holds everything."""

    def __init__(self, report: "Report"):
        super().__init__(report.message())
        self.report = report


class CheckError(RuntimeError):
    """The check could not run: bad arguments, a kernel that cannot be imported, no case the kernel supports."""


@dataclass
class Finding:
    """One failure, minimized: ``case`` is the fixture-format case, ``fixture`` the file it was saved to."""
    kernel: str
    property: str
    summary: str
    line: str
    case: dict
    fixture: str
    reproduce: str
    count: int

    def message(self) -> str:
        return (f"{self.property}: {self.line}\n"
                f"  minimized case: {self.summary}\n"
                f"  case: {json.dumps(self.case, separators=(',', ':'))}\n"
                f"  fixture: {self.fixture}\n"
                f"  reproduce: {self.reproduce}")


@dataclass
class Report:
    """The engine's fuzz reports, one per property (``raw``), and what they found."""
    kernel: str
    seed: int
    out: str
    raw: List[dict]
    findings: List[Finding] = field(default_factory=list)
    rerun: str = ""  # how to draw the same cases again: "seed=S", or the pytest option

    @property
    def cases(self) -> int:
        return sum(r["cases"] for r in self.raw)

    @property
    def unsupported(self) -> int:
        return sum(r["unsupported"] for r in self.raw)

    @property
    def crashes(self) -> int:
        return sum(r["crashes"] for r in self.raw)

    @property
    def coverage_missing(self) -> dict:
        return {r["property"]: r["coverage_missing"] for r in self.raw if r["coverage_missing"]}

    @property
    def not_applicable(self) -> dict:
        """Properties that did not run, with the reason (a forward-only kernel's gradient properties under "all")."""
        return {r["property"]: r["not_applicable"] for r in self.raw if r.get("not_applicable")}

    @property
    def passed(self) -> bool:
        return not self.findings and self.crashes == 0

    def message(self) -> str:
        head = (f"flashcheck: {self.kernel}: {len(self.findings)} finding(s), {self.crashes} crash(es) in "
                f"{self.cases} cases (seed {self.seed}; rerun with {self.rerun or f'seed={self.seed}'})")
        return "\n".join([head] + [f.message() for f in self.findings])

    def __str__(self) -> str:
        if not self.passed:
            return self.message()
        props = ", ".join(f"{r['property']} {r['cases']}" for r in self.raw)
        return f"flashcheck: {self.kernel}: pass ({props} cases; {self.unsupported} unsupported; seed {self.seed})"


def _shim(fn, contract, backward, folder: Path) -> str:
    """A module that presents `fn` under a contract (and backward) given here, importable by the engine."""
    code = Path(fn.__code__.co_filename).resolve()
    key = json.dumps([str(code), fn.__qualname__, contract, repr(backward)], sort_keys=True, default=repr)
    name = f"flashcheck_shim_{hashlib.sha1(key.encode()).hexdigest()[:12]}"
    lines = ["import importlib.util",
             f"_spec = importlib.util.spec_from_file_location({'_flashcheck_target_' + name!r}, {str(code)!r})",
             "_module = importlib.util.module_from_spec(_spec)",
             "_spec.loader.exec_module(_module)",
             "_target = _module",
             *[f"_target = getattr(_target, {part!r})" for part in fn.__qualname__.split(".")],
             "def attention(q, k, v, out, lse, args):",
             "    return _target(q, k, v, out, lse, args)",
             f"attention.contract = {contract!r} or getattr(_target, 'contract', None) or getattr(_module, 'CONTRACT', None)"]
    if backward == "autograd":
        lines.append("attention.backward = 'autograd'")
    elif backward is not None:
        lines.append(f"attention.backward = getattr(_module, {backward.__name__!r})")
    else:
        lines.append("if getattr(_target, 'backward', None) is not None: attention.backward = _target.backward")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text("\n".join(lines) + "\n")
    return f"py:{name}:attention"


def _importable_name(fn) -> Optional[str]:
    """`module:qualname` when the engine's interpreter finds `fn` by name, as this process would."""
    module = fn.__module__
    if module in (None, "__main__") or "<locals>" in fn.__qualname__:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    here = getattr(sys.modules.get(module), "__file__", None)
    if spec is None or spec.origin is None or here is None or Path(spec.origin).resolve() != Path(here).resolve():
        return None
    return f"{module}:{fn.__qualname__}"


def kernel_spec(fn, contract=None, backward=None, folder: Optional[Path] = None):
    """The engine's name for `fn` (`py:module:function`) and the extra import path it needs."""
    if isinstance(fn, str):
        if contract is not None or backward is not None:
            raise CheckError("contract= and backward= apply to a function, not to a kernel name")
        return fn, []
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise CheckError(f"{fn!r}: expected a Python function or a kernel name")
    if "<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>":
        raise CheckError(f"{fn.__qualname__}: the engine imports the kernel in a worker process, so it must be "
                         "defined at the top level of a module (not a lambda or a nested function)")
    name = _importable_name(fn)
    if name and contract is None and backward is None:
        return f"py:{name}", []
    folder = folder or Path(tempfile.mkdtemp(prefix="flashcheck-shim-"))
    return _shim(fn, contract, backward, folder), [folder]


def _as_list(x) -> List:
    if x is None:
        return []
    if isinstance(x, (str, int)):
        return [x]
    return list(x)


def check(fn, properties: Union[str, Iterable[str]] = "all", cases: int = 200, seed: Optional[int] = None,
          dtype=None, head_dim=None, device: Optional[str] = None, contract: Optional[dict] = None, backward=None,
          require: Optional[str] = None, max_len: Optional[int] = None, timeout: float = 120,
          out: Union[str, os.PathLike, None] = None, raise_on_failure: bool = True, _rerun: str = "") -> Report:
    """Fuzzes `fn` with `properties` ("all", one name or a list; `flashcheck fuzz --help` lists them), `cases` per
    property, from `seed` (random when None; the failure message names it). `dtype` and `head_dim` narrow the
    contract's ("bf16" or a list; 128 or a list); `device` ("cpu" or "cuda") overrides the contract's; `require`
    steers the generator ("gqa=3,leftpad,causal"). Failures are minimized and saved under `out` (a new temporary
    folder by default). Raises CheckFailed with the minimized cases, reproduce lines and fixture paths, unless
    raise_on_failure is False; raises CheckError when nothing could be judged."""
    __tracebackhide__ = True
    seed = random.randrange(1, 2**31) if seed is None else int(seed)
    out_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="flashcheck-"))
    if device is not None:
        base = contract if contract is not None else (getattr(fn, "contract", None) or
                                                      getattr(sys.modules.get(getattr(fn, "__module__", "")), "CONTRACT", None))
        if base is None:
            raise CheckError("device= needs the kernel's contract (fn.contract, the module's CONTRACT or contract=)")
        contract = dict(base, device=device)
    spec, extra = kernel_spec(fn, contract, backward, out_dir / "kernels")
    args = ["fuzz", "--kernel", spec, "--cases", int(cases), "--seed", seed, "--json", "--out", out_dir / "found",
            "--timeout", timeout]
    props = ["all"] if properties == "all" else _as_list(properties)
    for p in props:
        args += ["--property", p]
    for d in _as_list(dtype):
        args += ["--dtype", d]
    for h in _as_list(head_dim):
        args += ["--head-dim", int(h)]
    if require:
        args += ["--require", require]
    if max_len is not None:
        args += ["--max-len", int(max_len)]
    done = _engine.run(args, extra_paths=extra)
    if done.returncode not in (0, 1):
        raise CheckError(f"flashcheck {shlex.join(map(str, args))} exited {done.returncode}:\n{done.stderr.strip()}")
    try:
        raw = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise CheckError(f"flashcheck's report is not JSON ({e}); its stderr:\n{done.stderr.strip()}") from None
    env_prefix = f"FLASHCHECK_PYTHONPATH={shlex.quote(os.pathsep.join(map(str, extra)))} " if extra else ""
    report = Report(kernel=spec, seed=seed, out=str(out_dir), raw=raw, rerun=_rerun)
    for r in raw:
        for f in r["findings"]:
            fixture = f.get("fixture") or ""
            reproduce = (f"{env_prefix}flashcheck replay {shlex.quote(fixture)} --kernel {shlex.quote(spec)}" if fixture
                         else f"{env_prefix}flashcheck fuzz --kernel {shlex.quote(spec)} --property {r['property']} "
                              f"--seed {seed} --reproduce {shlex.quote(f['reproduce'])}")
            report.findings.append(Finding(kernel=spec, property=r["property"], summary=f["summary"], line=f["line"],
                                           case=f.get("case") or f.get("model_case") or {}, fixture=fixture,
                                           reproduce=reproduce, count=f.get("count", 1)))
    if raw and len(report.not_applicable) == len(raw):
        raise CheckError(f"{spec}: no property applies: " +
                         "; ".join(f"{p}: {why}" for p, why in report.not_applicable.items()))
    if report.cases == 0 and report.passed:
        reasons = sorted({why for r in raw for why in (r.get("unsupported_reasons") or {})})
        raise CheckError(f"{spec}: no case was judged ({report.unsupported} unsupported"
                         + (f": {'; '.join(reasons[:5])}" if reasons else "") + ")")
    if raise_on_failure and not report.passed:
        raise CheckFailed(report)
    return report
