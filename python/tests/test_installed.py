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


def test_the_tools_run_from_the_installed_package():
    for script, usage in (("flashcheck-crosscheck", "usage: crosscheck.py"),
                          ("flashcheck-campaign-report", "usage: campaign_report.py")):
        done = subprocess.run([str(Path(sys.executable).with_name(script)), "--help"], capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.startswith(usage), done.stdout + done.stderr
        assert "site-packages" in subprocess.run(  # the script ran is the package's copy, not the source tree's
            [sys.executable, "-c", "import flashcheck._engine as e; print(e.data_path('hf_live/live.py'))"],
            capture_output=True, text=True).stdout


def test_version_names_the_commit_torch_and_the_plugin_abi():
    done = subprocess.run([str(Path(sys.executable).with_name("flashcheck")), "--version"], capture_output=True, text=True)
    for part in ("commit ", "torch 2.11.0", "plugin ABI 2"):
        assert part in done.stdout, done.stdout
