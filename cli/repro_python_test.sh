#!/usr/bin/env bash
# `flashcheck repro` for Python kernels (py:package.module:function): the script embeds the adapter's source (the module
# and what it imports from FLASHCHECK_PYTHONPATH) and calls it as the Python bridge does. On the CPU: the project's
# reference kernel forward and backward, and its broken twins caught; paged K/V through the FlexAttention adapter, with
# a planted page swap caught; a KV-cache append (cli/testdata/repro_kernels.py) with a broken twin and a planted
# out-of-bounds write caught; state kept between calls reproduced by running the fixture's earlier cases first. The
# committed findings of CUDA Python kernels get their scripts, which exit 2 without a GPU, as a script whose kernel's
# package is missing does.
# Usage: repro_python_test.sh FLASHCHECK PYTHON WORKDIR
set -uo pipefail
fc=$1 py=$2 work=$3
testdata=$(cd "$(dirname "$0")" && pwd)/testdata
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

# The project's reference kernel passes forward (GQA, softcap, a window) and backward; its broken twins are caught
# (the causal diagonal top-left; softcap's derivative dropped).
export FLASHCHECK_PYTHONPATH=$testdata
py_case() {  # py_case NAME KERNEL FIXTURE CASE WANT_EXIT [PATTERN]
  local name=$1 kernel=$2 fixture=$3 case=$4 want=$5 pattern=${6:-}
  "$fc" repro "$fixture" --kernel "$kernel" --case "$case" --out "$work/$name" > "$work/$name.log" 2>&1 ||
    fail "repro $name: $(cat "$work/$name.log")"
  "$py" "$work/$name/repro.py" > "$work/$name.out" 2>&1
  local rc=$?
  [ $rc = "$want" ] || fail "$name: exit $rc, wanted $want: $(cat "$work/$name.out")"
  [ -z "$pattern" ] || grep -qE -- "$pattern" "$work/$name.out" || fail "$name: no '$pattern': $(cat "$work/$name.out")"
}
"$fc" fixture new --out "$work/py-fwd.json" --title "py forward" --seqs 2x5,3x9 --heads 4 --kv-heads 2 --causal \
  --window 4,0 --softcap 5 --dtype fp32 > /dev/null 2>&1 || fail "fixture new py-fwd"
"$fc" fixture new --out "$work/py-bwd.json" --title "py backward" --seqs 4x6,5x5 --heads 4 --kv-heads 2 --causal \
  --softcap 2 --backward --dtype fp32 --head-dim 8 > /dev/null 2>&1 || fail "fixture new py-bwd"
ref=py:flashcheck_kernels.reference
py_case py-fwd "$ref:attention" "$work/py-fwd.json" 0 0 "^not reproduced"
grep -q '^    "flashcheck_kernels.masks": r' "$work/py-fwd/repro.py" || fail "the adapter's sources are not in the script"
py_case py-top-left "$ref:attention_top_left" "$work/py-fwd.json" 0 1 "^  out  FAIL"
py_case py-bwd "$ref:attention" "$work/py-bwd.json" 0 0 "^  dk   ok"
py_case py-no-derivative "$ref:attention_softcap_no_derivative" "$work/py-bwd.json" 0 1 "^  dq   FAIL"
# Paged K/V through the FlexAttention adapter on the CPU (pages of 128, a block table); a plant that hands the kernel
# the sequences' block-table rows swapped is caught.
cat > "$work/py-paged.json" <<'JSON'
{"schema": "flashcheck.fixture/1", "title": "paged K/V through the FlexAttention adapter on the CPU", "property": "conformance",
 "cases": [{"name": "paged", "dtype": "fp32", "heads": 4, "kv_heads": 2, "head_dim": 16, "causal": true,
   "kv": {"storage": "paged", "page_size": 128, "extra_pages": 1, "table_seed": 5},
   "seqs": [{"q_len": 3, "k_len": 200}, {"q_len": 5, "k_len": 130}], "data": {"seed": 3, "poison": false}}]}
JSON
py_case py-paged py:flashcheck_kernels.flex_attention:attention_cpu "$work/py-paged.json" paged 0 "^not reproduced"
sed 's/block_table=ints(a\["block_table"\], (B, a\["max_blocks"\])),/block_table=ints(a["block_table"], (B, a["max_blocks"])).flip(0),/' \
  "$work/py-paged/repro.py" > "$work/py-paged/planted.py"
