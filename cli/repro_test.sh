#!/usr/bin/env bash
# `flashcheck repro` end to end on the CPU kernels: the committed cpu-flash backward finding's script reproduces it
# (exit 1, dK and dV outside the rule) and the same case passes on sdpa-math-cpu (exit 0); forward and backward cases
# with GQA, both causal alignments, windows, varlen, seqused_k, left padding and K/V strides pass on both CPU kernels (the
# script's reference and masks agree with the kernels'); a planted defect in a script's kernel call (scale x 1.01) is
# caught; a crash of the kernel call is a reproduction; refusals name their reason; a user's file is never replaced.
# Python kernels: cli/repro_python_test.sh.
# Usage: repro_test.sh FLASHCHECK PYTHON WORKDIR
set -uo pipefail
fc=$1 py=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
found=fixtures/found/cpu-flash-backward-reduced-precision-accumulation.json

# The finding reproduces where flashcheck recorded it, and only there.
"$fc" repro "$found" --out "$work/found" > "$work/found.log" 2>&1 || fail "repro: $(cat "$work/found.log")"
grep -q "on cpu-flash (flashcheck expects fail)" "$work/found.log" || fail "default case/kernel: $(cat "$work/found.log")"
"$py" "$work/found/repro.py" > "$work/found.out" 2>&1
[ $? = 1 ] || fail "the cpu-flash finding did not reproduce: $(cat "$work/found.out")"
grep -qE '^  dk   FAIL' "$work/found.out" && grep -qE '^  dv   FAIL' "$work/found.out" &&
  grep -q '^REPRODUCED' "$work/found.out" || fail "dK/dV not named: $(cat "$work/found.out")"
grep -q "^# Reproducer: PyTorch's CPU flash attention backward" "$work/found/repro.py" || fail "script header"
grep -q "^<!-- written by flashcheck repro -->" "$work/found/ISSUE.md" && grep -q "## Expected vs actual" "$work/found/ISSUE.md" ||
  fail "ISSUE.md: $(head -5 "$work/found/ISSUE.md")"
"$py" "$work/found/repro.py" --markdown > "$work/found.md" 2>&1
grep -q "### Environment" "$work/found.md" && grep -q "^- torch: " "$work/found.md" || fail "--markdown: $(cat "$work/found.md")"
"$fc" repro "$found" --kernel sdpa-math-cpu --case mqa64-bf16-max-check --out "$work/math" > /dev/null 2>&1 || fail "repro math"
"$py" "$work/math/repro.py" > "$work/math.out" 2>&1 || fail "sdpa-math-cpu on the finding's case: $(cat "$work/math.out")"
grep -q "not reproduced: within the rule" "$work/math.out" || fail "math verdict: $(cat "$work/math.out")"

# Cases across the script's layouts, from fixture new, pass on both CPU kernels.
n=0
while read -r flags; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  "$fc" fixture new --out "$work/case$n.json" --title "layout $n" $flags --expect sdpa-math-cpu=pass > "$work/new$n.log" 2>&1 ||
    fail "fixture new $flags: $(cat "$work/new$n.log")"
  for k in sdpa-math-cpu cpu-flash; do
    "$fc" repro "$work/case$n.json" --kernel $k --case 0 --out "$work/case$n-$k" > "$work/repro$n-$k.log" 2>&1 ||
      fail "repro $flags on $k: $(cat "$work/repro$n-$k.log")"
    "$py" "$work/case$n-$k/repro.py" > "$work/case$n-$k.out" 2>&1 ||
      fail "case $n ($flags) on $k did not pass: $(cat "$work/case$n-$k.out")"
  done
done <<'EOF'
--seqs 2x5,3x9,4x4 --heads 4 --kv-heads 2 --causal --dtype fp32
--seqs 5x3,2x7 --heads 2 --causal --top-left --dtype bf16 --head-dim 16
--seqs 6x9,7x7 --heads 6 --kv-heads 3 --window 3,1 --seqused-k 8,7 --leftpad 1,0 --dtype fp16 --head-dim 8
--seqs 4x6,5x5 --heads 4 --kv-heads 2 --causal --window 2,0 --backward --dtype fp32 --head-dim 8
EOF

