#!/usr/bin/env bash
# A campaign killed with SIGKILL midway and rerun gives the totals of one that ran uninterrupted, with the
# same seed and case budget: cases, failures, crashes (a planted crashing mutant restarts its workers),
# findings with their counts, coverage and the plots' statistics. Then the merge's HTML report: plots when
# the build's Python has matplotlib, else the note that says why there are none.
#
#   cli/campaign_resume_test.sh FLASHCHECK PYTHON WORKDIR
set -euo pipefail
fc=$1 py=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
args=(--kernel tiled-cpu --kernel mutant-segfault-tile-overrun --cases 3000 --seed 21 --workers 2 --max-len 96)
planned=12  # 6 chunks of 500 cases per kernel
chunks() { local n; n=$(grep -c '"type":"chunk"' "$1/journal.jsonl" 2>/dev/null) || true; echo "${n:-0}"; }
run() { "$fc" campaign --out "$@" > /dev/null 2>&1 || [ $? -eq 1 ]; }  # 1: findings (the mutant's crashes)

run "$work/whole" "${args[@]}"
"$fc" campaign --out "$work/cut" "${args[@]}" > "$work/cut-first.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  [ "$(chunks "$work/cut")" -ge 3 ] && break
  sleep 0.05
done
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
done_before=$(chunks "$work/cut")
echo "killed after $done_before of $planned chunks"
if [ "$done_before" -lt 3 ] || [ "$done_before" -ge "$planned" ]; then
  echo "FAIL: the kill did not land midway ($done_before of $planned chunks journaled)"; exit 1
fi
sleep 0.5
if pgrep -f -- "--out $work/cut " > /dev/null; then
  echo "FAIL: workers outlived their killed supervisor: $(pgrep -f -- "--out $work/cut " | tr '\n' ' ')"; exit 1
fi
"$fc" campaign --out "$work/cut" "${args[@]}" > "$work/cut-resume.log" 2>&1 || [ $? -eq 1 ]
grep -q "from earlier runs" "$work/cut-resume.log" || { cat "$work/cut-resume.log"; exit 1; }
[ "$(chunks "$work/cut")" -eq "$planned" ] || { echo "FAIL: $(chunks "$work/cut") chunks after the resume, want $planned"; exit 1; }

for d in whole cut; do "$fc" merge "$work/$d" --out "$work/$d-merged" > /dev/null 2> "$work/$d-merge.err" || [ $? -eq 1 ]; done
"$py" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def units(d):
    r = json.load(open(f"{work}/{d}-merged/report.json"))
    out = {}
    for u in r["units"]:
        out[u["kernel"]] = {k: u[k] for k in ("cases", "failures", "crashes", "coverage", "stats", "worst_bound_use")}
        out[u["kernel"]]["findings"] = sorted((f["signature"], f["count"]) for f in u["findings"])
    return out, r["campaigns"][0]["sessions"]
whole, s1 = units("whole")
cut, s2 = units("cut")
assert s1 == 1 and s2 == 2, (s1, s2)
assert whole["tiled-cpu"]["cases"] == 3000, whole["tiled-cpu"]["cases"]
assert whole["mutant-segfault-tile-overrun"]["crashes"] == 6, whole["mutant-segfault-tile-overrun"]["crashes"]
for k in whole:
    for field in whole[k]:
        if whole[k][field] != cut[k][field]:
            sys.exit(f"FAIL: {k} {field}: uninterrupted {whole[k][field]} != killed and resumed {cut[k][field]}")
print("resumed totals equal the uninterrupted run's:", {k: (v["cases"], v["crashes"]) for k, v in whole.items()})
PY

html="$work/cut-merged/report.html"
if "$py" -c "import matplotlib" 2> /dev/null; then
  [ "$(grep -o 'data:image/png;base64' "$html" | wc -l)" -ge 7 ] || { echo "FAIL: $html lacks its plots"; cat "$work/cut-merge.err"; exit 1; }
  # every plot has its caption; the throughput plot tells workers apart by their campaign directory
  [ "$(grep -o '<figcaption>' "$html" | wc -l)" = "$(grep -o 'data:image/png;base64' "$html" | wc -l)" ] ||
    { echo "FAIL: $html has plots without captions"; exit 1; }
  grep -q "one line per worker (campaign directory: device @ host)" "$html" || { echo "FAIL: no throughput caption"; exit 1; }
  echo "report.html has $(grep -o 'data:image/png;base64' "$html" | wc -l) plots, each with its caption"
else
  grep -q "has no plots: matplotlib is not installed" "$work/cut-merge.err" || { echo "FAIL: no note on the missing plots"; exit 1; }
  grep -q "has no plots" "$html" || { echo "FAIL: $html does not say why it has no plots"; exit 1; }
  echo "report.html has no plots (no matplotlib for $py) and says so"
fi
