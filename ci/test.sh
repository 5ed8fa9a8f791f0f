#!/usr/bin/env bash
# ci/test.sh — the test suite, from a fresh checkout: set-up, CPU build, every ctest label, a sample of the hostile-input
# corpus (tools/hostile), the sanitizer lane (ci/asan.sh), the cross-check of the
# HF oracle against transformers (tools/hf_crosscheck: its self-test, then the check), and (where the CUDA toolkit
# is installed) a compile of the CUDA sources so that GPU code cannot rot on CPU-only CI.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash ci/build.sh cpu
ctest --preset cpu --output-on-failure
# Hostile input (docs/HARDENING.md): a stratified sample of the corpus, the hostile command lines and fault runs
# (workers killed mid-replay, a full disk where user namespaces allow a private tmpfs).
python3 tools/hostile/make_corpus.py --out build/hostile > /dev/null
python3 tools/hostile/run_corpus.py --flashcheck build/cpu/cli/flashcheck --corpus build/hostile --sample 100 --faults 2 \
  --json build/hostile/result.json
# The sanitizer lane: ASan + UBSan on the input readers, the worker protocol and one property test.
bash ci/asan.sh
# The cross-check's own test (a hand-written export it must accept or reject case by case; about half a minute),
# then the HF oracle against the real transformers 5.17.0: every model-level fixture and 200 generated cases.
bash tools/hf_crosscheck/run.sh --selftest --quiet
bash tools/hf_crosscheck/run.sh --quiet
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "[test] compiling the CUDA sources (cuda preset, nothing runs them here)"
  export PATH="$PATH:/usr/local/cuda/bin"
  cmake --preset cuda >build/configure-cuda.log 2>&1 || { cat build/configure-cuda.log; exit 1; }
  cmake --build --preset cuda
fi
