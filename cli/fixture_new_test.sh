#!/usr/bin/env bash
# `flashcheck fixture new` end to end: a case from flags that reproduces flash-attention#466 on the mutant that plants
# it replays as the known bug and passes on a correct kernel; the same case expected to pass on the mutant is caught;
# an invalid case names its field; an existing file is never overwritten.
set -uo pipefail
fc=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# Causal with fewer queries than keys: top-left alignment differs from the bottom-right the kernels promise.
"$fc" fixture new --out "$work/466.json" --title "causal alignment with q_len < k_len" --source \
  https://github.com/Dao-AILab/flash-attention/issues/466 --seqs 2x5,3x9 --heads 4 --kv-heads 2 --causal --dtype fp32 \
  --expect "mutant-top-left-causal=fail:aligns the causal mask top-left" --expect tiled-cpu=pass > "$work/new.log" 2>&1 ||
  fail "fixture new: $(cat "$work/new.log")"
grep -q "replay it: .* replay $work/466.json" "$work/new.log" || fail "no replay line: $(cat "$work/new.log")"
"$fc" replay "$work/466.json" --kernel mutant-top-left-causal --kernel tiled-cpu --verbose > "$work/replay.log" 2>&1 ||
  fail "replay of the new fixture: $(tail -5 "$work/replay.log")"
grep -qE '^xfail +mutant-top-left-causal' "$work/replay.log" || fail "the mutant did not fail as expected: $(cat "$work/replay.log")"
# The same case expected to pass on the mutant: replay reports the bug (exit 1).
"$fc" fixture new --out "$work/wrong.json" --title t --seqs 2x5,3x9 --heads 4 --kv-heads 2 --causal --dtype fp32 \
  --expect mutant-top-left-causal=pass > /dev/null 2>&1 || fail "fixture new (wrong expectation)"
"$fc" replay "$work/wrong.json" --kernel mutant-top-left-causal > "$work/wrong.log" 2>&1
[ $? = 1 ] || fail "a fixture expecting the mutant to pass replayed clean: $(tail -3 "$work/wrong.log")"
# Bad input: exit 2 with the field and reason, and nothing written.
"$fc" fixture new --out "$work/bad.json" --title t --seqs 1x7 --heads 6 --kv-heads 4 > "$work/bad.log" 2>&1
[ $? = 2 ] && grep -q "cases\[0\].kv_heads: heads 6 is not a multiple of kv_heads 4" "$work/bad.log" && [ ! -e "$work/bad.json" ] ||
  fail "an invalid case: $(cat "$work/bad.log")"
cp "$work/466.json" "$work/466.before"
"$fc" fixture new --out "$work/466.json" --title t --seqs 1x1 > "$work/again.log" 2>&1
[ $? = 2 ] && grep -q "exists" "$work/again.log" && cmp -s "$work/466.json" "$work/466.before" ||
  fail "an existing fixture was not kept: $(cat "$work/again.log")"
echo "fixture new: ok"
