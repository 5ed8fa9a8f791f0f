#!/usr/bin/env python3
"""The false-alarm run of issue 15: conformance cases on correct kernels, held to the same rule as the gate;
every finding is a false alarm to analyse (its fixture lands in OUT/found-<kernel>-<seed>).

    nohup python3 tools/false_alarms.py --total 1000000 --out out/false-alarms > /dev/null 2>&1 &
    cat out/false-alarms/summary.txt          # rewritten after every chunk

The kernels are the CPU ones by default, or every kernel of the build (`--kernels all`: on a GPU node, the
CPU and CUDA kernels together, as the `false-alarms` stage of ci/gpu.sh runs it). Each slot runs chunks of
`fuzz --time --chunk-seconds` with seeds --first-seed, +1, ..., taking the kernels in turn, until --total
cases are judged or --seconds have passed. CUDA kernels get their own slots (--gpu-jobs): processes that
share one GPU without MPS take turns on it, and many of them make every case wait for its time slice.
Each chunk writes to its own folder, so that parallel runs of one kernel never share an in-flight record.
"""
import argparse
import itertools
import json
import os
import subprocess
import threading
import time

CPU_KERNELS = ["tiled-cpu", "tiled-cpu-16x32", "sdpa-math-cpu", "cpu-flash"]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--total", type=int, default=1_000_000, help="stop once this many cases are judged")
    ap.add_argument("--seconds", type=float, default=86400, help="start no chunk after this many seconds")
    ap.add_argument("--out", default="out/false-alarms")
    ap.add_argument("--chunk-seconds", type=float, default=60)
    ap.add_argument("--jobs", type=int, default=2, help="slots for CPU kernels")
    ap.add_argument("--gpu-jobs", type=int, default=1, help="slots for CUDA kernels")
    ap.add_argument("--first-seed", type=int, default=1000)
    ap.add_argument("--flashcheck", default=os.path.join(root, "build/cpu/cli/flashcheck"))
    ap.add_argument("--kernels", default=",".join(CPU_KERNELS),
                    help="comma-separated kernel names, or 'all' for every kernel `flashcheck list --json` prints")
    a = ap.parse_args()
    listed = json.loads(subprocess.run([a.flashcheck, "list", "--json"], capture_output=True, text=True, check=True).stdout)
    device = {k["name"]: k.get("device", "cpu") for k in listed}
    kernels = list(device) if a.kernels == "all" else [k for k in a.kernels.split(",") if k]
    unknown = [k for k in kernels if k not in device]
    if unknown:
        raise SystemExit(f"false_alarms.py: --kernels: unknown kernel(s) {', '.join(unknown)}")
    cpu = itertools.cycle([k for k in kernels if device[k] != "cuda"] or [None])
    gpu = itertools.cycle([k for k in kernels if device[k] == "cuda"] or [None])
    os.makedirs(a.out, exist_ok=True)
    lock, results, start, seeds = threading.Lock(), [], time.time(), itertools.count(a.first_seed)

    def judged():
        return sum(r["cases"] for r in results)

    def summary():
        findings = [f"{r['kernel']} seed {r['seed']}: {f['verdict']['verdict']} {f['verdict']['reason'][:100]} ({f.get('fixture', '')})"
                    for r in results for f in r["findings"]]
        lines = [f"{judged()} conformance cases judged ({a.total} asked), {len(results)} chunks, "
                 f"{time.time() - start:.0f} s, {len(findings)} findings (false alarms to analyse)"]
        by_kernel = {}
        for r in results:
            n, u, w = by_kernel.get(r["kernel"], (0, 0, 0.0))
            by_kernel[r["kernel"]] = (n + r["cases"], u + r["unsupported"], max(w, r["worst_bound_use"]))
        for k, (n, u, w) in sorted(by_kernel.items()):
            lines.append(f"  {k} ({device[k]}): {n} cases, {u} unsupported, worst err/bound {w:.3f}")
        lines += ["  " + f for f in findings]
        with open(os.path.join(a.out, "summary.txt.tmp"), "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(os.path.join(a.out, "summary.txt.tmp"), os.path.join(a.out, "summary.txt"))

    def slot(kernel_cycle):
        while True:
            with lock:
                k, s = next(kernel_cycle), next(seeds)
                left = a.seconds - (time.time() - start)
                if k is None or judged() >= a.total or left <= 1:
                    return
            t = min(a.chunk_seconds, left)
            p = subprocess.run([a.flashcheck, "fuzz", "--kernel", k, "--property", "conformance", "--time", f"{t:.1f}",
                                "--seed", str(s), "--out", os.path.join(a.out, f"found-{k}-{s}"), "--json"],
                               capture_output=True, text=True)
            try:
                report = json.loads(p.stdout)[0]
            except (ValueError, IndexError):
                report = {"cases": 0, "unsupported": 0, "worst_bound_use": 0, "findings": [
                    {"verdict": {"verdict": "error", "reason": f"exit {p.returncode}: {p.stderr[-200:]}"}}]}
            with lock:
                results.append(dict(report, kernel=k, seed=s))
                summary()

    threads = [threading.Thread(target=slot, args=(cpu,)) for _ in range(a.jobs)]
    threads += [threading.Thread(target=slot, args=(gpu,)) for _ in range(a.gpu_jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary()


if __name__ == "__main__":
    main()
