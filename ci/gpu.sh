#!/usr/bin/env bash
# ci/gpu.sh — the GPU job on a node with an NVIDIA GPU (an H200 here): set-up (offline: .deb files from
# FLASHCHECK_DEB_DIR, default .debs/), the cuda preset build, the GPU tests, the device-reference check,
# the gate on every kernel, a fuzz campaign on the CUDA kernels and the throughput benchmark. Logs go to
# $OUT (default out/gpu); a short table is printed last. The CUDA kernels are the build's own: every entry of
# `flashcheck list --json` whose "device" is "cuda".
#
#   FLASHCHECK_PREBUILT=DIR   use the executables in DIR instead of building (quick iterations)
#   GPU_CAMPAIGN_SECONDS=T     seconds of conformance fuzzing per device kernel in the campaign (default 25)
#   GPU_STAGES="..."          subset of: tests refcheck replay bench probes gate integration campaign reach
#                              campaign-gpus (default: all), and sanitize (not in the default: compute-sanitizer over
#                              the harness's kernels and a sample of cases of every CUDA kernel, about ten minutes)
#   GPU_TESTS="..."           the test executables of the tests stage (default: all nine)
#   GPU_SANITIZE_CASES=N       cases per CUDA kernel under memcheck in the sanitize stage (default 24)
#   GPU_SANITIZE_PARTS="..."   which of the sanitize stage's parts run: harness (the harness's own kernels), gradient-reference
#                              (of those, only the gradient reference's memcheck and racecheck), forward, backward (memcheck
#                              over conformance and over grad-conformance cases of every CUDA kernel); default harness forward backward
#   GPU_BENCH_IN_FLIGHT="..."  the --in-flight counts the bench stage measures besides 1 (default "2 4 8")
#   Further stages, not in the default: false-alarms (tools/false_alarms.py over every kernel, CPU and CUDA, at
#   once; GPU_FALSE_ALARM_CASES, default 10^6, or GPU_FALSE_ALARM_SECONDS, default 300) and py-campaign (Python kernels
#   at volume, FlexAttention, FlashAttention-4 and FlashInfer: GPU_PY_SECONDS and GPU_PY_LARGE_SECONDS per kernel, GPU_PY_WORKERS
#   sharing the GPU, GPU_PY_DTYPE and GPU_PY_HEAD_DIM narrow the configurations they compile, GPU_PY_KERNELS picks, GPU_PY_SEED
#   seeds the campaigns: the same seed and output folder resume one; GPU_PY_PROPERTIES, default all, and
#   GPU_PY_LARGE_PROPERTIES, default conformance, the properties of the default-size and realistic campaigns, and
#   GPU_PY_WARMUP_PROPERTY, default conformance, the warm-up's: grad-conformance compiles the backward too).
#   FLASHCHECK_WHEEL_DIR=DIR   Python wheels to install first (build/site, on PYTHONPATH), and flashinfer-aot*.tar.xz
#                              (FlashInfer modules compiled off the node, tools/wheels/flashinfer_aot.py); a wheel too large for one
#                              transfer may come as NAME.whl.part-NN pieces (split -d), joined here, or as NAME.whl.tar.xz
#                              (tools/wheels/xz_wheel.py); tools/wheels/fa4.sh and flashinfer.sh download them
#   GPU_INTEGRATION_SECONDS=T  seconds of the integration property (hf-main) per CUDA kernel (default 10)
#   GPU_REACH_SECONDS=T        seconds per property for each kernel from outside in the reach stage (default 40)
#   GPU_CAMPAIGN_GPUS_SECONDS=T seconds of the `flashcheck campaign --gpus all` stage (default 60)
#   backward (not in the default): the backward fixtures replayed; the device gradient reference against the host's
#   fp64 (GPU_GRAD_REFCHECK_CASES, default 10^4); every gradient property on every CUDA kernel with a backward, one campaign sharing the GPU
#   (GPU_BACKWARD_SECONDS, default 240; GPU_BACKWARD_WORKERS, default 8; GPU_BACKWARD_SEED), then one at realistic
#   sizes (GPU_BACKWARD_LARGE_SECONDS, default 120), merged (a campaign of 0 seconds is skipped; GPU_BACKWARD_KERNELS
#   narrows both to some CUDA kernels)
#   backward-volume (not in the default): the backward at volume, every gradient property on every CUDA kernel with a
#   backward at default and realistic sizes, four campaigns in turn for GPU_BV_SECONDS together (default 600, this
#   call; GPU_BV_WORKERS, GPU_BV_SDPA_WORKERS, GPU_BV_RACE_WORKERS, GPU_BV_LARGE_WORKERS, default 1 each), merged;
#   GPU_BV_DIR and GPU_BV_SEED resume them; GPU_BV_KERNELS narrows the kernels
#   backward-race (not in the default): the race fixtures (fixtures/stress/backward-race.json, sixteen backward runs of
#   L 4224 and three more shapes) on every CUDA kernel, or on those GPU_RACE_KERNELS names
#   lse-merge (not in the default): the lse-merge property on every CUDA kernel that returns an LSE, default and
#   realistic sizes (GPU_LSE_SECONDS, default 120; GPU_LSE_LARGE_SECONDS, default 60; GPU_LSE_WORKERS; GPU_LSE_SEED)
#   python (not in the default): the Python package pip-installed with the CUDA engine, its pytest suite, and
#   flashcheck.check and the reference on CUDA kernels and tensors (ci/gpu_python_check.py); GPU_PYTHON_PYTEST=0 skips
#   the pytest suite (the CPU CI runs it too)
#   repro (not in the default): `flashcheck repro` scripts of every fixtures/found/ finding on a CUDA kernel or a
#   Python kernel, run with this node's torch (each row: the script's exit status, 1 = reproduced, and its verdict
#   line); the Python kernels' packages come from FLASHCHECK_WHEEL_DIR; GPU_REPRO_FIXTURES (globs) narrows the fixtures
#   false-alarms-cuda (not in the default): every CUDA kernel under every property (forward, gradient, integration and
#   integration-sdpa), and the forward properties at volume, three campaigns in turn for GPU_FA_SECONDS together
#   (default 480, this call) with a fresh seed (GPU_FA_SEED, default the time); GPU_FA_DIR keeps them for a later call
#   to resume (issue 29, item 9: every finding is a false alarm or a kernel bug to analyse)
#   bench-backward (not in the default): `bench --pass backward` on the standard and realistic mixes beside the Python
#   recipe's backward (autograd through flash-attn's attention_ref) in the same visit
#   tc-gradients (not in the default): the tensor-core references (the forward's kernel on bf16 and fp16, the gradient
#   reference of reference/device/gradients_tc.cu): their GPU tests, the device-reference and device-gradient-reference
#   properties (GPU_TC_PROPERTIES narrows; empty, none) over GPU_TC_GRAD_CASES generated cases each (default 10^4, seeds
#   GPU_TC_SEED and GPU_TC_SEED + 1, default 28), `bench --pass backward` with them and with the SIMT kernels
#   (FLASHCHECK_REFERENCE=simt), with them at the GPU_BENCH_IN_FLIGHT counts and on the realistic mix; Nsight Compute
#   times each launch of the gradient reference on the realistic mix and every launch of 20 standard-mix cases
#   (GPU_TC_NCU_TIMEOUT), and with GPU_TC_NCU_FULL=1
#   profiles its dQ and dK/dV launches at L 8192 in full
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-out/gpu}
mkdir -p "$out"
stages=${GPU_STAGES:-"tests refcheck replay bench probes gate integration campaign reach campaign-gpus"}
declare -a table
# Each row also goes to table.txt at once, so a run cut short still says how far it got.
row() { table+=("$(printf '%-34s %s' "$1" "$2")"); printf '%-34s %s\n' "$1" "$2" >> "$out/table.txt"; }
has() { [[ " $stages " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 - > "$out/versions.txt" 2>&1 <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "device", torch.cuda.get_device_name(0))
PY
row "machine" "$(cat "$out/gpu.txt") | $(cat "$out/versions.txt")"

if [ -n "${FLASHCHECK_PREBUILT:-}" ]; then
  bin=$FLASHCHECK_PREBUILT
  torchlib=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__) + "/lib")')
  nvlib=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]) + "/nvidia/cu13/lib")' 2>/dev/null || true)
  export LD_LIBRARY_PATH="$torchlib:$nvlib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  row "build" "prebuilt executables from $bin"
