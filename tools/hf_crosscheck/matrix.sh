#!/usr/bin/env bash
# tools/hf_crosscheck/matrix.sh [--long] [--cases N] [--out FILE] [--install-only] — every HF flash-path profile (core/hf_profiles.cc)
# checked against real transformers releases of the range it names: each release installed side by side
# (tools/hf_live/install_release.sh, never into the build's venv), `flashcheck export --profile P` of the fixtures'
# model cases, the realistic scenarios (tools/hf_crosscheck/scenarios) and N generated cases (default 150, seed 1),
# then crosscheck.py under that release (eager bitwise, the flash dispatch call by call, generate()'s own kwargs
# where the release derives them, the SDPA path's call and output). Prints a markdown table (release, profile, cases, agree) and writes it to FILE
# (default build/hf-matrix.md). Exit 1 when any release disagrees with its profile, 2 on set-up failure.
#   default: one release per profile (CI, ci/test.sh); --long: also every boundary of every profile's claim, and a few
#   releases inside the ranges (ci/nightly.sh; docs/TRANSFORMERS.md).
# Profiles of no release (hf-2025-08: a main-branch state; fastchat-2023: a downstream patch) are not in the matrix.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cases=100
out=build/hf-matrix.md
long=
install_only=
while [ $# -gt 0 ]; do
  case "$1" in
    --long) long=1; shift ;;
    --cases) cases=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --install-only) install_only=1; shift ;;
    *) echo "matrix.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# profile:release pairs; the first per profile is CI's.
pairs=(hf-main:5.17.0 hf-5.13:5.14.1 hf-4.56:4.57.6 hf-4.55.4:4.55.4 hf-4.55.2:4.55.2 hf-4.55:4.55.0
       hf-4.53.3:4.53.3 hf-4.53:4.53.0)
cli=build/cpu/cli/flashcheck
if [ -n "$long" ]; then
  # Every boundary of every profile's claim (`flashcheck list --profiles`: first and last release, and those of its
  # SDPA range), so that a range that claims too much is caught where it ends; then releases inside the ranges.
  [ -x "$cli" ] || { echo "matrix.sh: $cli is missing: build it first (ci/build.sh cpu)" >&2; exit 2; }
  read -r -a boundaries < <("$cli" list --profiles --json | python3 -c '
import json, sys
pairs = []
for p in json.load(sys.stdin):
    for key in ("first_release", "last_release", "sdpa_first_release", "sdpa_last_release"):
        if p[key] and p["name"] + ":" + p[key] not in pairs:
            pairs.append(p["name"] + ":" + p[key])
print(" ".join(pairs))')
  for pair in "${boundaries[@]}" hf-4.56:4.56.2 hf-4.56:5.0.0 hf-4.55:4.54.1 hf-4.53.3:4.53.2; do
    [[ " ${pairs[*]} " == *" $pair "* ]] || pairs+=("$pair")
  done
fi
# The same BLAS code path for the export and the check (eager is compared bit for bit): tools/hf_crosscheck/run.sh.
export MKL_CBWR=${MKL_CBWR:-COMPATIBLE}
[ -x "$cli" ] || { echo "matrix.sh: $cli is missing: build it first (ci/build.sh cpu)" >&2; exit 2; }
start=$(date +%s)
versions=$(printf '%s\n' "${pairs[@]}" | cut -d: -f2 | sort -u)
# Installs are network-bound: three at a time.
printf '%s\n' $versions | xargs -P 3 -I{} bash tools/hf_live/install_release.sh {} || { echo "matrix.sh: install failed" >&2; exit 2; }
[ -z "$install_only" ] || exit 0  # ci/test.sh downloads the releases while the sanitizer lane compiles
installed=$(date +%s)
rows=()
bad=0
for pair in "${pairs[@]}"; do
  p=${pair%%:*}
  v=${pair##*:}
  dir=build/hf-matrix/$p
  # The stamp names the export's contents and BLAS mode too: an export written before the SDPA records would skip that
  # check, and one written without MKL_CBWR may not match the check bit for bit.
  stamp="$cases cases, flash+sdpa, MKL_CBWR=$MKL_CBWR"
  if [ ! -f "$dir/manifest.json" ] || [ "$(cat "$dir/.cases" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$dir"
    "$cli" export --out "$dir" --fixtures fixtures tools/hf_crosscheck/scenarios --generated "$cases" --seed 1 --profile "$p" >/dev/null
    echo "$stamp" > "$dir/.cases"
  fi
  set +e
  summary=$(tools/hf_live/python.sh "$v" tools/hf_crosscheck/crosscheck.py "$dir" --quiet 2>&1 | tee "build/hf-matrix/$p-$v.log" | tail -1)
  rc=${PIPESTATUS[0]}
  set -e
  n=$(echo "$summary" | sed -n 's/^hf_crosscheck: \([0-9]*\) cases, \([0-9]*\) agree.*/\1/p')
  a=$(echo "$summary" | sed -n 's/^hf_crosscheck: \([0-9]*\) cases, \([0-9]*\) agree.*/\2/p')
  if [ -z "$n" ]; then
    echo "matrix.sh: $p on $v gave no summary (rc $rc); see build/hf-matrix/$p-$v.log" >&2
    bad=1
    rows+=("| $v | $p | - | error (rc $rc) |")
    continue
  fi
  [ "$rc" = 0 ] || bad=1
  rows+=("| $v | $p | $n | $a ($(( 100 * a / n ))%) |")
  echo "[matrix] $p on transformers $v: $a of $n agree" >&2
done
end=$(date +%s)
mkdir -p "$(dirname "$out")"
{
  echo "| release | profile | cases | agree |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "installs $((installed - start)) s, checks $((end - installed)) s (generated cases per release: $cases, seed 1)"
} | tee "$out"
exit $bad
