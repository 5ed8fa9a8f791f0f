"""Console scripts for the tools that ship with the engine (installed under <prefix>/share/flashcheck), run by this
interpreter: it must have what the tool needs (transformers for the cross-check, matplotlib for the report).

  flashcheck-crosscheck ARGS       the HF oracle against the installed transformers (docs/TRANSFORMERS.md)
  flashcheck-campaign-report ARGS  a merged campaign's plots (what `flashcheck merge` runs for report.html)
"""
import os
import sys

from . import _engine


def _run(relative: str) -> None:
    try:
        script = _engine.data_path(relative)
    except _engine.EngineNotFound as e:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {e}")
    os.execv(sys.executable, [sys.executable, str(script), *sys.argv[1:]])


def crosscheck() -> None:
    _run("hf_crosscheck/crosscheck.py")


def campaign_report() -> None:
    _run("campaign_report.py")