else
  start=$(date +%s)
  export PATH="$PATH:/usr/local/cuda/bin"
  export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
  if FLASHCHECK_DEB_DIR=${FLASHCHECK_DEB_DIR:-.debs} bash ci/build.sh cuda > "$out/build.log" 2>&1; then
    row "build (cuda preset)" "ok in $(( $(date +%s) - start )) s"
  else
    tail -40 "$out/build.log"; row "build (cuda preset)" "FAILED (see build.log)"; printf '%s\n' "${table[@]}"; exit 1
  fi
  bin=build/cuda
fi
if [ -x "$bin/cli/flashcheck" ]; then flashcheck="$bin/cli/flashcheck"; else flashcheck="$bin/flashcheck"; fi
fc() { "$flashcheck" "$@"; }
# A test executable by name: at the top of $bin (a prebuilt folder) or anywhere in the build tree.
exe() {
  if [ -x "$bin/$1" ]; then echo "$bin/$1"
  else find "$bin" -type f -name "$1" -perm -u+x 2>/dev/null | sort | head -1; fi
}
# in_turn DIR SEED SECONDS TAG NAME:WORKERS:WEIGHT...: one campaign per NAME (an array of its --kernel, --property
# and size arguments), one after another on every GPU, each for its WEIGHT's share of SECONDS (this call's time), NAME's
# folder DIR/NAME-(SEED + its index) and its log $out/TAG-NAME.log. Separate campaigns keep slow units (grad-race,
# realistic sizes) from starving fast ones, as a campaign gives each of its units the same number of chunks; in turn,
# not at once, because processes sharing a GPU are time-sliced: on an H100, four fuzz processes of default-size
# backward cases judged fewer cases together than one alone (docs/PERFORMANCE.md, "Processes sharing one GPU"). The
# same DIR and SEED resume them, each running its share past the seconds it has used. The folders go to campaign_dirs.
in_turn() {
  local dir=$1 seed=$2 seconds=$3 tag=$4 offset=0 total=0 part name workers weight folder
  shift 4
  campaign_dirs=()
  for part in "$@"; do
    IFS=: read -r name workers weight <<< "$part"
    local -n units=$name
    [ ${#units[@]} -gt 0 ] && [ "$workers" -gt 0 ] && total=$(( total + weight ))
    unset -n units
  done
  for part in "$@"; do
    IFS=: read -r name workers weight <<< "$part"
    local -n units=$name
    if [ ${#units[@]} -gt 0 ] && [ "$workers" -gt 0 ]; then
      folder="$dir/$name-$(( seed + offset ))"
      campaign_dirs+=("$folder")
      fc campaign "${units[@]}" --gpus all --timeout 300 --workers-per-gpu "$workers" --seed $(( seed + offset )) \
        --time $(( $(seconds_used "$folder") + seconds * weight / total )) --out "$folder" > "$out/$tag-$name.log" 2>&1
    fi
    unset -n units
    offset=$(( offset + 1 ))
  done
}
# seconds_used DIR: the whole seconds a campaign folder's runs have used (0 for a new one), as `merge` counts them.
seconds_used() {
  rm -rf "$out/seconds-used"
  [ -f "$1/journal.jsonl" ] && fc merge "$1" --out "$out/seconds-used" --no-html > /dev/null 2>&1
  python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["campaigns"][0]["seconds_used"]))' \
    "$out/seconds-used/report.json" 2> /dev/null || echo 0
}
# The CUDA kernels whose contract has a backward (list --json's "backward"), on one line.
cuda_backward_kernels() {
  fc list --json 2> /dev/null | python3 -c '
import json, sys
print(" ".join(k["name"] for k in json.load(sys.stdin) if k.get("device") == "cuda" and "backward" in k))'
}
# merged_totals DIR: one line of a merged campaign's report.json (cases, failures, findings, crashes, root causes).
merged_totals() {
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
print(t["cases"], "cases,", t["failures"], "failing,", t["findings"], "findings,", t["crashes"], "crashes;",
      len(r["root_causes"]), "root causes:", "; ".join(str(c)[:90] for c in r["root_causes"][:4]))' \
    "$1/report.json" 2>&1 | tail -1
}
status=0
# The Python kernels from outside whose packages import here (wheels from FLASHCHECK_WHEEL_DIR), one per line; each
# import's output goes to $out/$1-NAME-import.log.
importable_py_kernels() {
  python3 -c 'import flash_attn.cute' > "$out/$1-fa4-import.log" 2>&1 && echo py:flashcheck_kernels.flash_attn_4:attention
  python3 -c 'import flashinfer' > "$out/$1-flashinfer-import.log" 2>&1 && echo py:flashcheck_kernels.flashinfer:attention
  return 0
}

# Python packages that travel as wheels (an offline node: FlashAttention-4 and its CuTe DSL, FlashInfer). A wheel too
# large for one transfer comes as NAME.whl.part-00, -01, ... (split -d -b), joined here, or as NAME.whl.tar.xz. Installed once into build/site, which is put
# first on PYTHONPATH for every stage and worker.
if [ -n "${FLASHCHECK_WHEEL_DIR:-}" ]; then
  site="$root/build/site"
  for p in "$FLASHCHECK_WHEEL_DIR"/*.whl.part-00; do
    [ -e "$p" ] && cat "${p%.part-00}".part-* > "${p%.part-00}"
  done
  for x in "$FLASHCHECK_WHEEL_DIR"/*.whl.tar.xz; do  # a wheel of sources in one xz stream (tools/wheels/xz_wheel.py)
    [ -e "$x" ] && [ ! -e "${x%.tar.xz}" ] && python3 tools/wheels/xz_wheel.py unpack "$x" "${x%.tar.xz}"
  done
  if [ -e "$site/.installed" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
       --target "$site" "$FLASHCHECK_WHEEL_DIR"/*.whl > "$out/wheels.log" 2>&1; then
    touch "$site/.installed"
    row "wheels (build/site)" "$(ls "$FLASHCHECK_WHEEL_DIR"/*.whl | xargs -n1 basename | cut -d- -f1-2 | tr '\n' ' ')"
  else
    row "wheels (build/site)" "FAILED: $(tail -1 "$out/wheels.log")"; status=1
  fi
  # FlashInfer modules compiled off the node (tools/wheels/flashinfer_aot.py): where FlashInfer looks before compiling.
  for x in "$FLASHCHECK_WHEEL_DIR"/flashinfer-aot*.tar.xz; do
    [ -e "$x" ] && [ -d "$site/flashinfer" ] && mkdir -p "$site/flashinfer/data/aot" && tar xJf "$x" -C "$site/flashinfer/data/aot" &&
      row "flashinfer modules (AOT)" "$(tar tJf "$x" | grep -c '\.so$') from $(basename "$x")"
  done
  # --target installs leave the packages' .pth files unprocessed (only site directories run them; the CuTe DSL's
  # puts its dsl_packages folder on sys.path): the paths they add, $site first, go on PYTHONPATH as well.
  paths=$(python3 -c 'import site, sys; before = set(sys.path); site.addsitedir(sys.argv[1])
print(":".join(p for p in sys.path if p not in before))' "$site" 2>> "$out/wheels.log" || echo "$site")
  export PYTHONPATH="$paths${PYTHONPATH:+:$PYTHONPATH}" FLASHCHECK_PYTHONPATH="$paths${FLASHCHECK_PYTHONPATH:+:$FLASHCHECK_PYTHONPATH}"
fi

# The CUDA kernels this build registers, from `flashcheck list --json`: those whose "device" is "cuda".
cuda_kernels=()
if has integration || has campaign || has sanitize || has backward || has backward-volume || has lse-merge || has repro || has false-alarms-cuda; then
  if list_json=$(fc list --json 2> "$out/list.err"); then
    read -r -a cuda_kernels < <(printf '%s' "$list_json" | python3 -c '
import json, sys
print(" ".join(k["name"] for k in json.load(sys.stdin) if k.get("device") == "cuda"))')
  fi
  if [ ${#cuda_kernels[@]} -gt 0 ]; then
    row "CUDA kernels (flashcheck list)" "${cuda_kernels[*]}"
  else
    row "CUDA kernels (flashcheck list)" "NONE: no kernel has \"device\": \"cuda\" in list --json (see list.err)"; status=1
  fi
fi

if has tests; then
  for t in ${GPU_TESTS:-core_device_test reference_device_test core_test reference_host_test kernels_test conformance_test conformance_device_test search_test campaign_test}; do
    x=$(exe "$t")
    if [ -z "$x" ]; then row "test $t" "FAILED (no executable $t under $bin)"; status=1
    elif "$x" > "$out/$t.log" 2>&1; then row "test $t" "$(grep -E '^\[  PASSED' "$out/$t.log")"
    else row "test $t" "FAILED"; status=1; fi
  done
fi

if has refcheck; then
  fc fuzz --kernel tiled-cpu --property device-reference --cases 10000 --seed 5 --out "$out/refcheck" > "$out/refcheck.txt" 2>&1 || status=1
  row "device reference vs host fp64" "$(grep -E ' cases in ' "$out/refcheck.txt" | head -1 | sed 's/^[^:]*: //')"
fi

if has replay; then
  fc replay fixtures > "$out/replay.txt" 2>&1; rc=$?
  [ $rc -eq 0 ] || status=1
  row "replay fixtures/ (all kernels)" "exit $rc: $(tail -1 "$out/replay.txt")"
fi

if has bench; then
  fc bench --kernel flash-fwd-varlen --mix standard --cases 3000 --warmup 100 > "$out/bench.txt" 2>&1
  row "bench flash-fwd-varlen" "$(grep ' cases/s ' "$out/bench.txt" | tail -1)"
  # Issue 12, deliverable 2: several cases in flight, one thread and stream each (GPU_BENCH_IN_FLIGHT).
  for n in ${GPU_BENCH_IN_FLIGHT:-2 4 8}; do
    fc bench --kernel flash-fwd-varlen --mix standard --cases 3000 --warmup 100 --in-flight "$n" > "$out/bench-in-flight-$n.txt" 2>&1 || status=1
    row "bench flash-fwd-varlen, $n in flight" "$(grep ' cases/s ' "$out/bench-in-flight-$n.txt" | tail -1)"
  done
  FLASHCHECK_PROFILE=1 fc bench --kernel flash-fwd-varlen --mix standard --cases 500 --warmup 50 > "$out/bench-profile.txt" 2>&1
  # Issue 12: the realistic shapes with per-stage times (tensor-core reference, then the SIMT one for the
  # comparison), and the Python harness with flash-attn's test recipe on both mixes in the same visit.
  fc bench --kernel flash-fwd-varlen --mix realistic --cases 3 --warmup 1 > "$out/bench-realistic.txt" 2>&1
  row "bench realistic (tensor cores)" "$(awk '$1 == "L" && $2 == 8192 && $7 != "win" {print "L 8192 B 2 H 32: kernel " $9 " ms, harness " $13 " ms, harness/kernel " $14}' "$out/bench-realistic.txt")"
  FLASHCHECK_REFERENCE=simt fc bench --kernel flash-fwd-varlen --mix realistic --cases 1 --warmup 1 > "$out/bench-realistic-simt.txt" 2>&1
  FLASHCHECK_REFERENCE=simt fc bench --kernel flash-fwd-varlen --mix standard --cases 3000 --warmup 100 > "$out/bench-simt.txt" 2>&1
  row "bench flash-fwd-varlen (SIMT ref)" "$(grep ' cases/s ' "$out/bench-simt.txt" | tail -1)"
  timeout "${GPU_PYTHON_BENCH_TIMEOUT:-240}" python3 tools/bench/python_recipe.py --mix both --cases 1000 --warmup 50 --runs 2 \
    > "$out/bench-python.txt" 2>&1
  # The standard mix once more: between visits the Python figure has varied by 2x (375 and 186 cases/s on
  # 2026-12-02), so each visit shows two runs and the ratio is taken against the faster.
  timeout 120 python3 tools/bench/python_recipe.py --mix standard --cases 1000 --warmup 50 >> "$out/bench-python.txt" 2>&1
  row "bench python recipe" "$(grep '^standard mix' "$out/bench-python.txt" | sed 's/ (.*//' | paste -sd ';')"
fi

if has probes; then
  python3 lab/gpu_probes.py > "$out/probes.txt" 2>&1
  row "probes (lab/gpu_probes.py)" "$(wc -l < "$out/probes.txt") lines in probes.txt"
fi

if has gate; then
  start=$(date +%s)
  timeout "${GPU_GATE_TIMEOUT:-420}" "$flashcheck" gate --out "$out/gate" > "$out/gate.md" 2> "$out/gate.err"; rc=$?
  [ $rc -eq 0 ] || status=1
  row "gate (all kernels)" "exit $rc in $(( $(date +%s) - start )) s ($(head -1 "$out/gate.md"))"
  python3 - "$out/gate/report.json" > "$out/gate-problems.txt" 2>&1 <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for r in g['runs']:
    if r['not_applicable'] == '' and not r['ok']:
        print(r['kernel'], r['property'], 'findings', len(r['findings']), 'missing', r['coverage_missing'])
for m in g['mutants']:
    if not m['killed']:
        print('survived', m['mutant'])
PY
  row "gate problems" "$(tr '\n' ';' < "$out/gate-problems.txt")"
fi

if has integration; then
  # transformers' flash path (hf-main) on every CUDA kernel whose contract fits, against the HF-eager oracle.
  for k in "${cuda_kernels[@]}"; do
    fc fuzz --kernel "$k" --property integration --profile hf-main --time "${GPU_INTEGRATION_SECONDS:-10}" --seed 2029 \
      --out "$out/found" > "$out/integration-$k.txt" 2>&1; rc=$?
    [ $rc -eq 0 ] || status=1
    row "integration hf-main $k" "exit $rc: $(grep -E ' cases in ' "$out/integration-$k.txt" | tail -1 | sed 's/^[^:]*: //' | cut -c1-150)"
  done
fi

if has campaign; then
  # Time-boxed per kernel (GPU_CAMPAIGN_SECONDS, default 25): conformance at the default sizes and at
  # realistic ones (lengths up to 2048) on the kernels that run on the device, conformance on the SDPA
  # kernels (host path), then every property for a short while on every CUDA kernel.
  t=${GPU_CAMPAIGN_SECONDS:-25}
  total=0
  for k in "${cuda_kernels[@]}"; do
    runs=()
    case $k in
      sdpa-*) fc fuzz --kernel "$k" --property conformance --time $(( t / 6 + 1 )) --seed 2026 --out "$out/found" --json > "$out/campaign-$k.json" 2> "$out/campaign-$k.err"; runs+=("$out/campaign-$k.json") ;;
      *) fc fuzz --kernel "$k" --property conformance --time "$t" --seed 2026 --out "$out/found" --json > "$out/campaign-$k.json" 2> "$out/campaign-$k.err"
         fc fuzz --kernel "$k" --property conformance --time $(( t / 4 + 1 )) --max-len 2048 --work-budget 1e8 --max-heads 32 --seed 2028 --out "$out/found" --json > "$out/campaign-$k-large.json" 2> "$out/campaign-$k-large.err"
         runs+=("$out/campaign-$k.json" "$out/campaign-$k-large.json") ;;
    esac
    fc fuzz --kernel "$k" --property all --time 1.2 --seed 2027 --out "$out/found" --json > "$out/campaign-$k-all.json" 2> "$out/campaign-$k-all.err"
    runs+=("$out/campaign-$k-all.json")
    summary=$(python3 - "${runs[@]}" <<'PY'
import json, sys
reports = [x for f in sys.argv[1:] for x in json.load(open(f))]
cases = sum(x['cases'] for x in reports)
found = [x['property'] + ': ' + f['verdict']['verdict'] + ' ' + f['verdict']['reason'][:80] for x in reports for f in x['findings']]
miss = sorted({m for x in reports for m in x['coverage_missing']})
print(cases, len(found), ' | '.join(found[:3]), ('missing: ' + ' '.join(miss)) if miss else '')
PY
)
    row "campaign $k" "cases/findings: $summary"
    total=$(( total + ${summary%% *} ))
  done
  row "campaign total cases" "$total"
