#!/usr/bin/env python3
"""The false-alarm run: cases on correct kernels, held to the same rule as the gate; every finding is a false
alarm to analyse (its fixture lands in OUT/found-<kernel>-<seed>).

    nohup python3 tools/false_alarms.py --total 1000000 --out out/false-alarms > /dev/null 2>&1 &
    python3 tools/false_alarms.py --properties grad --total 1000000 --out out/false-alarms-bwd   # the backward
    cat out/false-alarms/summary.txt          # rewritten after every chunk

--properties names the properties to run (comma-separated; "grad" stands for every gradient property, which
run only on kernels whose contract has a backward). Chunks take the (kernel, property) pairs in turn.

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
GRADIENT_PROPERTIES = ["grad-conformance", "grad-determinism", "grad-gqa", "grad-varlen-padded",
                       "grad-batch-permutation", "grad-masked-zero", "grad-robustness", "grad-fd"]


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
    ap.add_argument("--properties", default="conformance", help="comma-separated properties, or 'grad'")
    ap.add_argument("--kernels", default=",".join(CPU_KERNELS),
                    help="comma-separated kernel names, or 'all' for every kernel `flashcheck list --json` prints")
    a = ap.parse_args()
    listed = json.loads(subprocess.run([a.flashcheck, "list", "--json"], capture_output=True, text=True, check=True).stdout)
    device = {k["name"]: k.get("device", "cpu") for k in listed}
    backward = {k["name"] for k in listed if "backward" in k}
    properties = []
    for p in a.properties.split(","):
        properties += GRADIENT_PROPERTIES if p == "grad" else [p] if p else []
    kernels = list(device) if a.kernels == "all" else [k for k in a.kernels.split(",") if k]
    unknown = [k for k in kernels if k not in device]
    if unknown:
        raise SystemExit(f"false_alarms.py: --kernels: unknown kernel(s) {', '.join(unknown)}")
    def pairs(on_gpu):
        return [(k, p) for p in properties for k in kernels if (device[k] == "cuda") == on_gpu
                and (not p.startswith("grad-") or k in backward)] or [None]
    cpu = itertools.cycle(pairs(False))
    gpu = itertools.cycle(pairs(True))
    os.makedirs(a.out, exist_ok=True)
    lock, results, start, seeds = threading.Lock(), [], time.time(), itertools.count(a.first_seed)

    def judged():
        return sum(r["cases"] for r in results)

    def summary():
        findings = [f"{r['kernel']} / {r['property']} seed {r['seed']}: {f['verdict']['verdict']} "
                    f"{f['verdict']['reason'][:100]} ({f.get('fixture', '')})" for r in results for f in r["findings"]]
        lines = [f"{judged()} cases judged ({a.total} asked; {', '.join(properties)}), {len(results)} chunks, "
                 f"{time.time() - start:.0f} s, {len(findings)} findings (false alarms to analyse)"]
        by_pair = {}
        for r in results:
            n, u, w = by_pair.get((r["kernel"], r["property"]), (0, 0, 0.0))
            by_pair[(r["kernel"], r["property"])] = (n + r["cases"], u + r["unsupported"], max(w, r["worst_bound_use"]))
        for (k, prop), (n, u, w) in sorted(by_pair.items()):
            lines.append(f"  {k} ({device[k]}) {prop}: {n} cases, {u} unsupported, worst err/bound {w:.3f}")
        lines += ["  " + f for f in findings]
        with open(os.path.join(a.out, "summary.txt.tmp"), "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(os.path.join(a.out, "summary.txt.tmp"), os.path.join(a.out, "summary.txt"))

    def slot(kernel_cycle):
        while True:
            with lock:
                pair, s = next(kernel_cycle), next(seeds)
                left = a.seconds - (time.time() - start)
                if pair is None or judged() >= a.total or left <= 1:
                    return
                k, prop = pair
            t = min(a.chunk_seconds, left)
            p = subprocess.run([a.flashcheck, "fuzz", "--kernel", k, "--property", prop, "--time", f"{t:.1f}",
                                "--seed", str(s), "--out", os.path.join(a.out, f"found-{k}-{s}"), "--json"],
                               capture_output=True, text=True)
            try:
                report = json.loads(p.stdout)[0]
            except (ValueError, IndexError):
                report = {"cases": 0, "unsupported": 0, "worst_bound_use": 0, "findings": [
                    {"verdict": {"verdict": "error", "reason": f"exit {p.returncode}: {p.stderr[-200:]}"}}]}
            with lock:
                results.append(dict(report, kernel=k, property=prop, seed=s))
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