# K/V strides as the SDPA adapter presents them (one KV head broadcast with stride 0; rows and heads padded) pass on
# both CPU kernels; the memory-efficient SDPA finding that needs the broadcast layout gets its script.
for strides in expanded gapped; do
  n=$((n + 1))
  "$fc" fixture new --out "$work/case$n.json" --title "strides $strides" --seqs 3x9,5x4 --heads 4 --kv-heads 1 \
    --window 2,1 --dtype fp32 --head-dim 8 --backward > /dev/null 2>&1 || fail "fixture new ($strides)"
  sed -i "s/\"strides\": \"contiguous\"/\"strides\": \"$strides\"/" "$work/case$n.json"
  grep -q "\"strides\": \"$strides\"" "$work/case$n.json" || fail "the strides edit did not apply"
  for k in sdpa-math-cpu cpu-flash; do
    "$fc" repro "$work/case$n.json" --kernel $k --case 0 --out "$work/case$n-$k" > "$work/repro$n-$k.log" 2>&1 ||
      fail "repro $strides on $k: $(cat "$work/repro$n-$k.log")"
    grep -q "\"kv_strides\": \"$strides\"" "$work/case$n-$k/repro.py" || fail "kv_strides not in the script"
    "$py" "$work/case$n-$k/repro.py" > "$work/case$n-$k.out" 2>&1 ||
      fail "$strides K/V on $k did not pass: $(cat "$work/case$n-$k.out")"
  done
done
"$fc" repro fixtures/found/sdpa-efficient-broadcast-kv-gqa-repeat.json --out "$work/efficient-broadcast" > /dev/null 2>&1 &&
  grep -q '"kv_strides": "expanded"' "$work/efficient-broadcast/repro.py" || fail "the broadcast K/V finding's script"

# A planted defect in the kernel call: the softmax scale 1% off must be caught.
sed 's/scale=SCALE/scale=SCALE * 1.01/' "$work/case1-sdpa-math-cpu/repro.py" > "$work/case1-sdpa-math-cpu/planted.py"
grep -q "SCALE \* 1.01" "$work/case1-sdpa-math-cpu/planted.py" || fail "the plant did not apply"
"$py" "$work/case1-sdpa-math-cpu/planted.py" > "$work/planted.out" 2>&1
[ $? = 1 ] && grep -qE '^  out  FAIL' "$work/planted.out" || fail "a 1% scale error was not caught: $(cat "$work/planted.out")"
# A NaN from the kernel fails with an infinite error, named where it is.
sed 's/^    return o, None$/    o = o.clone(); o[0, 1, 1, 3] = float("nan")\n    return o, None/' \
  "$work/case1-sdpa-math-cpu/repro.py" > "$work/case1-sdpa-math-cpu/nan.py"
"$py" "$work/case1-sdpa-math-cpu/nan.py" > "$work/nan.out" 2>&1
[ $? = 1 ] && grep -qE '^  out  FAIL  max error inf, .* at sequence 0 \(1, 1, 3\): kernel nan' "$work/nan.out" ||
  fail "a NaN output: $(cat "$work/nan.out")"
# A kernel call that raises is a reproduction, with its message.
sed 's/^def call_op(q, k, v, mask, is_causal):$/&\n    raise RuntimeError("planted: unsupported shape")/' \
  "$work/case1-sdpa-math-cpu/repro.py" > "$work/case1-sdpa-math-cpu/raises.py"
"$py" "$work/case1-sdpa-math-cpu/raises.py" > "$work/raises.out" 2>&1
[ $? = 1 ] && grep -q "REPRODUCED: the kernel raised RuntimeError: planted: unsupported shape" "$work/raises.out" ||
  fail "a raising kernel: $(cat "$work/raises.out")"

# Refusals (exit 2) with their reasons.
expect_refusal() {
  local pattern=$1; shift
  "$fc" repro "$@" > "$work/refused.log" 2>&1
  [ $? = 2 ] && grep -q -- "$pattern" "$work/refused.log" || fail "repro $*: wanted exit 2 and '$pattern': $(cat "$work/refused.log")"
}
expect_refusal "tiled-cpu is flashcheck's own kernel" "$found" --kernel tiled-cpu --out "$work/x"
expect_refusal "is not a Python kernel's name" "$found" --kernel py:nomodule --out "$work/x"
expect_refusal "No module named 'no_such_module'" "$found" --kernel py:no_such_module:attention \
  --case 0 --out "$work/x"