fi

if has reach; then
  # Kernels from outside flashcheck (docs/PLUGINS.md, docs/PYTHON_KERNELS.md): PyTorch's FlexAttention through
  # the Python bridge, the example CUDA plugin built out of tree against this build, and FlashAttention-4
  # where its wheels are importable. For each: its contract, every applicable property for a while, then
  # conformance at realistic sizes (sequences in the thousands, 32 heads).
  t=${GPU_REACH_SECONDS:-40}
  reach=(py:flashcheck_kernels.flex_attention:attention)
  plugin_args=()
  prefix=$(cd "$out" && pwd)/prefix
  if [ -f "$bin/CMakeCache.txt" ] && cmake --install "$bin" --prefix "$prefix" > "$out/reach-install.log" 2>&1 &&
     cmake -S examples/plugins/cuda_attention -B "$out/cuda-plugin" -G Ninja -DCMAKE_PREFIX_PATH="$prefix;$root/build/deps/usr" \
       -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/reach-plugin.log" 2>&1 && cmake --build "$out/cuda-plugin" >> "$out/reach-plugin.log" 2>&1; then
    plugin_args=(--plugin "$out/cuda-plugin/libexample_cuda_attention.so")
    reach+=(example-cuda-attention)
  else
    row "reach: example CUDA plugin" "not built (see reach-plugin.log)"
  fi
  mapfile -t -O "${#reach[@]}" reach < <(importable_py_kernels reach)
  for k in "${reach[@]}"; do
    slug=$(printf '%s' "$k" | tr -c 'A-Za-z0-9_-' '_')
    fc "${plugin_args[@]}" list --kernel "$k" > "$out/reach-$slug-contract.txt" 2>&1 || { row "reach $k" "not listed: $(tail -1 "$out/reach-$slug-contract.txt")"; status=1; continue; }
    start=$(date +%s)
    fc "${plugin_args[@]}" fuzz --kernel "$k" --property all --time "$t" --seed 2030 --out "$out/found" --json > "$out/reach-$slug.json" 2> "$out/reach-$slug.err"
    fc "${plugin_args[@]}" fuzz --kernel "$k" --property conformance --time "$t" --max-len 4096 --max-heads 32 --work-budget 3e10 \
      --seed 2031 --out "$out/found" --json > "$out/reach-$slug-large.json" 2> "$out/reach-$slug-large.err"
    summary=$(python3 - "$out/reach-$slug.json" "$out/reach-$slug-large.json" <<'PY'
import json, sys
reports = [x for f in sys.argv[1:] for x in (json.load(open(f)) if open(f).read().strip() else [])]
ran = [x for x in reports if not x['not_applicable']]
cases = sum(x['cases'] for x in ran)
found = [x['property'] + ': ' + f['verdict']['verdict'] + ' ' + f['verdict']['reason'][:90] for x in ran for f in x['findings']]
props = sorted({x['property'] for x in ran})
print(cases, 'cases;', len(found), 'findings;', 'properties:', ' '.join(props), '|', ' | '.join(found[:4]))
PY
)
    row "reach $k" "$summary ($(( $(date +%s) - start )) s)"
  done
