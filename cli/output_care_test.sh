#!/usr/bin/env bash
# The report writers of merge and gate never damage what is there (issue 29): a user's file of the same name in
# --out, or a link in its place, is refused (exit 2, named) unless --force; --force replaces the link, not what it
# points to; a file size limit (ulimit -f) leaves the previous report whole with a clear error instead of SIGXFSZ;
# a FIFO in place of the journal is refused at once; two fuzz runs cannot share an output folder.
#
#   cli/output_care_test.sh FLASHCHECK WORKDIR
set -uo pipefail
fc=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect CODES PATTERN COMMAND...: an exit code among CODES ("01": 0 or 1) and a line of stderr
  local codes=$1 pattern=$2; shift 2
  "$@" > "$work/out.log" 2> "$work/err.log"; local rc=$?
  [[ "$codes" == *"$rc"* ]] || { cat "$work/err.log"; fail "$* exited $rc, not ${codes}"; }
  [ -z "$pattern" ] || grep -q -- "$pattern" "$work/err.log" || { cat "$work/err.log"; fail "$*: stderr lacks '$pattern'"; }
}

"$fc" campaign --out "$work/c" --kernel tiled-cpu --cases 40 --seed 3 --max-len 32 > /dev/null 2>&1 || fail "the campaign"

# A user's summary.md in --out: refused, untouched; --force replaces it. (A merge exits 0 or 1 by what it found.)
mkdir -p "$work/m1" && echo "my notes" > "$work/m1/summary.md"
expect 2 "summary.md: exists and was not written by this command" "$fc" merge "$work/c" --out "$work/m1" --no-html
[ "$(cat "$work/m1/summary.md")" = "my notes" ] || fail "the user's summary.md was changed"
[ ! -e "$work/m1/report.json" ] || fail "merge wrote report.json although it refused the folder"
expect 01 "" "$fc" merge "$work/c" --out "$work/m1" --no-html --force
grep -q "^# flashcheck campaign merge" "$work/m1/summary.md" || fail "--force did not replace summary.md"
expect 01 "" "$fc" merge "$work/c" --out "$work/m1" --no-html  # its own files: replaced without --force

# A link in place of report.json, pointing outside: refused; --force replaces the link, the target stays.
mkdir -p "$work/m2" && echo "outside" > "$work/outside.json" && ln -s "$work/outside.json" "$work/m2/report.json"
expect 2 "report.json: is a symbolic link" "$fc" merge "$work/c" --out "$work/m2" --no-html
expect 01 "" "$fc" merge "$work/c" --out "$work/m2" --no-html --force
[ "$(cat "$work/outside.json")" = "outside" ] || fail "merge wrote through the link"
[ ! -L "$work/m2/report.json" ] || fail "the link is still there"

# Past a file size limit: exit 2 naming the error, the previous report.json whole.
cp "$work/m1/report.json" "$work/before.json"
expect 2 "File too large" bash -c "ulimit -f 1; exec \"$fc\" merge \"$work/c\" --out \"$work/m1\" --no-html"
cmp -s "$work/m1/report.json" "$work/before.json" || fail "the previous report.json was changed"
ls "$work/m1" | grep -q "\.tmp-" && fail "a temporary file was left in $work/m1"

# The gate refuses a user's file before it runs, not after minutes of work.
mkdir -p "$work/g" && echo "<mine/>" > "$work/g/junit.xml"
expect 2 "junit.xml: exists and was not written by this command" timeout 60 "$fc" gate --out "$work/g" --kernel tiled-cpu
[ "$(cat "$work/g/junit.xml")" = "<mine/>" ] || fail "the user's junit.xml was changed"

# Two fuzz runs with one --out: the second is refused while the first writes there.
"$fc" fuzz --kernel tiled-cpu --time 6 --seed 5 --out "$work/fz" > /dev/null 2>&1 &
first=$!
for _ in $(seq 1 100); do [ -e "$work/fz/.flashcheck-fuzz.lock" ] && break; sleep 0.05; done
expect 2 "another flashcheck fuzz is writing into this folder" "$fc" fuzz --kernel tiled-cpu --cases 5 --out "$work/fz"
wait "$first" || [ $? -eq 1 ] || fail "the first fuzz run"
expect 01 "" "$fc" fuzz --kernel tiled-cpu --cases 5 --out "$work/fz"  # the lock went with the first run

# A FIFO as the journal: refused at once, no read that waits for a writer.
mkdir -p "$work/f" && cp "$work/c/campaign.json" "$work/f/" && mkfifo "$work/f/journal.jsonl"
expect 2 "not a regular file" timeout 20 "$fc" merge "$work/f" --out "$work/m3" --no-html
echo "ok"
