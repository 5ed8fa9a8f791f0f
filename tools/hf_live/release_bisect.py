#!/usr/bin/env python3
"""Release bisection for transformers (`flashcheck bisect`): the first release where a fixture's model cases fail on
the flash path, and the first release after it where they pass again.

Each probed release is installed side by side (tools/hf_live/install_release.sh, never into the build's venv) and
judged by `flashcheck hf-live` on the fixture's model cases alone (--generated 0): the release's flash path against
its own eager attention. A release is bad when a case fails there. The search assumes one bad interval: it first finds
a bad release (the releases the fixture's failing profiles claim, then evenly spaced probes), then binary-searches
the first bad release before it and the first fixed one after it, and says so where a probe contradicts that.

Usage: release_bisect.py --flashcheck PATH FIXTURE --transformers FROM..TO [--case NAME] [--releases V,V,...] [--out DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parts(v):
    out = []
    for p in v.split("."):
        m = re.match(r"\d+", p)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def is_final(v):
    return re.fullmatch(r"\d+(\.\d+)*", v) is not None


def pypi_releases(python):
    """Every final release of transformers that pip's index lists (the network: PyPI or the configured index)."""
    r = subprocess.run([python, "-m", "pip", "index", "versions", "transformers", "--disable-pip-version-check"],
                       capture_output=True, text=True, timeout=300)
    m = re.search(r"Available versions: (.*)", r.stdout)
    if r.returncode != 0 or not m:
        raise SystemExit("bisect: cannot list transformers' releases (pip index versions transformers): "
                         + (r.stderr.strip().splitlines() or ["no output"])[-1] + "; give them with --releases")
    return [v.strip() for v in m.group(1).split(",") if is_final(v.strip())]


def failing_profiles(fixture, case):
    """The profiles the fixture expects to fail or raise on its (selected) cases: where a bad release is likely."""
    names = set()
    for c in fixture.get("model_cases", []):
        if case and c.get("name") != case:
            continue
        for profile, e in c.get("expect", {}).items():
            if e.get("verdict") in ("fail", "error", "crash"):
                names.add(profile)
    return names


class Prober:
    def __init__(self, args, fixture_path, out):
        self.args, self.fixture_path, self.out = args, fixture_path, out
        self.results = {}  # version -> (bad or None, detail)

    def judge(self, v):
        if v in self.results:
            return self.results[v][0]
        install = subprocess.run(["bash", os.path.join(ROOT, "tools/hf_live/install_release.sh"), v],
                                 capture_output=True, text=True)
        if install.returncode != 0:
            self.results[v] = (None, "install failed: " + (install.stderr.strip().splitlines() or ["?"])[-1])
            print(f"  {v:<10} cannot judge: {self.results[v][1]}", flush=True)
            return None
        env = dict(os.environ, HF_VERSION=v)
        run = subprocess.run([self.args.flashcheck, "hf-live", "--python", os.path.join(ROOT, "tools/hf_live/python.sh"),
                              "--fixtures", self.fixture_path, "--generated", "0", "--path", "flash",
                              "--shrink-rounds", "0", "--json", "--out", os.path.join(self.out, v)],
                             capture_output=True, text=True, env=env)
        try:
            reports = json.loads(run.stdout)
            flash = next(r for r in reports if r.get("property") == "hf-live/flash")
        except (ValueError, StopIteration):
            self.results[v] = (None, "hf-live gave no report: " + (run.stderr.strip().splitlines() or ["?"])[-1])
            print(f"  {v:<10} cannot judge: {self.results[v][1]}", flush=True)
            return None
        if flash.get("cases", 0) == 0:
            self.results[v] = (None, "no case could be judged on this release")
        else:
            failures = flash.get("failures", 0)
            reason = ""
            for f in flash.get("findings", []):
                reason = re.sub(r"^\w+\s+-- ", "", f.get("line", ""))
                if reason:
                    break
            if not reason and flash.get("known_divergences"):
                reason = "known divergence " + ", ".join(sorted(flash["known_divergences"]))
            detail = f"{failures} of {flash['cases']} cases fail" + (f" ({reason[:140]})" if reason else "")
            self.results[v] = (failures > 0, detail)
        bad, detail = self.results[v]
        print(f"  {v:<10} {'bad ' if bad else 'good' if bad is not None else '?   '} {detail}", flush=True)
        return bad


