#!/usr/bin/env bash
# ci/nightly.sh — the long checks that do not fit CI's budget, for a nightly schedule (.github/workflows/nightly.yml,
# or a cron entry: `17 3 * * * cd /path/to/flashcheck && bash ci/nightly.sh > nightly.log 2>&1`): the CPU build, then
# every transformers profile against every boundary release of its claim and a few inside it
# (tools/hf_crosscheck/matrix.sh --long, about 20 releases installed side by side), and the full sanitizer lane
# (ci/asan.sh --full). Exit 1 when a release disagrees with the profile that claims it or a sanitizer reports.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash ci/build.sh cpu
bash tools/hf_crosscheck/matrix.sh --long --out build/hf-matrix-long.md
# The whole sanitizer lane: CI's, plus the worker protocol and every property against the mutants under ASan + UBSan.
bash ci/asan.sh --full
