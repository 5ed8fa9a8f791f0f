"""Finds the flashcheck executable that came with this package and runs it.

The wheel carries the engine under the package (``bin/flashcheck``, the Python bridge under ``lib/flashcheck``, the
Python kernels under ``share/flashcheck/python``); ``cmake --install`` puts the package itself under
``<prefix>/share/flashcheck/python``, three levels below the prefix whose ``bin/`` holds the executable.
``FLASHCHECK_BINARY`` names another executable (a build tree's ``build/cpu/cli/flashcheck``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


class EngineNotFound(RuntimeError):
    pass


def binary() -> Path:
    """The flashcheck executable this package runs."""
    named = os.environ.get("FLASHCHECK_BINARY")
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise EngineNotFound(f"FLASHCHECK_BINARY={named}: not an executable file")
        return path
    for candidate in (_PACKAGE / "bin" / "flashcheck", _PACKAGE.parents[3] / "bin" / "flashcheck"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise EngineNotFound(f"no flashcheck executable beside the package ({_PACKAGE}): install the package with "
                         "`pip install --no-build-isolation .` from the repository, or set FLASHCHECK_BINARY")


def data_path(relative: str) -> Path:
    """A file installed with the engine under <prefix>/share/flashcheck (the transformers tools, the report script)."""
    path = binary().parent.parent / "share" / "flashcheck" / relative
    if not path.exists():
        raise EngineNotFound(f"{path}: not installed with the engine")
    return path


def environment(extra_paths=(), inherit_path=True) -> dict:
    """The engine's environment: its Python bridge runs this interpreter (FLASHCHECK_PYTHON) and imports kernels
    from this process's sys.path (FLASHCHECK_PYTHONPATH), so that a kernel importable here is importable there."""
    env = dict(os.environ)
    env.setdefault("FLASHCHECK_PYTHON", sys.executable)
    paths = [str(p) for p in extra_paths]
    paths += [p for p in env.get("FLASHCHECK_PYTHONPATH", "").split(os.pathsep) if p]
    if inherit_path:
        paths += [p if p else os.getcwd() for p in sys.path if not p or Path(p).is_dir()]
    env["FLASHCHECK_PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def run(args, extra_paths=(), timeout=None) -> subprocess.CompletedProcess:
    """Runs `flashcheck ARGS`, capturing its output (text)."""
    return subprocess.run([str(binary()), *map(str, args)], env=environment(extra_paths), capture_output=True,
                          text=True, errors="replace", timeout=timeout)