fi

if has campaign-gpus; then
  # `flashcheck campaign` with one worker per GPU over two CUDA kernels and the planted crashing mutant (its
  # workers die with SIGSEGV and are replaced), killed with SIGKILL halfway and resumed, then merged into the
  # HTML report (docs/CAMPAIGNS.md). Exit 1 of the campaign and the merge is the mutant's crashes.
  t=${GPU_CAMPAIGN_GPUS_SECONDS:-60}
  c="$out/campaign-gpus"
  rm -rf "$c" "$c-report"
  args=(--gpus all --kernel flash-fwd-varlen --kernel efficient-fwd-varlen --kernel mutant-segfault-tile-overrun
        --time "$t" --seed 2030)
  "$flashcheck" campaign --out "$c" "${args[@]}" > "$out/campaign-gpus-1.txt" 2>&1 &
  pid=$!
  sleep $(( t / 2 ))
  kill -KILL "$pid"; wait "$pid" 2> /dev/null
  fc campaign --out "$c" "${args[@]}" > "$out/campaign-gpus-2.txt" 2>&1; rc=$?
  fc merge "$c" --out "$c-report" > "$out/campaign-gpus-merge.txt" 2>&1; mrc=$?
  [ $rc -le 1 ] && [ $mrc -le 1 ] && [ -s "$c-report/report.html" ] || status=1
  row "campaign --gpus all (killed, resumed)" "exit $rc/$mrc: $(grep -E '^campaign ' "$out/campaign-gpus-2.txt" | tail -1 | cut -c1-150)"
  row "campaign --gpus all: merged" "$(grep -E '^[0-9]+ cases from' "$out/campaign-gpus-merge.txt"); $(grep -c 'data:image/png' "$c-report/report.html" 2> /dev/null) plots; $(grep -E 'has no plots' "$out/campaign-gpus-merge.txt" | cut -c1-80)"
fi

