"""`flashcheck` on PATH after `pip install`: the engine's command line, as the reproduce lines print it."""
import os
import sys

from . import _engine


def main() -> None:
    try:
        exe = _engine.binary()
    except _engine.EngineNotFound as e:
        sys.exit(f"flashcheck: {e}")
    os.execve(str(exe), [str(exe), *sys.argv[1:]], _engine.environment(inherit_path=False))


if __name__ == "__main__":
    main()
