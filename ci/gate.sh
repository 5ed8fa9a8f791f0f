#!/usr/bin/env bash
# ci/gate.sh [gate options] — the main job, from a fresh checkout: set-up, build, then `flashcheck gate`
# (fixture corpus, a bounded run of every property on every kernel, the mutant kill run). On a machine
# with an NVIDIA GPU the cuda preset is built and the CUDA kernels join the CPU ones. Reports land in
# out/gate (junit.xml, summary.md, report.json); the exit code is the gate's.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
preset=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  preset=cuda
  export PATH="$PATH:/usr/local/cuda/bin"
fi
bash ci/build.sh "$preset"
exec "build/$preset/cli/flashcheck" gate --out out/gate "$@"
