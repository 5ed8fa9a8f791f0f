#!/usr/bin/env bash
# tools/hf_crosscheck/run.sh [DIR] [crosscheck.py options] — cross-checks flashcheck's C++ emulation of Hugging Face
# transformers' attention against the real transformers 5.17.0 (CPU). Uses the torch interpreter that
# ci/setup.sh recorded in build/python-for-torch and installs transformers==5.17.0 into it from PyPI unless it is
# already there. Without DIR, the export is written afresh into build/hf-export:
#   build/cpu/cli/flashcheck export --out build/hf-export --fixtures fixtures --generated ${HF_CROSSCHECK_CASES:-200} --seed 1
# (every model-level fixture plus generated cases); a DIR given is used as it is.
# transformers 5.17.0 needs safetensors>=0.8.0, so pip upgrades the environment's safetensors 0.7.0 (same file
# bytes). HF_CROSSCHECK_PYTHON=/path/to/python uses that interpreter instead of build/python-for-torch.
# Exit status is crosscheck.py's: 0 all cases agree, 1 some case differs, 2 bad input or set-up failure.
# tools/hf_crosscheck/run.sh --selftest [selftest.py options] sets up the same interpreter and runs selftest.py
# instead (the cross-check against a hand-written export, no flashcheck build needed; about half a minute).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
want=5.17.0

selftest=
dir=
if [ $# -gt 0 ] && [ "$1" = --selftest ]; then
  selftest=1
  shift
elif [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  dir=$1
  shift
fi

log() { printf '[hf-crosscheck] %s\n' "$*" >&2; }

if [ -n "${HF_CROSSCHECK_PYTHON:-}" ]; then
  py=$HF_CROSSCHECK_PYTHON            # another interpreter with torch (transformers is installed into it too)
elif [ -s build/python-for-torch ]; then
  py=$(cat build/python-for-torch)
else
  log "build/python-for-torch is missing: run ci/setup.sh first"
  exit 2
fi
if ! "$py" -c 'import torch' 2>/dev/null; then
  log "$py cannot import torch: run ci/setup.sh"
  exit 2
fi

has_transformers() {
  "$py" -c "import sys, transformers; sys.exit(0 if transformers.__version__ == '$want' else 1)" 2>/dev/null
}
if ! has_transformers; then
  log "installing transformers==$want from PyPI next to torch ($py)"
  "$py" -m pip install -q --disable-pip-version-check "transformers==$want"
  has_transformers || { log "transformers $want is still not importable with $py"; exit 2; }
fi

if [ -n "$selftest" ]; then
  exec "$py" "$root/tools/hf_crosscheck/selftest.py" "$@"
fi

if [ -z "$dir" ]; then
  dir=build/hf-export
  cli=build/cpu/cli/flashcheck
  if [ ! -x "$cli" ]; then
    log "$cli is missing: build it first (ci/build.sh cpu)"
    exit 2
  fi
  n=${HF_CROSSCHECK_CASES:-200}
  log "writing the export: $cli export --out $dir --fixtures fixtures --generated $n --seed 1"
  rm -rf "$dir"
  mkdir -p "$dir"
  "$cli" export --out "$dir" --fixtures fixtures --generated "$n" --seed 1
elif [ ! -f "$dir/manifest.json" ]; then
  log "$dir/manifest.json is missing: write it with flashcheck export --out $dir"
  exit 2
fi

exec "$py" "$root/tools/hf_crosscheck/crosscheck.py" "$dir" "$@"