def first_flip(prober, releases, lo, hi, want):
    """Binary search in releases[lo..hi] (releases[lo] is not `want`, releases[hi] is) for the first that is `want`."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r = prober.judge(releases[mid])
        if r is None:  # cannot judge: try the neighbours before giving up on the step
            for alt in (mid + 1, mid - 1):
                if lo < alt < hi and prober.judge(releases[alt]) is not None:
                    mid, r = alt, prober.judge(releases[alt])
                    break
            if r is None:
                return hi, False
        if r == want:
            hi = mid
        else:
            lo = mid
    return hi, True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixture")
    ap.add_argument("--transformers", required=True, metavar="FROM..TO")
    ap.add_argument("--flashcheck", required=True)
    ap.add_argument("--case", default="", help="only this model case of the fixture")
    ap.add_argument("--releases", default="", help="the candidate releases, comma-separated (default: PyPI's)")
    ap.add_argument("--out", default="", help="folder for the probes' hf-live output (default: a temporary one)")
    args = ap.parse_args()

    m = re.fullmatch(r"([0-9][0-9.]*)\.\.([0-9][0-9.]*)", args.transformers)
    if not m or parts(m.group(1)) > parts(m.group(2)):
        print(f"bisect: --transformers '{args.transformers}' is not FROM..TO with FROM <= TO (4.50.0..5.25.0)",
              file=sys.stderr)
        return 2
    try:
        with open(args.fixture) as f:
            fixture = json.load(f)
    except (OSError, ValueError) as e:
        print(f"bisect: {args.fixture}: {e}", file=sys.stderr)
        return 2
    cases = [c for c in fixture.get("model_cases", []) if not args.case or c.get("name") == args.case]
    if not cases:
        print(f"bisect: {args.fixture}: no model case{' named ' + args.case if args.case else ''} (bisect runs "
              "transformers releases on model-level cases)", file=sys.stderr)
        return 2
    python = open(os.path.join(ROOT, "build/python-for-torch")).read().strip() if os.path.exists(
        os.path.join(ROOT, "build/python-for-torch")) else sys.executable
    releases = [v.strip() for v in args.releases.split(",") if v.strip()] if args.releases else pypi_releases(python)
    releases = sorted({v for v in releases if is_final(v) and parts(m.group(1)) <= parts(v) <= parts(m.group(2))},
                      key=parts)
    if not releases:
        print(f"bisect: no release of transformers in {args.transformers}", file=sys.stderr)
        return 2

    out = args.out or tempfile.mkdtemp(prefix="flashcheck-bisect-")
    os.makedirs(out, exist_ok=True)
    # hf-live runs every model case of its fixtures: a copy holding the selected case only.
    path = args.fixture
    if args.case:
        path = os.path.join(out, "fixture.json")
        with open(path, "w") as f:
            json.dump(dict(fixture, model_cases=cases), f)
    prober = Prober(args, path, out)
    print(f"bisect {args.fixture}{' case ' + args.case if args.case else ''}: {len(releases)} releases "
          f"{releases[0]} .. {releases[-1]}", flush=True)

    # A bad release: those the failing profiles claim first, then evenly spaced probes.
    claimed = []
    profiles = failing_profiles(fixture, args.case)
    if profiles and os.path.exists(args.flashcheck):
        listed = json.loads(subprocess.run([args.flashcheck, "list", "--profiles", "--json"], capture_output=True,
                                           text=True).stdout or "[]")
        for p in listed:
            if p["name"] in profiles and p["first_release"]:
                claimed += [v for v in releases if parts(p["first_release"]) <= parts(v) <= parts(p["last_release"])][:1]
    stride = max(1, len(releases) // 8)
    order = claimed + [releases[i] for i in range(len(releases) // 2, len(releases), stride)] + \
        [releases[i] for i in range(len(releases) // 2 - 1, -1, -stride)]
    bad_at = None
    for v in dict.fromkeys(order):
        if prober.judge(v):
            bad_at = releases.index(v)
            break
    if bad_at is None:
        print(f"no probed release fails on this fixture ({len(prober.results)} probed)")
        return 1

    if bad_at == 0 or prober.judge(releases[0]):
        first_bad, note_bad = releases[0], f"bad already at {releases[0]}, the range's first: it starts earlier"
    elif prober.judge(releases[0]) is None:
        first_bad, note_bad = None, f"{releases[0]} cannot be judged"
    else:
        i, ok = first_flip(prober, releases, 0, bad_at, True)
        first_bad = releases[i]
        note_bad = f"after {releases[i - 1]}, good" if ok else "a release near it could not be judged"
    last = len(releases) - 1
    if prober.judge(releases[last]):
        first_fixed, note_fixed = None, f"still bad at {releases[last]}, the range's last"
    elif prober.judge(releases[last]) is None:
        first_fixed, note_fixed = None, f"{releases[last]} cannot be judged"
    else:
        i, ok = first_flip(prober, releases, bad_at, last, False)
        first_fixed = releases[i]
        note_fixed = f"after {releases[i - 1]}, bad" if ok else "a release near it could not be judged"
    # One bad interval is assumed: a probed good release inside it, or a bad one outside, says otherwise.
    lo = parts(first_bad) if first_bad else ()
    hi = parts(first_fixed) if first_fixed else (10 ** 9,)
    odd = [v for v, (b, _) in prober.results.items() if b is not None and b != (lo <= parts(v) < hi)]
    print(f"first bad: {first_bad or '?'} ({note_bad}); first fixed: {first_fixed or 'none in range'} ({note_fixed})")
    if odd:
        print(f"not one interval: {', '.join(sorted(odd, key=parts))} disagree with it (bisection assumes one)")
    print(f"{len(prober.results)} releases probed; hf-live output under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
