#!/usr/bin/env bash
# JUnit XML from every command that writes it (fuzz, replay, merge here; the gate's goes through the same renderer,
# report/junit.h), read back by a strict XML 1.0 parser (Python's expat) with a kernel whose error message holds
# escape sequences, control characters and markup, and a fixture whose file name holds a control character.
set -uo pipefail
fc=$1 work=$2
rm -rf "$work" && mkdir -p "$work/mod"
fail() { echo "FAIL: $*"; exit 1; }
cat > "$work/mod/hostile_kernel.py" <<'PY'
CONTRACT = {"summary": "raises a message full of what XML cannot hold", "device": "cpu", "dtypes": ["fp32"],
            "max_head_dim": 256, "empty_row": "zero"}


def attention(*args, **kwargs):
    raise ValueError("\x1b[31mboom\x01 <&> \"quoted\" ]]>\x1b[0m")
PY
export PYTHONPATH="$work/mod${PYTHONPATH:+:$PYTHONPATH}"
# check FILE TESTS FAILURES TEXT: well-formed, the counts, and TEXT in some failure's message or body.
check() {
  python3 - "$@" <<'PY' || fail "$1 is not what a CI system would read: see above"
import sys, xml.etree.ElementTree as ET
path, tests, failures, text = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
suite = ET.parse(path).getroot().find("testsuite")
got = (int(suite.get("tests")), int(suite.get("failures")))
bodies = [(f.get("message") or "") + (f.text or "") for f in suite.iter("failure")]
if got != (tests, failures) or not any(text in b for b in bodies):
    sys.exit(f"{path}: tests/failures {got}, wanted {(tests, failures)}; failures: {bodies}")
PY
}
"$fc" fuzz --kernel py:hostile_kernel:attention --cases 3 --out "$work/fuzz" --junit "$work/fuzz.xml" > "$work/fuzz.log" 2>&1
[ $? = 1 ] || fail "fuzz on a raising kernel: $(tail -5 "$work/fuzz.log")"
check "$work/fuzz.xml" 1 1 'boom? <&> "quoted" ]]>'
name=$(printf 'ctl\001name.json')
"$fc" fixture new --out "$work/$name" --title t --seqs 2x3 --dtype fp32 > /dev/null 2>&1 || fail "fixture new"
"$fc" replay "$work/$name" --kernel py:hostile_kernel:attention --kernel tiled-cpu --junit "$work/replay.xml" \
  > "$work/replay.log" 2>&1
[ $? = 1 ] || fail "replay of an erroring kernel: $(tail -5 "$work/replay.log")"
check "$work/replay.xml" 2 1 'boom?'
python3 -c "import sys,xml.etree.ElementTree as E; n=[c.get('name') for c in E.parse(sys.argv[1]).iter('testcase')]; sys.exit(0 if all(x.startswith(sys.argv[2]) for x in n) else n)" \
  "$work/replay.xml" "$work/ctl?name.json#0" || fail "the file name's control character was not replaced"
"$fc" campaign --out "$work/campaign" --kernel py:hostile_kernel:attention --cases 3 --workers 1 > "$work/campaign.log" 2>&1
"$fc" merge "$work/campaign" --out "$work/merged" --no-html --junit "$work/merge.xml" > "$work/merge.log" 2>&1
[ $? = 1 ] || fail "merge of a failing campaign: $(tail -5 "$work/merge.log")"
check "$work/merge.xml" 1 1 'boom?'
cmp -s "$work/merge.xml" "$work/merged/junit.xml" || fail "merge --junit differs from the folder's junit.xml"
echo "junit: ok"
