#!/usr/bin/env bash
# ci/test.sh — the test suite, from a fresh checkout: set-up, CPU build, every ctest label, the cross-check of the
# HF oracle against transformers (tools/hf_crosscheck: its self-test, then the profile/release matrix), and (where the CUDA toolkit
# is installed) a compile of the CUDA sources so that GPU code cannot rot on CPU-only CI.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash ci/build.sh cpu
ctest --preset cpu --output-on-failure
# The cross-check's own test (a hand-written export it must accept or reject case by case; about half a minute),
# then every HF profile against a real release of its range, installed side by side (docs/TRANSFORMERS.md).
bash tools/hf_crosscheck/run.sh --selftest --quiet
bash tools/hf_crosscheck/matrix.sh
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "[test] compiling the CUDA sources (cuda preset, nothing runs them here)"
  export PATH="$PATH:/usr/local/cuda/bin"
  cmake --preset cuda >build/configure-cuda.log 2>&1 || { cat build/configure-cuda.log; exit 1; }
  cmake --build --preset cuda
fi
