#!/usr/bin/env bash
# The SLURM templates, for real: a one-node cluster (local_cluster.sh), ci/slurm/submit.sh with a 4-task array
# of CPU shards (tiled-cpu and the planted mutant-top-left-causal, 2000 cases each over the 4 shards) and the
# dependent merge job; then checks that the merged totals are the sums of the shards' own journals and that
# the mutant's bug is reported once, its count summed over the shards that found it.
#
#   ci/slurm/test_local_cluster.sh [FLASHCHECK]     (default build/cpu/cli/flashcheck; as root)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export FLASHCHECK=${1:-$root/build/cpu/cli/flashcheck}
python=$(cat build/python-for-torch 2> /dev/null || command -v python3)
work="$root/build/slurm-test"
start=$(date +%s)
trap 'ci/slurm/local_cluster.sh stop' EXIT
cluster=$(ci/slurm/local_cluster.sh start)
eval "$cluster"
rm -rf "$work"
ci/slurm/submit.sh --dir "$work" --shards 4 --gpus-per-task 0 --cpus-per-task 1 -- \
  --kernel tiled-cpu --kernel mutant-top-left-causal --cases 2000 --seed 1
read -r array merge < "$work/logs/jobs"

state() { scontrol show job -o "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2; }
deadline=$(( $(date +%s) + 240 ))
while :; do
  s=$(state "$merge")
  case "$s" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "FAIL: the merge job is still '$s' after 240 s"; squeue; tail -n 20 "$work"/logs/*.log; exit 1
  fi
  sleep 1
done
for id in "${array}_0" "${array}_1" "${array}_2" "${array}_3" "$merge"; do
  line=$(scontrol show job -o "$id" | grep -o 'JobState=[A-Z_]* .*ExitCode=[0-9:]*' | sed 's/ .*ExitCode=/ exit /')
  echo "job $id: $line"
  case "$line" in JobState=COMPLETED*) ;; *) echo "FAIL: job $id did not complete"; tail -n 30 "$work"/logs/*.log; exit 1 ;; esac
done

"$python" - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
shards = {}
for path in sorted(glob.glob(f"{work}/shard-*/journal.jsonl")):
    for line in open(path):
        r = json.loads(line)
        if r["type"] == "chunk":
            s = shards.setdefault(r["kernel"], {"cases": 0, "failures": 0, "chunks": 0, "dirs": set()})
            s["cases"] += r["report"]["cases"]
            s["failures"] += r["report"]["failures"]
            s["chunks"] += 1
            s["dirs"].add(path)
merged = json.load(open(f"{work}/merged/report.json"))
assert len(merged["campaigns"]) == 4, [c["dir"] for c in merged["campaigns"]]
assert not merged["warnings"], merged["warnings"]
units = {u["kernel"]: u for u in merged["units"]}
for k, s in shards.items():
    u = units[k]
    assert (u["cases"], u["failures"]) == (s["cases"], s["failures"]), (k, u["cases"], u["failures"], s)
    print(f"{k}: merged {u['cases']} cases, {u['failures']} failing = the sum over {len(s['dirs'])} shard journals")
assert units["tiled-cpu"]["cases"] == 2000 and units["tiled-cpu"]["ok"], units["tiled-cpu"]
m = units["mutant-top-left-causal"]
sigs = [f["signature"] for f in m["findings"]]
assert len(sigs) == len(set(sigs)), sigs
assert sum(f["count"] for f in m["findings"]) == m["failures"] == 4, [(f["signature"], f["count"]) for f in m["findings"]]
assert len(m["findings"]) == 1, sigs
print(f"mutant-top-left-causal: one finding, count {m['findings'][0]['count']} ({m['findings'][0]['summary']}), "
      f"not one per shard")
PY
grep -q "data:image/png\|has no plots" "$work/merged/report.html" || { echo "FAIL: no report.html"; exit 1; }
echo "SLURM array + merge: ok in $(( $(date +%s) - start )) s"