grep -q 'flip(0)' "$work/py-paged/planted.py" || fail "the block-table plant did not apply"
"$py" "$work/py-paged/planted.py" > "$work/py-paged-planted.out" 2>&1
[ $? = 1 ] && grep -qE '^  out  FAIL' "$work/py-paged-planted.out" || fail "swapped pages: $(cat "$work/py-paged-planted.out")"
# A KV-cache append: the test kernel passes; its twin that drops the appended tokens is caught; a write one element
# past the output buffer (planted in the embedded kernel) is caught by the canaries.
cat > "$work/py-cache.json" <<'JSON'
{"schema": "flashcheck.fixture/1", "title": "a KV-cache append", "property": "conformance",
 "cases": [{"name": "cache", "dtype": "fp32", "heads": 4, "kv_heads": 2, "head_dim": 16, "causal": true, "kv": {"cache": true},
   "seqs": [{"q_len": 2, "k_len": 40, "cache_len": 17, "new_len": 2}, {"q_len": 3, "k_len": 32, "cache_len": 9, "new_len": 3}],
   "data": {"seed": 4}}]}
JSON
py_case py-cache py:repro_kernels:cache_attention "$work/py-cache.json" 0 0 "^not reproduced"
py_case py-cache-drops py:repro_kernels:cache_attention_drops_new "$work/py-cache.json" 0 1 "^  out  FAIL"
sed 's/^    _cache_attention(q, k, v, out, lse, args)$/&\n    out.as_strided((out.numel() + 1,), (1,))[-1] = 0.0/' \
  "$work/py-cache/repro.py" > "$work/py-cache/oob.py"
grep -q 'as_strided' "$work/py-cache/oob.py" || fail "the out-of-bounds plant did not apply"
"$py" "$work/py-cache/oob.py" > "$work/py-oob.out" 2>&1
[ $? = 1 ] && grep -q "REPRODUCED: the kernel raised RuntimeError: the kernel wrote outside the buffers it was given (out-of-bounds writes): out: 0 of .* and 1 of" "$work/py-oob.out" ||
  fail "an out-of-bounds write: $(cat "$work/py-oob.out")"
# State between calls: the fixture's earlier case runs first, so the second case fails in the script as in replay.
"$fc" fixture new --out "$work/py-state.json" --title "state" --seqs 3x5 --heads 2 --dtype fp32 --head-dim 16 > /dev/null 2>&1 ||
  fail "fixture new py-state"
"$py" - "$work/py-state.json" <<'PY'
import copy, json, sys
f = json.load(open(sys.argv[1]))
second = copy.deepcopy(f["cases"][0])
second.update(name="second", head_dim=64, v_head_dim=64, expect={"py:repro_kernels:stale_scale": {"verdict": "fail"}})
f["cases"][0].update(name="first", expect={"py:repro_kernels:stale_scale": {"verdict": "pass"}})
f["cases"].append(second)
json.dump(f, open(sys.argv[1], "w"))
PY
"$fc" replay "$work/py-state.json" --kernel py:repro_kernels:stale_scale > "$work/py-state-replay.log" 2>&1 ||
  fail "replay of the stateful fixture: $(cat "$work/py-state-replay.log")"
py_case py-state-first py:repro_kernels:stale_scale "$work/py-state.json" first 0 "^not reproduced"
py_case py-state py:repro_kernels:stale_scale "$work/py-state.json" second 1 "ran earlier case first of the fixture first"
grep -q "^REPRODUCED" "$work/py-state.out" || fail "the stateful case: $(cat "$work/py-state.out")"
# A kernel whose own package this machine lacks: the script says so and exits 2 (it cannot run the case here), not 1.
py_case py-no-package py:repro_needs_package:attention "$work/py-fwd.json" 0 2 \
  "needs the package flashcheck_no_such_attention_package"
# The committed findings of CUDA Python kernels get their scripts here (ci/gpu.sh's repro stage runs them on a GPU);
# without a GPU the script says so and exits 2. The issue body names the kernel's own package.
for f in fixtures/found/flashinfer-fa3-empty-tile-lse-overrun.json fixtures/found/fa4-sm90-nan-past-seqused-k.json \
         fixtures/found/flex-attention-nan-in-masked-keys.json fixtures/found/flashinfer-ragged-wrapper-stale-custom-mask.json; do
  name=$(basename "$f" .json)
  "$fc" repro "$f" --out "$work/$name" > "$work/$name.log" 2>&1 || fail "repro $f: $(cat "$work/$name.log")"
  "$py" "$work/$name/repro.py" > "$work/$name.out" 2>&1
  [ $? = 2 ] && grep -q "needs a CUDA device" "$work/$name.out" || fail "$name without a GPU: $(cat "$work/$name.out")"
done
grep -q "The script needs torch and flashinfer" "$work/flashinfer-fa3-empty-tile-lse-overrun/ISSUE.md" || fail "flashinfer's ISSUE.md"
grep -q '"case": "#0"' "$work/flashinfer-ragged-wrapper-stale-custom-mask/repro.py" ||
  fail "the stale-mask finding's script does not run the fixture's first case first"
echo "repro (Python kernels): ok (10 scripts run on the CPU, 3 plants caught, 4 CUDA findings written)"
