#!/usr/bin/env bash
# ci/build.sh [cpu|cuda] — set up (ci/setup.sh), configure and build a preset. Default: cpu.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
preset=${1:-cpu}
cd "$root"
bash ci/setup.sh ${FLASHCHECK_DEB_DIR:+--deb-dir "$FLASHCHECK_DEB_DIR"}
cmake --preset "$preset" >build/configure-"$preset".log 2>&1 || { cat build/configure-"$preset".log; exit 1; }
cmake --build --preset "$preset"
