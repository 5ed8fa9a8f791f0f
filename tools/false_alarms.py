#!/usr/bin/env python3
"""The false-alarm run of issue 15: TOTAL conformance cases on correct kernels, held to the same rule as the
gate; every finding is a false alarm to analyse (its fixture lands in OUT/found).

    nohup python3 tools/false_alarms.py --total 1000000 --out out/false-alarms > /dev/null 2>&1 &
    cat out/false-alarms/summary.txt          # rewritten after every chunk

The kernels are the CPU ones by default, or every kernel of the build (`--kernels all`: on a GPU node, the
CPU and CUDA kernels together, as the `false-alarms` stage of ci/gpu.sh runs it). The total is split evenly
between the kernels, each share in chunks of --chunk cases with seeds 1000, 1001, ..., --jobs chunks at a time.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import threading
import time

KERNELS = ["tiled-cpu", "tiled-cpu-16x32", "sdpa-math-cpu", "cpu-flash"]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--total", type=int, default=1_000_000)
    ap.add_argument("--out", default="out/false-alarms")
    ap.add_argument("--chunk", type=int, default=50_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--flashcheck", default=os.path.join(root, "build/cpu/cli/flashcheck"))
    ap.add_argument("--kernels", default=",".join(KERNELS),
                    help="comma-separated kernel names, or 'all' for every kernel `flashcheck list --json` prints")
    a = ap.parse_args()
    if a.kernels == "all":
        listed = json.loads(subprocess.run([a.flashcheck, "list", "--json"], capture_output=True, text=True, check=True).stdout)
        kernels = [k["name"] for k in listed]
    else:
        kernels = [k for k in a.kernels.split(",") if k]
    os.makedirs(a.out, exist_ok=True)
    per_kernel = -(-a.total // len(kernels))
    chunks, seed = [], 1000
    for k in kernels:
        for done in range(0, per_kernel, a.chunk):
            chunks.append((k, min(a.chunk, per_kernel - done), seed))
            seed += 1
    lock, results, start = threading.Lock(), [], time.time()

    def summary():
        cases = sum(r["cases"] for r in results)
        findings = [f"{r['kernel']} seed {r['seed']}: {f['verdict']['verdict']} {f['verdict']['reason'][:100]} ({f.get('fixture', '')})"
                    for r in results for f in r["findings"]]
        lines = [f"{cases} conformance cases judged of {a.total} asked, {len(results)} of {len(chunks)} chunks, "
                 f"{time.time() - start:.0f} s, {len(findings)} findings (false alarms to analyse)"]
        by_kernel = {}
        for r in results:
            by_kernel.setdefault(r["kernel"], [0, 0, 0.0])
            by_kernel[r["kernel"]][0] += r["cases"]
            by_kernel[r["kernel"]][1] += r["unsupported"]
            by_kernel[r["kernel"]][2] = max(by_kernel[r["kernel"]][2], r["worst_bound_use"])
        for k, (n, u, w) in sorted(by_kernel.items()):
            lines.append(f"  {k}: {n} cases, {u} unsupported, worst err/bound {w:.3f}")
        lines += ["  " + f for f in findings]
        with open(os.path.join(a.out, "summary.txt.tmp"), "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(os.path.join(a.out, "summary.txt.tmp"), os.path.join(a.out, "summary.txt"))

    def run(chunk):
        k, n, s = chunk
        p = subprocess.run([a.flashcheck, "fuzz", "--kernel", k, "--property", "conformance", "--cases", str(n),
                            "--seed", str(s), "--out", os.path.join(a.out, "found"), "--json"],
                           capture_output=True, text=True)
        with open(os.path.join(a.out, f"{k}-{s}.json"), "w") as f:
            f.write(p.stdout)
        try:
            report = json.loads(p.stdout)[0]
        except (ValueError, IndexError):
            report = {"cases": 0, "unsupported": 0, "worst_bound_use": 0, "findings": [
                {"verdict": {"verdict": "error", "reason": f"exit {p.returncode}: {p.stderr[-200:]}"}}]}
        with lock:
            results.append(dict(report, kernel=k, seed=s))
            summary()

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        list(pool.map(run, chunks))


if __name__ == "__main__":
    main()
