"""flashcheck: differential testing and verification of flash-attention kernels, from Python.

    import flashcheck
    flashcheck.check(my_attention, properties="all", cases=500)     # fuzz a py: kernel, shrink failures
    ref = flashcheck.attention_ref(q, k, v, causal=True, dout=do)    # fp64 output, LSE and gradients
    flashcheck.assert_close(out, q, k, v, causal=True, lse=lse)      # the tolerance rule, with its evidence

The pytest plugin (flashcheck.pytest_plugin, registered by installing the package) adds the ``flashcheck``
fixture, ``--flashcheck-cases``/``--flashcheck-seed``, and collects fixture files as tests. docs/PYTHON.md.
"""
from importlib import metadata as _metadata

from . import grid
from .check import CheckError, CheckFailed, Finding, Report, check
from .reference import (Reference, ToleranceError, Verdict, assert_close, assert_gradients_close, attention_ref,
                        judge, judge_gradients)

try:
    __version__ = _metadata.version("flashcheck")
except _metadata.PackageNotFoundError:  # imported from a source tree
    __version__ = "unknown"

__all__ = ["grid", "check", "Report", "Finding", "CheckFailed", "CheckError", "attention_ref", "Reference", "judge",
           "judge_gradients", "assert_close", "assert_gradients_close", "Verdict", "ToleranceError", "__version__"]