if has sanitize; then
  # compute-sanitizer (CUDA toolkit): memcheck and racecheck on the harness's own kernels (the input generator in
  # core_device_test, the device reference and comparator in reference_device_test, and the device reference
  # against the host one through flashcheck), then memcheck over a sample of cases of every production CUDA
  # kernel. PYTORCH_NO_CUDA_MEMORY_CACHING=1 makes PyTorch allocate each tensor with cudaMalloc: inside its
  # caching allocator's pooled blocks an out-of-bounds access is invisible to memcheck. Workers are not
  # isolated (--no-isolate): the tool then sees every launch in one process.
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  san() {  # san LABEL TOOL COMMAND...: one row with the tool's summary line
    local label=$1 tool=$2; shift 2
    local log="$out/sanitize-$(echo "$label" | tr ' /' '__').log"
    "$cs" --tool "$tool" --error-exitcode 99 --print-limit 20 "$@" > "$log" 2>&1; local rc=$?
    # 99: the tool found errors; 1 is a fuzz run's own verdict (a finding, or coverage a short run missed).
    case $rc in 0|1) ;; *) status=1 ;; esac
    row "sanitize $label" "exit $rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Error:' "$log" | tail -1)"
  }
  parts=" ${GPU_SANITIZE_PARTS:-harness forward backward} "
  for t in core_device_test reference_device_test; do
    [[ $parts == *" harness "* ]] || break
    x=$(exe "$t")
    [ -n "$x" ] || { row "sanitize $t" "FAILED (no executable)"; status=1; continue; }
    san "memcheck $t" memcheck "$x"
    san "racecheck $t" racecheck "$x"
  done
  if [[ $parts == *" harness "* ]]; then
    san "memcheck device-reference" memcheck "$flashcheck" fuzz --kernel tiled-cpu --property device-reference --cases 40 --seed 31 --no-isolate --out "$out/sanitize-found"
    san "racecheck device-reference" racecheck "$flashcheck" fuzz --kernel tiled-cpu --property device-reference --cases 10 --seed 31 --no-isolate --out "$out/sanitize-found"
  fi
  if [[ $parts == *" harness "* || $parts == *" gradient-reference "* ]]; then
    san "memcheck device-gradient-reference" memcheck "$flashcheck" fuzz --kernel tiled-cpu --property device-gradient-reference \
      --cases 20 --seed 33 --no-isolate --out "$out/sanitize-found"
    san "racecheck device-gradient-reference" racecheck "$flashcheck" fuzz --kernel tiled-cpu \
      --property device-gradient-reference --cases 5 --seed 33 --no-isolate --out "$out/sanitize-found"
  fi
  for k in "${cuda_kernels[@]}"; do
    [[ $parts == *" forward "* ]] &&
      san "memcheck $k" memcheck "$flashcheck" fuzz --kernel "$k" --property conformance --cases "${GPU_SANITIZE_CASES:-24}" \
        --seed 2031 --no-isolate --out "$out/sanitize-found"
    # And its backward, where the contract has one (grad-conformance is not applicable otherwise: exit 0, no cases).
    [[ $parts == *" backward "* ]] &&
      san "memcheck $k backward" memcheck "$flashcheck" fuzz --kernel "$k" --property grad-conformance \
        --cases "${GPU_SANITIZE_CASES:-24}" --seed 2032 --no-isolate --out "$out/sanitize-found"
  done
  unset PYTORCH_NO_CUDA_MEMORY_CACHING
fi

if has backward; then
  # The backward on the GPU: the gradient properties on every CUDA kernel whose contract has a backward (list --json's
  # "backward"), as one campaign whose workers share the GPU, merged. First, quick: every fixture of a gradient property
  # replayed (the backward defects found, the harness's false alarms) and lab/backward_probes.py.
  # (The race fixtures, sixteen backward runs of L 4224 per kernel, are the backward-race stage.)
  mapfile -t bw_fixtures < <(grep -rlE --include='*.json' '"property": "(grad-|integration-(sdpa-)?backward)' fixtures |
    grep -v '^fixtures/stress/')
  fc replay fixtures/found/harness-determinism-slack-rows.json \
    "${bw_fixtures[@]}" > "$out/backward-replay.txt" 2>&1
  row "backward fixtures replayed" "$(tail -1 "$out/backward-replay.txt")"
  python3 lab/backward_probes.py > "$out/backward-probes.txt" 2>&1
  row "backward probes" "$(wc -l < "$out/backward-probes.txt") lines in backward-probes.txt"
  bw_workers=${GPU_BACKWARD_WORKERS:-8}
  bw_seed=${GPU_BACKWARD_SEED:-2601}
  # merged_row LABEL DIR START: the merged summary of a campaign folder as one row.
  merged_row() {
    fc merge "$2" --out "$2-merged" --no-html > "$2-merge.log" 2>&1
    row "$1" "$(grep -m1 'cases from' "$2-merged/summary.md") $(head -1 "$2-merged/summary.md" | sed 's/.*: //') ($(( $(date +%s) - $3 )) s)"
  }
  # The device gradient reference (fp64 on the GPU) against the host's on generated backward cases.
  start=$(date +%s)
  fc campaign --out "$out/grad-refcheck" --kernel tiled-cpu --property device-gradient-reference \
    --cases "${GPU_GRAD_REFCHECK_CASES:-10000}" --gpus 0 --workers-per-gpu "$bw_workers" --seed "$bw_seed" \
    > "$out/grad-refcheck.log" 2>&1
  merged_row "device gradients vs host fp64" "$out/grad-refcheck" "$start"
  start=$(date +%s)
  read -r -a bw_kernels < <(cuda_backward_kernels)
  [ -n "${GPU_BACKWARD_KERNELS:-}" ] && read -r -a bw_kernels <<< "$GPU_BACKWARD_KERNELS"
  args=()
  for k in "${bw_kernels[@]}"; do args+=(--kernel "$k"); done
  large=("${args[@]}")
  for p in grad-conformance grad-determinism grad-gqa grad-varlen-padded grad-batch-permutation grad-masked-zero grad-fd grad-race; do
    args+=(--property "$p")
  done
  if [ "${GPU_BACKWARD_SECONDS:-240}" != 0 ]; then
    fc campaign --out "$out/backward" "${args[@]}" --gpus 0 --workers-per-gpu "$bw_workers" --timeout 300 \
      --time "${GPU_BACKWARD_SECONDS:-240}" --seed "$bw_seed" > "$out/backward.log" 2>&1
    merged_row "backward campaign (${#bw_kernels[@]} kernels)" "$out/backward" "$start"
  fi
  # Realistic sizes (sequences in the thousands, up to 32 heads, GQA, varlen with slack, windows): the properties
  # that take the device gradient reference (grad-fd's finite differences of an fp64 forward stay at default sizes).
  start=$(date +%s)
  for p in grad-conformance grad-determinism grad-gqa grad-varlen-padded grad-batch-permutation grad-masked-zero; do
    large+=(--property "$p")
  done
  if [ "${GPU_BACKWARD_LARGE_SECONDS:-120}" != 0 ]; then
    fc campaign --out "$out/backward-large" "${large[@]}" --gpus 0 --workers-per-gpu "$bw_workers" --timeout 300 \
      --max-len 4096 --max-heads 32 --work-budget 3e10 --time "${GPU_BACKWARD_LARGE_SECONDS:-120}" --seed "$bw_seed" \
      > "$out/backward-large.log" 2>&1
    merged_row "backward campaign, realistic sizes" "$out/backward-large" "$start"
  fi
fi

