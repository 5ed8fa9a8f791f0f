#!/usr/bin/env bash
# Inside GitHub Actions (GITHUB_ACTIONS=true) replay and fuzz print one `::error` annotation per failure, naming the
# fixture, and append a Markdown summary to $GITHUB_STEP_SUMMARY; with --json stdout stays JSON; outside Actions
# neither appears.
set -uo pipefail
fc=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
fixture=fixtures/issues/flash-attention-466.json

GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY="$work/summary.md" "$fc" replay "$fixture" --kernel mutant-top-left-causal \
  > "$work/replay.out" 2>&1
[ $? = 1 ] || fail "replay of a mutant should exit 1"
n=$(grep -c "^::error file=$fixture,title=replay.mutant-top-left-causal $fixture#[0-9]%3A fail::fail " "$work/replay.out")
[ "$n" = 3 ] || { cat "$work/replay.out"; fail "wanted 3 annotations on $fixture, got $n"; }
grep -q "^### flashcheck-replay: FAIL" "$work/summary.md" || fail "no summary in GITHUB_STEP_SUMMARY"
grep -q "| 0 | 3 | 2 |" "$work/summary.md" || { cat "$work/summary.md"; fail "summary counts"; }

GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY="$work/summary.md" "$fc" fuzz --kernel mutant-top-left-causal --cases 100 \
  --seed 1 --out "$work/fuzz" --json > "$work/fuzz.json" 2> "$work/fuzz.err"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$work/fuzz.json" || fail "--json output is not JSON in Actions"
grep -q "^### flashcheck-fuzz: FAIL" "$work/summary.md" || fail "fuzz added no summary"

GITHUB_ACTIONS=true "$fc" fuzz --kernel mutant-top-left-causal --cases 100 --seed 1 --out "$work/fuzz2" \
  > "$work/fuzz2.out" 2>&1
grep -q "^::error file=$work/fuzz2/[0-9a-f]*.json,title=fuzz.mutant-top-left-causal conformance" "$work/fuzz2.out" ||
  { cat "$work/fuzz2.out"; fail "fuzz annotation should name its found fixture"; }

env -u GITHUB_ACTIONS "$fc" replay "$fixture" --kernel mutant-top-left-causal > "$work/plain.out" 2>&1
! grep -q "^::error" "$work/plain.out" || fail "annotations outside GitHub Actions"
echo "github annotations ok"
