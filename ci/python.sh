#!/usr/bin/env bash
# ci/python.sh — the Python package as a user installs it: `pip install .` into the Python whose torch flashcheck is
# built with (build/venv on CI), then pytest on python/tests against the installed package, from outside the source
# tree (test_installed.py checks that the import came from site-packages). The wheel's build reuses build/cpu, with
# its tests kept on; afterwards the folder installs for `cmake --install` as before.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
python=$(head -1 build/python-for-torch)
if ! "$python" -c "import pytest" 2>/dev/null; then
  "$python" -m pip install -q --disable-pip-version-check "pytest==9.2.0"
fi
"$python" -m pip install -q --disable-pip-version-check -C build-dir=build/cpu -C cmake.define.FLASHCHECK_TESTS=ON . \
  > build/pip-install.log 2>&1 || { cat build/pip-install.log; exit 1; }
# The build folder installs for `cmake --install` again (python/CMakeLists.txt drops pip's SKBUILD from the cache).
cmake -DCMAKE_INSTALL_PREFIX=/usr/local build/cpu > build/reconfigure-after-pip.log 2>&1 ||
  { cat build/reconfigure-after-pip.log; exit 1; }
! grep -q '^SKBUILD:' build/cpu/CMakeCache.txt || { echo "ci/python.sh: pip left SKBUILD in build/cpu's cache"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$python" -m pytest -q -p no:cacheprovider --junitxml="$root/build/python-junit.xml" "$root/python/tests"