if has backward-volume; then
  # The backward at volume (issue 27, item 3): every gradient property on every CUDA kernel with a backward, as four
  # campaigns in turn, GPU_BV_SECONDS of this call shared 4:3:2:1 (default 600): "grads", the kernels that call aten's
  # ops, at default sizes; "grads_sdpa", the SDPA kernels; "large", realistic sizes (sequences in the thousands, up to
  # 32 heads); "races", grad-race, whose chunks take minutes. One worker each (GPU_BV_WORKERS, GPU_BV_SDPA_WORKERS,
  # GPU_BV_LARGE_WORKERS, GPU_BV_RACE_WORKERS): more processes on the GPU judged fewer cases. GPU_BV_DIR keeps the
  # folders for a later call to resume with the same GPU_BV_SEED (default 2701), and sends them back as
  # $out/bv-campaigns.tgz. Merged into $out/bv-merged. ci/gpu_stage_test.sh runs this stage on CPU workers.
  bv_dir=${GPU_BV_DIR:-$out/backward-volume}
  bv_seed=${GPU_BV_SEED:-2701}
  grads=() grads_sdpa=() races=() large=()
  read -r -a bv_kernels < <(cuda_backward_kernels)
  [ -n "${GPU_BV_KERNELS:-}" ] && read -r -a bv_kernels <<< "$GPU_BV_KERNELS"
  for k in "${bv_kernels[@]}"; do
    if [[ $k == sdpa-* ]]; then grads_sdpa+=(--kernel "$k"); else grads+=(--kernel "$k"); fi
    races+=(--kernel "$k"); large+=(--kernel "$k")
  done
  for p in grad-conformance grad-determinism grad-gqa grad-varlen-padded grad-batch-permutation grad-masked-zero grad-fd; do
    grads+=(--property "$p"); grads_sdpa+=(--property "$p")
    [ "$p" = grad-fd ] || large+=(--property "$p")  # grad-fd differentiates an fp64 forward: default sizes only
  done
  races+=(--property grad-race)
  large+=(--max-len 4096 --max-heads 32 --work-budget 3e10)
  start=$(date +%s)
  # A part without kernels has only its other arguments: it is left out.
  for part in grads grads_sdpa races large; do declare -n a=$part; [[ " ${a[*]} " == *" --kernel "* ]] || a=(); unset -n a; done
  in_turn "$bv_dir" "$bv_seed" "${GPU_BV_SECONDS:-600}" bv grads:"${GPU_BV_WORKERS:-1}":4 \
    grads_sdpa:"${GPU_BV_SDPA_WORKERS:-1}":3 races:"${GPU_BV_RACE_WORKERS:-1}":1 large:"${GPU_BV_LARGE_WORKERS:-1}":2
  fc merge "${campaign_dirs[@]}" --out "$out/bv-merged" --no-html > "$out/bv-merge.log" 2>&1
  [ "$bv_dir" = "$out/backward-volume" ] || tar czf "$out/bv-campaigns.tgz" -C "$bv_dir" .
  row "backward at volume (seed $bv_seed)" "$(merged_totals "$out/bv-merged") ($(( $(date +%s) - start )) s)"
fi

if has backward-race; then
  # Races: sixteen backward runs of flash-attention's longest test shapes (fixtures/stress/backward-race.json) on every
  # CUDA kernel with a backward, or those GPU_RACE_KERNELS names; minutes per kernel.
  start=$(date +%s)
  race_kernels=()
  for k in ${GPU_RACE_KERNELS:-}; do race_kernels+=(--kernel "$k"); done
  fc replay "${race_kernels[@]}" fixtures/stress/backward-race.json > "$out/backward-race.txt" 2>&1 || status=1
  row "backward races (fixtures/stress)" "$(tail -1 "$out/backward-race.txt") ($(( $(date +%s) - start )) s)"
fi

if has tc-gradients; then
  x=$(exe reference_device_test)
  if "$x" --gtest_filter='TcGradientsGpu.*:TensorCoreReferenceGpu.*:DeviceGradientsGpu.*' > "$out/tc-gradients-test.log" 2>&1; then
    row "test tensor-core paths" "$(grep -E '^\[  PASSED' "$out/tc-gradients-test.log")"
  else row "test tensor-core paths" "FAILED: $(grep '^\[  FAILED' "$out/tc-gradients-test.log" | tr '\n' ' ' | cut -c1-300)"; status=1; fi
  seed=${GPU_TC_SEED:-28}
  for prop in ${GPU_TC_PROPERTIES-device-reference device-gradient-reference}; do
    start=$(date +%s)
    fc fuzz --kernel tiled-cpu --property "$prop" --cases "${GPU_TC_GRAD_CASES:-10000}" --seed "$seed" --out "$out/tc-$prop" \
      > "$out/tc-$prop.txt" 2>&1 || status=1
    row "$prop vs host fp64" "$(grep -E ' cases in ' "$out/tc-$prop.txt" | head -1 | sed 's/^[^:]*: //') ($(( $(date +%s) - start )) s)"
    seed=$((seed + 1))
  done
  for ref in tc simt; do
    FLASHCHECK_REFERENCE=$([ "$ref" = tc ] || echo simt) FLASHCHECK_PROFILE=1 fc bench --kernel flash-fwd-varlen \
      --pass backward --mix standard --cases 300 --warmup 20 > "$out/tc-bench-$ref.txt" 2>&1
    row "bench backward ($ref reference)" "$(grep ' cases/s ' "$out/tc-bench-$ref.txt" | tail -1)"
  done
  for n in ${GPU_BENCH_IN_FLIGHT:-2 4 8}; do
    fc bench --kernel flash-fwd-varlen --pass backward --mix standard --cases 600 --warmup 40 --in-flight "$n" \
      > "$out/tc-bench-in-flight-$n.txt" 2>&1
    row "bench backward (tc) in flight $n" "$(grep ' cases/s ' "$out/tc-bench-in-flight-$n.txt" | tail -1)"
  done
  fc bench --kernel flash-fwd-varlen --mix realistic --cases 3 --warmup 1 > "$out/tc-bench-forward-realistic.txt" 2>&1
  row "bench forward realistic (tc)" "$(awk '$1 == "L" && $2 == 8192 && $7 != "win" {print "L 8192 B 2 H 32: kernel " $9 " ms, harness " $13 " ms, harness/kernel " $14}' "$out/tc-bench-forward-realistic.txt")"
  fc bench --kernel flash-fwd-varlen --pass backward --mix realistic --cases 1 --warmup 1 > "$out/tc-bench-realistic.txt" 2>&1
  row "bench backward realistic (tc)" "$(awk '$1 == "L" && $2 == 8192 && $7 != "win" {print "L 8192 B 2 H 32: kernel " $9 " ms, harness " $13 " ms, harness/kernel " $14}' "$out/tc-bench-realistic.txt")"
  # Each launch of the gradient reference on the realistic shapes, timed by Nsight Compute where it reads the device
  # (one metric, the clocks left alone): where the reference's time goes.
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
  if [ -n "$ncu" ]; then
    timeout "${GPU_TC_NCU_TIMEOUT:-120}" "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
      -k 'regex:dq_kernel|dkdv_kernel|rows_kernel|tc_kernel|copy_kernel' \
      "$flashcheck" bench --kernel flash-fwd-varlen --pass backward --mix realistic --cases 1 --warmup 1 \
      > "$out/tc-ncu.csv" 2> "$out/tc-ncu.err"
    row "tc reference launches (ncu)" "exit $?: $(grep -c gpu__time_duration "$out/tc-ncu.csv") launches in tc-ncu.csv"
    # Every launch (the harness's, the kernel's, torch's) of 20 standard-mix cases: at those sizes, which cost.
    timeout "${GPU_TC_NCU_TIMEOUT:-120}" "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
      "$flashcheck" bench --kernel flash-fwd-varlen --pass backward --mix standard --cases 20 --warmup 2 \
      > "$out/tc-ncu-standard.csv" 2> "$out/tc-ncu-standard.err"
    row "standard-mix launches (ncu)" "exit $?: $(grep -c gpu__time_duration "$out/tc-ncu-standard.csv") launches in tc-ncu-standard.csv"
    # GPU_TC_NCU_FULL=1: every section of Nsight Compute on the dQ and dK/dV launches of the timed L 8192 B 2 H 32 case
    # (the realistic mix's third shape: the first two shapes' warm-up and timed cases and its own warm-up, ten launches,
    # come before).
    if [ -n "${GPU_TC_NCU_FULL:-}" ]; then
      timeout "${GPU_TC_NCU_TIMEOUT:-120}" "$ncu" --clock-control none --set full -k 'regex:dq_kernel|dkdv_kernel' \
        --launch-skip 10 --launch-count 2 "$flashcheck" bench --kernel flash-fwd-varlen --pass backward --mix realistic \
        --cases 1 --warmup 1 > "$out/tc-ncu-full.txt" 2> "$out/tc-ncu-full.err"
      row "tc reference, dQ and dK/dV in full (ncu)" "exit $?: $(wc -l < "$out/tc-ncu-full.txt") lines in tc-ncu-full.txt"
    fi
  fi
