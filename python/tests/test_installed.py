"""The package under test is the installed one, not this source tree (ci/python.sh runs pytest from elsewhere)."""
import subprocess
import sys
import sysconfig
from pathlib import Path

import flashcheck


def test_the_package_is_imported_from_site_packages():
    assert Path(flashcheck.__file__).resolve().is_relative_to(Path(sysconfig.get_paths()["purelib"]).resolve())


def test_the_console_script_runs_the_engine_it_carries():
    done = subprocess.run([str(Path(sys.executable).with_name("flashcheck")), "--version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flashcheck " + flashcheck.__version__)
