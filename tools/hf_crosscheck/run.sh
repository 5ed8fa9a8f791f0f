#!/usr/bin/env bash
# tools/hf_crosscheck/run.sh [DIR] [crosscheck.py options] — cross-checks flashcheck's C++ emulation of Hugging Face
# transformers' attention against the real transformers 5.17.0 (CPU). Uses the torch interpreter that
# ci/setup.sh recorded in build/python-for-torch with transformers==5.17.0 installed side by side into build/hf/5.17.0
# (tools/hf_live/install_release.sh). Without DIR, the export is written afresh into build/hf-export:
#   build/cpu/cli/flashcheck export --out build/hf-export --fixtures fixtures --generated ${HF_CROSSCHECK_CASES:-200} --seed 1
# (every model-level fixture plus generated cases); a DIR given is used as it is.
# HF_PYTHON=/path/to/python uses that interpreter instead of build/python-for-torch. Other releases and profiles:
# tools/hf_crosscheck/matrix.sh.
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
# Eager is compared bit for bit, so the export and the check must take the same BLAS code path. MKL's default
# dispatch does not always (on an AMD EPYC, the C++ export and transformers' eager differed by up to 24 ulp on fp32
# GQA cases, docs/TRANSFORMERS.md); its conditional numerical reproducibility mode does.
export MKL_CBWR=${MKL_CBWR:-COMPATIBLE}

# The release goes side by side into build/hf/$want (never into the build's venv); torch comes from the
# interpreter of build/python-for-torch (HF_PYTHON overrides it).
bash "$root/tools/hf_live/install_release.sh" "$want" || { log "cannot install transformers $want"; exit 2; }
py() { "$root/tools/hf_live/python.sh" "$want" "$@"; }

if [ -n "$selftest" ]; then
  py "$root/tools/hf_crosscheck/selftest.py" "$@"
  exit $?
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

py "$root/tools/hf_crosscheck/crosscheck.py" "$dir" "$@"
