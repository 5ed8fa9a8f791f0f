#!/usr/bin/env bash
# Submits a flashcheck campaign to SLURM: a job array of SHARDS tasks (task i runs shard i/SHARDS, with
# GPUS GPUs of its own), then a merge job that starts when every task has ended. Prints both job ids.
#
#   ci/slurm/submit.sh --dir DIR [--shards N] [--gpus-per-task G] [--cpus-per-task C] [--time-limit T]
#                      [--sbatch "extra sbatch options"] -- CAMPAIGN OPTIONS...
#
#   ci/slurm/submit.sh --dir /shared/fc-run1 --shards 8 --gpus-per-task 1 -- \
#       --kernel flash-fwd-varlen --kernel efficient-fwd-varlen --time 3600 --seed 7
#
# DIR must be on a file system every node sees. FLASHCHECK (default: build/cuda/cli/flashcheck, else
# build/cpu/cli/flashcheck under the current directory) is the executable the tasks run. Resubmitting the
# same command resumes every shard where it stopped; tasks are also requeued after a node failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir="" shards=4 gpus=1 cpus=2 time_limit="" extra=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --gpus-per-task) gpus=$2; shift 2 ;;
    --cpus-per-task) cpus=$2; shift 2 ;;
    --time-limit) time_limit=$2; shift 2 ;;
    --sbatch) extra=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "ci/slurm/submit.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$dir" ] || { echo "ci/slurm/submit.sh: give --dir DIR (a directory every node sees)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "ci/slurm/submit.sh: give the campaign options after --" >&2; exit 2; }
if [ -z "${FLASHCHECK:-}" ]; then
  for f in build/cuda/cli/flashcheck build/cpu/cli/flashcheck; do [ -x "$f" ] && { FLASHCHECK=$PWD/$f; break; }; done
fi
[ -x "${FLASHCHECK:-}" ] || { echo "ci/slurm/submit.sh: no flashcheck executable: build one or set FLASHCHECK" >&2; exit 2; }
mkdir -p "$dir/logs"
dir=$(cd "$dir" && pwd)
export FLASHCHECK FLASHCHECK_GPUS_PER_TASK=$gpus
resources=(--ntasks=1 --cpus-per-task="$cpus")
[ "$gpus" -gt 0 ] && resources+=(--gpus-per-task="$gpus")
[ -n "$time_limit" ] && resources+=(--time="$time_limit")
# shellcheck disable=SC2086  # $extra is a list of options
array=$(sbatch --parsable --export=ALL --array="0-$(( shards - 1 ))" "${resources[@]}" $extra \
  --output="$dir/logs/shard-%a.log" "$here/campaign.sbatch" "$dir" "$@")
array=${array%%;*}
# shellcheck disable=SC2086
merge=$(sbatch --parsable --export=ALL --dependency="afterany:$array" --cpus-per-task=1 $extra \
  --output="$dir/logs/merge.log" "$here/merge.sbatch" "$dir")
merge=${merge%%;*}
echo "shards: job array $array ($shards tasks); merge: job $merge (after the array); report: $dir/merged/report.html"
echo "$array $merge" > "$dir/logs/jobs"