fi

if has bench-backward; then
  # The backward check's throughput and its per-stage cost at the realistic shapes, beside the Python recipe's
  # backward (autograd through flash-attn's attention_ref) in the same visit.
  FLASHCHECK_PROFILE=1 fc bench --kernel flash-fwd-varlen --pass backward --mix standard --cases 300 --warmup 20 \
    > "$out/bench-backward.txt" 2>&1
  row "bench backward flash-fwd-varlen" "$(grep ' cases/s ' "$out/bench-backward.txt" | tail -1)"
  fc bench --kernel flash-fwd-varlen --pass backward --mix realistic --cases 1 --warmup 1 \
    > "$out/bench-backward-realistic.txt" 2>&1
  row "bench backward realistic" "$(awk '$1 == "L" && $2 == 8192 && $7 != "win" {print "L 8192 B 2 H 32: kernel " $9 " ms, harness " $13 " ms, harness/kernel " $14}' "$out/bench-backward-realistic.txt")"
  timeout "${GPU_PYTHON_BENCH_TIMEOUT:-240}" python3 tools/bench/python_recipe.py --pass backward --mix both --cases 300 \
    --warmup 20 --runs 1 > "$out/bench-backward-python.txt" 2>&1
  row "bench backward python recipe" "$(grep '^standard mix' "$out/bench-backward-python.txt" | sed 's/ (.*//')"
fi

if has false-alarms; then
  # Correct kernels held to the gate's rule at volume; every finding is a false alarm to analyse (issue 15).
  start=$(date +%s)
  python3 tools/false_alarms.py --total "${GPU_FALSE_ALARM_CASES:-1000000}" --seconds "${GPU_FALSE_ALARM_SECONDS:-300}" \
    --kernels all --jobs $(( $(nproc) - 2 )) --gpu-jobs 2 --chunk-seconds 60 --flashcheck "$flashcheck" \
    --out "$out/false-alarms" > "$out/false-alarms.log" 2>&1 || status=1
  row "false alarms (all kernels)" "$(head -1 "$out/false-alarms/summary.txt" 2> /dev/null) ($(( $(date +%s) - start )) s)"
  cp "$out/false-alarms/summary.txt" "$out/false-alarms-summary.txt" 2> /dev/null
fi

if has false-alarms-cuda; then
  # Three campaigns in turn (a chunk of grad-race or integration-sdpa takes minutes), GPU_FA_SECONDS of this call
  # shared 5:3:2: "volume", the kernels that run on the device under the forward properties (GPU_FA_WORKERS, default 9
  # workers); "training", the same kernels under the gradient and integration properties (GPU_FA_TRAINING_WORKERS,
  # default 4); "sdpa", the SDPA kernels (host paths, a few cases a second) under every property (GPU_FA_SDPA_WORKERS,
  # default 3). Their folders are in GPU_FA_DIR (default $out/false-alarms-cuda): the same folder and GPU_FA_SEED
  # resume them. Merged into $out/fa-cuda-merged; every finding is a false alarm or a kernel bug to analyse.
  fa_dir=${GPU_FA_DIR:-$out/false-alarms-cuda}
  fa_seed=${GPU_FA_SEED:-$(date +%s)}
  volume=() training=() sdpa=()
  for k in "${cuda_kernels[@]}"; do
    if [[ $k == sdpa-* ]]; then sdpa+=(--kernel "$k"); else volume+=(--kernel "$k"); training+=(--kernel "$k"); fi
  done
  for p in conformance determinism gqa-repeat varlen-padded paged-contiguous batch-permutation padding-invariance \
           chunked-prefill robustness lse-merge; do volume+=(--property "$p"); done
  for p in grad-conformance grad-determinism grad-gqa grad-varlen-padded grad-batch-permutation grad-masked-zero \
           grad-robustness grad-fd grad-race integration integration-sdpa; do training+=(--property "$p"); done
  sdpa+=(--property all --property integration --property integration-sdpa)
  start=$(date +%s)
  in_turn "$fa_dir" "$fa_seed" "${GPU_FA_SECONDS:-480}" fa \
    volume:"${GPU_FA_WORKERS:-9}":5 training:"${GPU_FA_TRAINING_WORKERS:-4}":3 sdpa:"${GPU_FA_SDPA_WORKERS:-3}":2
  dirs=("${campaign_dirs[@]}")
  fc merge "${dirs[@]}" --out "$out/fa-cuda-merged" --no-html > "$out/fa-cuda-merge.log" 2>&1
  [ "$fa_dir" = "$out/false-alarms-cuda" ] || tar czf "$out/fa-cuda-campaigns.tgz" -C "$fa_dir" .
  row "false alarms, CUDA kernels (seed $fa_seed)" "$(merged_totals "$out/fa-cuda-merged") ($(( $(date +%s) - start )) s)"
fi

if has py-campaign; then
  # Kernels from outside through the Python bridge at volume (issue 11): FlexAttention, and FlashAttention-4 and
  # FlashInfer where their wheels are importable (FLASHCHECK_WHEEL_DIR). Compilation bounds their rate, so a run is narrowed to one
  # configuration a model uses (GPU_PY_DTYPE, GPU_PY_HEAD_DIM), and a warm-up compiles it into the on-disk caches
  # (Inductor's and Triton's; the CuTe DSL cache) so that the campaign's workers load kernels instead of compiling
  # them. Then a campaign over every property and one of conformance at realistic sizes, GPU_PY_WORKERS workers
  # sharing the GPU (a case of a Python kernel is mostly host time), merged into one report per kernel.
  export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1
  if [ -n "${GPU_PY_KERNELS:-}" ]; then read -r -a py_kernels <<< "$GPU_PY_KERNELS"
  else
    py_kernels=(py:flashcheck_kernels.flex_attention:attention)
    mapfile -t -O 1 py_kernels < <(importable_py_kernels py)
  fi
  narrow=(--dtype "${GPU_PY_DTYPE:-bf16}" --head-dim "${GPU_PY_HEAD_DIM:-128}")
  py_seed=${GPU_PY_SEED:-2041}  # a new seed per session, so that campaigns add cases instead of repeating them
  workers=(--gpus 0 --workers-per-gpu "${GPU_PY_WORKERS:-4}" --timeout 300)
  for k in "${py_kernels[@]}"; do
    slug=$(printf '%s' "$k" | sed 's/^py:flashcheck_kernels\.//; s/:.*//')
    start=$(date +%s)
    fc list --kernel "$k" > "$out/py-$slug-contract.txt" 2>&1 || { row "$slug" "not listed: $(tail -1 "$out/py-$slug-contract.txt")"; status=1; continue; }
    if [ "${GPU_PY_WARMUP_CASES:-64}" -gt 0 ]; then  # 0: the campaign's workers compile side by side instead
      fc fuzz --kernel "$k" --property "${GPU_PY_WARMUP_PROPERTY:-conformance}" "${narrow[@]}" --cases "${GPU_PY_WARMUP_CASES:-64}" --timeout 600 --seed 2040 \
        --out "$out/py-$slug-found" --json > "$out/py-$slug-warmup.json" 2> "$out/py-$slug-warmup.err"
      row "$slug warm-up (compiles)" "$(( $(date +%s) - start )) s: $(tail -1 "$out/py-$slug-warmup.err" | cut -c1-120)"
    fi
    start=$(date +%s)
    props=()
    for p in ${GPU_PY_PROPERTIES:-all}; do props+=(--property "$p"); done
    fc campaign --kernel "$k" "${props[@]}" "${narrow[@]}" "${workers[@]}" --time "${GPU_PY_SECONDS:-120}" --seed "$py_seed" \
      --out "$out/py-$slug-default" > "$out/py-$slug-default.log" 2>&1
    props=()
    for p in ${GPU_PY_LARGE_PROPERTIES:-conformance}; do props+=(--property "$p"); done
    fc campaign --kernel "$k" "${props[@]}" "${narrow[@]}" "${workers[@]}" --time "${GPU_PY_LARGE_SECONDS:-60}" \
      --max-len 4096 --max-heads 32 --work-budget 3e10 --seed $(( py_seed + 10 )) --out "$out/py-$slug-realistic" > "$out/py-$slug-realistic.log" 2>&1
    fc merge "$out/py-$slug-default" "$out/py-$slug-realistic" --out "$out/py-$slug-merged" --no-html > "$out/py-$slug-merge.log" 2>&1
    row "$slug campaign" "$(grep -m1 'cases from' "$out/py-$slug-merged/summary.md") $(head -1 "$out/py-$slug-merged/summary.md" | sed 's/.*: //') ($(( $(date +%s) - start )) s)"
  done
