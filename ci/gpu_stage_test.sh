#!/usr/bin/env bash
# ci/gpu.sh's backward-volume stage on a machine without a GPU: a stand-in flashcheck turns `campaign --gpus all
# --workers-per-gpu N` into N CPU workers, and a CPU kernel stands in for the CUDA ones. What a GPU visit relies on
# and cannot afford to find broken there: the campaigns in turn, their merge, the folders carried back as one
# tarball, and a second call (a fresh node given that tarball's folders) resuming them rather than starting over.
# usage: gpu_stage_test.sh FLASHCHECK WORKDIR   (run from the repository root)
set -uo pipefail
real=$1
work=$2
fail() { echo "FAIL: $*"; for f in "$work"/run*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }
rm -rf "$work"
mkdir -p "$work/bin/cli"
cat > "$work/bin/cli/flashcheck" <<EOF
#!/usr/bin/env bash
args=()
skip=0
for a in "\$@"; do
  if [ \$skip = 1 ]; then skip=0; continue; fi
  case "\$a" in --gpus) skip=1 ;; --workers-per-gpu) args+=(--workers) ;; *) args+=("\$a") ;; esac
done
exec "$real" "\${args[@]}"
EOF
chmod +x "$work/bin/cli/flashcheck"

# Call N of the stage, for S seconds: out$N/ is its $OUT; the campaign folders live in
# dir/, as GPU_BV_DIR names them on a node.
call() {
  OUT="$work/out$1" FLASHCHECK_PREBUILT="$work/bin" GPU_STAGES=backward-volume GPU_BV_KERNELS=tiled-cpu \
    GPU_BV_SECONDS=$2 GPU_BV_WORKERS=1 GPU_BV_RACE_WORKERS=0 GPU_BV_LARGE_WORKERS=0 GPU_BV_DIR="$work/dir" \
    GPU_BV_SEED=7 bash ci/gpu.sh > "$work/run$1.log" 2>&1
}
# field KEY: campaign `grads`'s KEY in the last merge's report.json.
field() {
  python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(next(c[sys.argv[2]] for c in r["campaigns"] if c["dir"].endswith("/grads-7")))' "$work/out$n/bv-merged/report.json" "$1"
}

n=1
call 1 3
grep -Eq 'backward at volume \(seed 7\) +[1-9][0-9]* cases, 0 failing' "$work/out1/table.txt" ||
  fail "first call: no row of judged cases in table.txt: $(tail -1 "$work/out1/table.txt")"
# (Listed to a file first: under pipefail, grep -q leaving early would fail the pipe through tar's SIGPIPE.)
tar tzf "$work/out1/bv-campaigns.tgz" > "$work/tarball.txt" 2>&1
grep -q 'grads-7/journal.jsonl' "$work/tarball.txt" || fail "the tarball lacks grads-7/journal.jsonl"
chunks1=$(field chunks_done)
used1=$(field seconds_used)
[ "$(field sessions)" = 1 ] || fail "first call: sessions $(field sessions), expected 1"

# A fresh node: the folders come back from the tarball, as a carried folder would bring them.
rm -rf "$work/dir"
mkdir -p "$work/dir"
tar xzf "$work/out1/bv-campaigns.tgz" -C "$work/dir"
n=2
call 2 3
[ "$(field sessions)" = 2 ] || fail "second call: sessions $(field sessions), expected 2 (it did not resume)"
chunks2=$(field chunks_done)
[ "$chunks2" -gt "$chunks1" ] || fail "second call: $chunks2 chunks done, not more than the first call's $chunks1"
# GPU_BV_SECONDS is this call's: the resumed campaign's budget is what it had used plus 3 s, not 3 s in all.
python3 -c 'import sys; used, budget = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not int(used) + 3 == budget)' \
  "$used1" "$(field seconds_budget)" || fail "second call: budget $(field seconds_budget) s, not the $used1 s used + 3"
echo "ok: two calls, $chunks1 then $chunks2 chunks of grads-7, resumed from the carried folders"