expect_refusal "--kernel does not apply" fixtures/issues/hf-F1-decode-position-ids.json --kernel sdpa-math-cpu --out "$work/x"
expect_refusal "no case named or numbered 'nope'" "$found" --case nope --out "$work/x"
expect_refusal "no-such.json" "$work/no-such.json" --out "$work/x"
# Paged keys and a KV-cache append: the per-sequence calls get each sequence's keys in logical order, as the SDPA
# adapters gather them (the script's verdict is replay's: the same worst ratio); the packed aten calls refuse them.
"$fc" fixture new --out "$work/paged.json" --title p --seqs 2x5 --causal --expect sdpa-math-cpu=pass > /dev/null 2>&1 || fail "paged"
sed -i 's/"storage": "packed"/"storage": "paged"/' "$work/paged.json"
"$fc" fixture new --out "$work/cache.json" --title c --seqs 2x5 --causal --expect sdpa-math-cpu=pass > /dev/null 2>&1 || fail "cache"
"$py" - "$work/cache.json" <<'PY' || fail "cache fixture"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["cases"][0]
c["kv"]["cache"] = True
c["seqs"] = [{"q_len": 3, "k_len": 8, "cache_len": 5, "new_len": 3}, {"q_len": 2, "k_len": 2, "cache_len": 0, "new_len": 2}]
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
for layout in paged cache; do
  for k in sdpa-math-cpu cpu-flash; do
    "$fc" repro "$work/$layout.json" --kernel $k --case 0 --out "$work/$layout-$k" > /dev/null 2>&1 || fail "repro $layout on $k"
    "$py" "$work/$layout-$k/repro.py" > "$work/$layout-$k.out" 2>&1 || fail "$layout on $k: $(cat "$work/$layout-$k.out")"
    ratio=$("$fc" replay "$work/$layout.json" --kernel $k --verbose 2>&1 | grep -oE 'ratio [0-9.e+-]+' | head -1)
    grep -q "(${ratio})" "$work/$layout-$k.out" || fail "$layout on $k: replay's $ratio not in $(grep -E '^  out' "$work/$layout-$k.out")"
  done
done
expect_refusal "paged K/V" "$work/paged.json" --kernel flash-fwd-varlen --case 0 --out "$work/x"
expect_refusal "a KV-cache append" "$work/cache.json" --kernel flash-fwd-varlen --case 0 --out "$work/x"
expect_refusal "is dense" "$work/case1.json" --kernel flash-fwd-dense --case 0 --out "$work/x"
expect_refusal "K/V strides 'expanded' are not laid out by the script for flash-fwd-varlen" "$work/case5.json" \
  --kernel flash-fwd-varlen --case 0 --out "$work/x"
"$fc" fixture new --out "$work/softcap.json" --title s --seqs 2x5 --softcap 5 --expect sdpa-math-cpu=pass > /dev/null 2>&1 || fail "softcap"
expect_refusal "sdpa-math-cpu takes no softcap" "$work/softcap.json" --kernel sdpa-math-cpu --case 0 --out "$work/x"
"$fc" fixture new --out "$work/dv.json" --title d --seqs 2x5 --head-dim 16 --v-head-dim 8 > /dev/null 2>&1 || fail "dv"
expect_refusal "outside cpu-flash's contract (does not support v_head_dim != head_dim)" "$work/dv.json" --kernel cpu-flash \
  --case 0 --out "$work/x"
# A user's file in --out is kept; --force replaces it; a second run replaces repro's own files.
mkdir -p "$work/user" && echo "my notes" > "$work/user/ISSUE.md"
expect_refusal "ISSUE.md" "$found" --out "$work/user"
grep -q "my notes" "$work/user/ISSUE.md" || fail "the user's ISSUE.md was replaced"
"$fc" repro "$found" --out "$work/user" --force > /dev/null 2>&1 && grep -q "written by flashcheck repro" "$work/user/ISSUE.md" ||
  fail "--force did not replace it"
"$fc" repro "$found" --out "$work/found" > /dev/null 2>&1 || fail "repro over its own files"
echo "repro: ok ($n layouts and paged and appended keys on 2 kernels, the finding, two plants, a raise, 14 refusals)"