fi

if has lse-merge; then
  # The lse-merge property's calibration on the GPU (issue 29): every CUDA kernel that returns an LSE, its keys split
  # and merged by the LSEs it returns, at the default sizes and at realistic ones, one campaign sharing the GPU. A
  # finding is a kernel bug or a false alarm of the rule; the merge's root causes sort them.
  lse_kernels=()
  for k in "${cuda_kernels[@]}"; do
    fc list --json --kernel "$k" 2>/dev/null | grep -q '"returns_lse": true' && lse_kernels+=(--kernel "$k")
  done
  start=$(date +%s)
  fc campaign "${lse_kernels[@]}" --property lse-merge --gpus all --workers-per-gpu "${GPU_LSE_WORKERS:-8}" \
    --time "${GPU_LSE_SECONDS:-120}" --seed "${GPU_LSE_SEED:-2905}" --out "$out/lse-default" > "$out/lse-default.log" 2>&1
  fc campaign "${lse_kernels[@]}" --property lse-merge --gpus all --workers-per-gpu "${GPU_LSE_WORKERS:-8}" \
    --time "${GPU_LSE_LARGE_SECONDS:-60}" --max-len 2048 --max-heads 32 --work-budget 1e9 --seed $(( ${GPU_LSE_SEED:-2905} + 1 )) \
    --out "$out/lse-realistic" > "$out/lse-realistic.log" 2>&1
  fc merge "$out/lse-default" "$out/lse-realistic" --out "$out/lse-merged" --no-html > "$out/lse-merge.log" 2>&1
  row "lse-merge campaign ($(( ${#lse_kernels[@]} / 2 )) kernels)" \
    "$(grep -m1 'cases from' "$out/lse-merged/summary.md") $(head -1 "$out/lse-merged/summary.md" | sed 's/.*: //') ($(( $(date +%s) - start )) s)"
fi

if has python; then
  # The Python package on the GPU node (docs/PYTHON.md): pip-installed into this Python with the CUDA engine, reusing
  # build/cuda (its flags kept: the cuda preset's), pybind11 from the node's own pybind11 package; its pytest suite,
  # then ci/gpu_python_check.py: flashcheck.check on CUDA kernels and the reference and rule on CUDA tensors.
  start=$(date +%s)
  pyb=$(python3 -m pybind11 --cmakedir 2>/dev/null || true)
  if FLASHCHECK_CUDA=ON python3 -m pip install --no-build-isolation --no-index --no-deps -C build-dir=build/cuda \
       -C cmake.define.FLASHCHECK_TESTS=ON -C "cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g -DNDEBUG" \
       ${pyb:+-C cmake.define.pybind11_DIR=$pyb} . > "$out/python-install.log" 2>&1; then
    row "python package (pip, CUDA)" "installed in $(( $(date +%s) - start )) s: $(python3 -m flashcheck --version 2>&1 | head -1)"
    if [ "${GPU_PYTHON_PYTEST:-1}" = 1 ]; then
      (cd /tmp && timeout 900 python3 -m pytest -q -p no:cacheprovider "$root/python/tests" > "$out/python-pytest.log" 2>&1) ||
        status=1
      row "python pytest (installed package)" "$(tail -1 "$out/python-pytest.log")"
    fi
    (cd /tmp && timeout 900 python3 "$root/ci/gpu_python_check.py" > "$out/python-gpu.log" 2>&1) || status=1
    row "python on CUDA kernels" "$(tail -1 "$out/python-gpu.log")"
  else
    tail -30 "$out/python-install.log"; row "python package (pip, CUDA)" "FAILED (see python-install.log)"; status=1
  fi
fi

if has repro; then
  # Upstream-ready reproducers (issue 29): every committed fixtures/found/ finding of a CUDA kernel that repro writes
  # scripts for, as a standalone script (flashcheck repro), run with this node's torch: exit 1 is "reproduced". The
  # Python kernels a finding records a failure of (FlexAttention, FlashInfer, FlashAttention-4) are among them: their
  # scripts embed the adapter and need the kernel's package (FLASHCHECK_WHEEL_DIR), else they exit 2.
  mkdir -p "$out/repro"
  reproduced=0 total=0
  # Only the pairs a fixture records a failure of (one Python call per fixture instead of a `flashcheck repro` per
  # kernel: a repro call starts LibTorch), and of those the kernels this node has: its CUDA kernels and the Python ones.
  # GPU_REPRO_FIXTURES (globs) narrows the fixtures.
  for f in ${GPU_REPRO_FIXTURES:-fixtures/found/*.json}; do
    read -r -a failing < <(python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))
bad = {"fail", "error", "crash", "timeout"}
print(" ".join(sorted({k for c in f.get("cases", []) for k, e in c.get("expect", {}).items() if e.get("verdict") in bad})))' "$f")
    for k in "${failing[@]}"; do
      [[ $k == py:* || " ${cuda_kernels[*]} " == *" $k "* ]] || continue
      name=$(basename "$f" .json)-${k//[:.]/-}
      fc repro "$f" --kernel "$k" --out "$out/repro/$name" > "$out/repro/$name.gen.log" 2>&1 || continue
      total=$((total + 1))
      timeout 300 python3 "$out/repro/$name/repro.py" > "$out/repro/$name.log" 2>&1; rc=$?
      [ $rc = 1 ] && reproduced=$((reproduced + 1))
      row "repro $name" "exit $rc: $(tail -1 "$out/repro/$name.log" | cut -c1-150)"
    done
  done
  row "repro scripts (fixtures/found, CUDA and Python kernels)" "$reproduced of $total reproduce (exit 1)"
fi

# Everything in one file: the device tool brings back a handful of files only.
tar czf "$out.tgz" --exclude=prefix --exclude=cuda-plugin -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null
echo
printf '%s\n' "${table[@]}"
exit $status
