#!/usr/bin/env python3
"""Replays the hostile corpus (tools/hostile/make_corpus.py) against `flashcheck` and tallies the outcomes.

    python3 tools/hostile/run_corpus.py --flashcheck build/cpu/cli/flashcheck --corpus build/hostile \
        [--jobs 2] [--sample 300] [--timeout 30] [--memory-mb 3072] [--rss-mb 1024] [--json OUT] [--no-commands]

Each file runs as `flashcheck replay FILE --kernel tiled-cpu --timeout 10` in a process of its own, under a
wall-clock limit (--timeout: past it the process group is killed and the file counts as a hang) and an
address-space limit (--memory-mb, ulimit -v); its peak resident memory comes from wait4. Outcomes:

  clean-error      exit 2, and the message names the file and (where the corpus knows it) the field or case
  unclear-error    exit 2, but the message does not name the file, or names neither the field nor its case
  ran              exit 0 or 1 on a file that may be valid (a legal variant replays normally)
  accepted-invalid exit 0 or 1 on a file the corpus marks invalid
  signal           the harness process itself died by a signal (an abort, a segfault)
  hang             no answer within --timeout
  memory           peak RSS above --rss-mb, or an out-of-memory message
  other            any other exit status

Faults (--faults N tries): replay workers SIGKILLed at random moments, and a full disk under fuzz --out (see
faults()). The hostile command lines (commands.json) run the same way, each against what it must do: "usage" (exit 2
with a message), "ok" (exit 0), "finding" (exit 1; --max_fixtures bounds the fixtures it may write; "keeps"
checks that a rerun left the earlier run's files as they were). Exit status: 0 when every file and command
behaved, 1 otherwise. --sample N replays a stratified sample (the same fraction of every class, N in all).
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time

BAD = ("unclear-error", "accepted-invalid", "signal", "hang", "memory", "other")


def run(argv, timeout, memory_mb, cwd=None):
    """(status, seconds, peak RSS in MiB, stdout, stderr); status is the exit code, -signal, or None (hang)."""
    def limits():
        os.setsid()
        if memory_mb:
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=limits, cwd=cwd)
        status, rss = None, 0
        while True:
            pid, st, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(st)
                rss = usage.ru_maxrss / 1024
                break
            if time.monotonic() - start > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                _, st, usage = os.wait4(p.pid, 0)
                rss = usage.ru_maxrss / 1024
                break
            time.sleep(0.01)
        p.returncode = 0  # reaped here: keep Popen from waiting again
        seconds = time.monotonic() - start
        try:
            os.killpg(p.pid, signal.SIGKILL)  # workers left behind by a killed parent
        except ProcessLookupError:
            pass
        out.seek(0)
        err.seek(0)
        return status, seconds, rss, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


def classify_file(entry, corpus, fc, a):
    path = os.path.join(corpus, entry["path"])
    status, seconds, rss, out, err = run([fc, "replay", path, "--kernel", "tiled-cpu", "--timeout", "10"],
                                         a.timeout, a.memory_mb)
    message = next((l for l in err.splitlines() if l.startswith("flashcheck replay:")), err.strip()[-300:])
    if status is None:
        outcome = "hang"
    elif status < 0:
        outcome = "signal"
    elif rss > a.rss_mb or "out of memory" in err or "bad_alloc" in err:
        outcome = "memory"
    elif status == 2:
        names_file = entry["path"].split("/")[-1] in message or os.path.basename(path) in message or \
            os.path.dirname(entry["path"]) in message
        names_field = not entry.get("field") and not entry.get("scope") or \
            (entry.get("field") and entry["field"] in message) or (entry.get("scope") and entry["scope"] in message)
        outcome = "clean-error" if names_file and names_field else "unclear-error"
    elif status in (0, 1):
        outcome = "accepted-invalid" if entry["refuse"] else "ran"
    else:
        outcome = "other"
    return dict(entry, outcome=outcome, status=status, seconds=round(seconds, 2), rss_mb=round(rss), message=message[:400])


def fill(s, a):
    return s.replace("{CORPUS}", os.path.abspath(a.corpus)).replace("{FIXTURES}", os.path.abspath(a.fixtures))


def tree_digest(folder):
    """{path: sha256} of every file under a folder."""
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.join(root, f)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def classify_command(cmd, fc, a, digests):
    argv = [fc] + [fill(x, a) for x in cmd["argv"]]
    keeps = fill(cmd["keeps"], a) if "keeps" in cmd else None
    before = digests.get(keeps) if keeps else None
    status, seconds, rss, out, err = run(argv, a.timeout * 4, a.memory_mb)
    want = {"usage": 2, "ok": 0, "finding": 1}[cmd["expect"]]
    message = (err.strip().splitlines() or [""])[-1]
    if status is None:
        outcome = "hang"
    elif status < 0:
        outcome = "signal"
    elif rss > a.rss_mb:
        outcome = "memory"
    elif status != want:
        outcome = "other"
    elif want == 2 and not message.strip():
        outcome = "unclear-error"
    else:
        outcome = "clean-error" if want == 2 else "ran"
    if outcome == "ran" and "max_fixtures" in cmd:
        found = [f for f in os.listdir(fill(cmd["out"], a)) if f.endswith(".json") and not f.startswith("inflight")]
        if len(found) > cmd["max_fixtures"]:
            outcome, message = "other", f"{len(found)} fixtures written for --cases {cmd['max_fixtures']}"
    if keeps and outcome == "ran":
        now = tree_digest(keeps)
        if before is not None and any(now.get(p) != h for p, h in before.items()):
            outcome, message = "other", "the rerun changed or removed files the first run wrote"
    if keeps is None and "argv" in cmd and "--out" in cmd["argv"]:
        folder = fill(cmd["argv"][cmd["argv"].index("--out") + 1], a)
        if os.path.isdir(folder):
            digests[folder] = tree_digest(folder)
    return dict(path=" ".join(cmd["argv"]) or "(no arguments)", **{"class": "command"}, refuse=cmd["expect"] == "usage",
                outcome=outcome, status=status, seconds=round(seconds, 2), rss_mb=round(rss), message=message[:400])


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def faults(fc, a, tries):
    """Faults while running: worker processes SIGKILLed at random moments of a replay (the parent must keep the
    records and finish), and a full disk under `fuzz --out` (a tmpfs of 12 KiB in a private mount namespace,
    where `unshare` allows one): exit 2 naming the write that failed, the report of the cases judged so far,
    no empty or partial file left."""
    rng = random.Random(a.sample_seed)
    records = []
    for t in range(tries):
        with tempfile.TemporaryFile() as out:
            start = time.monotonic()
            p = subprocess.Popen([fc, "replay", a.fixtures, "--kernel", "tiled-cpu", "--kernel", "cpu-flash"],
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            killed = 0
            deadline = time.monotonic() + rng.uniform(0.2, 2.0)
            while p.poll() is None and time.monotonic() < deadline + 1.0 and killed < 3:
                time.sleep(0.01)
                if time.monotonic() >= deadline:
                    kids = children(p.pid)
                    if kids:
                        os.kill(rng.choice(kids), signal.SIGKILL)
                        killed += 1
                        deadline = time.monotonic() + rng.uniform(0.05, 0.5)
            try:
                # The whole corpus on two kernels, not one file: about 12 s alone on two cores, and CI runs it beside
                # the plugin checks, so its limit is the per-command one (--timeout x 4), not the per-file one.
                status = p.wait(a.timeout * 4)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                status = None
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
        summary = next((l for l in text.splitlines() if "case-kernel runs" in l), "")
        outcome = "hang" if status is None else "signal" if status < 0 else \
            "ran" if status in (0, 1) and summary else "other"
        records.append(dict(path=f"replay, {killed} worker(s) killed (try {t + 1})", **{"class": "fault"}, refuse=False,
                            outcome=outcome, status=status, seconds=round(time.monotonic() - start, 2), rss_mb=0,
                            message=summary or text[-300:]))
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode == 0:
        with tempfile.TemporaryDirectory() as d:
            mnt = os.path.join(d, "full")
            os.makedirs(mnt)
            script = (f"mount -t tmpfs -o size=12k tmpfs {mnt} && {fc} fuzz --kernel mutant-top-left-causal --cases 60 "
                      f"--out {mnt}; echo exit=$?; for f in {mnt}/*; do [ -s \"$f\" ] || echo EMPTY $f; "
                      f"case $f in *.json) python3 -c 'import json,sys; json.load(open(sys.argv[1]))' $f || echo PARTIAL $f;; esac; done")
            r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                               capture_output=True, text=True, timeout=a.timeout * 4)
            text = r.stdout + r.stderr
            ok = "exit=2" in text and "No space left on device" in text and "cases in" in text and \
                "EMPTY" not in text and "PARTIAL" not in text
            records.append(dict(path="fuzz --out on a full disk", **{"class": "fault"}, refuse=True,
                                outcome="clean-error" if ok else "other", status=2 if "exit=2" in text else None,
                                seconds=0, rss_mb=0, message=next((l for l in text.splitlines() if "stopped" in l), text[-300:])))
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flashcheck", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(__file__), "..", "..", "fixtures"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", type=int, default=0, help="replay a stratified sample of this many files")
    ap.add_argument("--sample-seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--memory-mb", type=int, default=3072, help="address-space limit of each run (ulimit -v)")
    ap.add_argument("--rss-mb", type=int, default=1024, help="peak RSS past which a run counts as a memory blow-up")
    ap.add_argument("--json", help="write every record here")
    ap.add_argument("--no-commands", action="store_true")
    ap.add_argument("--faults", type=int, default=10, help="replays whose workers are killed at random moments")
    a = ap.parse_args()
    fc = os.path.abspath(a.flashcheck)
    entries = json.load(open(os.path.join(a.corpus, "manifest.json")))
    if a.sample and a.sample < len(entries):
        rng = random.Random(a.sample_seed)
        by_class = {}
        for e in entries:
            by_class.setdefault(e["class"], []).append(e)
        picked = []
        for cls, es in sorted(by_class.items()):
            picked += rng.sample(es, max(1, round(a.sample * len(es) / len(entries))))
        entries = picked
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        records = list(pool.map(lambda e: classify_file(e, a.corpus, fc, a), entries))
    if not a.no_commands:
        digests = {}
        for cmd in json.load(open(os.path.join(a.corpus, "commands.json"))):  # in order: reruns follow their first run
            records.append(classify_command(cmd, fc, a, digests))
        records += faults(fc, a, a.faults)
    seconds = time.monotonic() - start
    # A tensors-flip variant may be valid (a flip inside the float data) or not: either answer is right.
    for r in records:
        if r["outcome"] == "accepted-invalid" and r["refuse"] is None:
            r["outcome"] = "ran"
    outcomes = ["clean-error", "ran"] + list(BAD)
    table = {}
    for r in records:
        table.setdefault(r["class"], {o: 0 for o in outcomes})[r["outcome"]] += 1
    total = {o: sum(t[o] for t in table.values()) for o in outcomes}
    print(f"| class | files | " + " | ".join(outcomes) + " |")
    print("|---|---:|" + "---:|" * len(outcomes))
    for cls, t in sorted(table.items()):
        print(f"| {cls} | {sum(t.values())} | " + " | ".join(str(t[o]) for o in outcomes) + " |")
    print(f"| **all** | {len(records)} | " + " | ".join(str(total[o]) for o in outcomes) + " |")
    print(f"\n{len(records)} runs in {seconds:.0f} s; peak RSS of any run {max(r['rss_mb'] for r in records)} MiB")
    bad = [r for r in records if r["outcome"] in BAD]
    for r in bad[:40]:
        print(f"{r['outcome']:>16}  {r['path']}  [{r['status']}, {r['seconds']} s, {r['rss_mb']} MiB]  {r['message'][:200]}")
    if len(bad) > 40:
        print(f"... and {len(bad) - 40} more")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"seconds": seconds, "totals": total, "records": records}, f, indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
