#!/usr/bin/env bash
# tools/hf_live/install_release.sh VERSION [VERSION...] — installs transformers==VERSION from PyPI side by side
# into build/hf/VERSION (pip --target), never into the build's venv. Each release gets the dependencies its own
# metadata pins (huggingface_hub < 1.0 for 4.x, >= 1.0 for 5.x, its tokenizers and safetensors), so releases do
# not fight over one environment. torch is not installed: the interpreter's own torch (build/python-for-torch,
# or HF_PYTHON) is found after the release's folder on PYTHONPATH:
#   PYTHONPATH=build/hf/4.55.0 build/venv/bin/python3 -c 'import transformers'
# tools/hf_live/python.sh VERSION wraps that. Idempotent: a folder whose transformers imports at the wanted
# version is kept. Prints the seconds each install took (CI's budget counts them).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
[ $# -gt 0 ] || { echo "usage: $0 VERSION [VERSION...]" >&2; exit 2; }

if [ -n "${HF_PYTHON:-}" ]; then
  py=$HF_PYTHON
elif [ -s build/python-for-torch ]; then
  py=$(cat build/python-for-torch)
else
  echo "install_release.sh: build/python-for-torch is missing: run ci/setup.sh first (or set HF_PYTHON)" >&2
  exit 2
fi

for v in "$@"; do
  case "$v" in
    [0-9]*.[0-9]*.[0-9]*) ;;
    *) echo "install_release.sh: '$v' is not a release version like 4.55.0" >&2; exit 2 ;;
  esac
  dir=build/hf/$v
  if [ -f "$dir/.installed" ] &&
     PYTHONPATH="$dir" "$py" -c "import sys, transformers; sys.exit(transformers.__version__ != '$v')" 2>/dev/null; then
    echo "[hf-install] transformers $v: already in $dir" >&2
    continue
  fi
  start=$(date +%s.%N)
  rm -rf "$dir"
  mkdir -p "$dir"
  # --no-deps would leave the release's pins unmet; torch is excluded by the release itself (an extra).
  "$py" -m pip install -q --disable-pip-version-check --no-warn-conflicts --no-compile --target "$dir" "transformers==$v" >&2
  # pip --target may bring numpy along (some releases require it); the interpreter's own torch must win its
  # ABI, and numpy 2 serves both, so nothing is removed.
  PYTHONPATH="$dir" "$py" -c "import sys, transformers, torch; sys.exit(transformers.__version__ != '$v')" ||
    { echo "install_release.sh: transformers $v does not import from $dir" >&2; exit 1; }
  touch "$dir/.installed"
  printf '[hf-install] transformers %s: installed into %s in %.1f s\n' "$v" "$dir" \
    "$(echo "$(date +%s.%N) - $start" | bc)" >&2
done
