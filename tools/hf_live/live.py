#!/usr/bin/env python3
"""tools/hf_live/live.py — the Python half of `flashcheck hf-live`: runs the transformers installed for this
interpreter on the cases of an export directory (`flashcheck export --out DIR`) and judges its paths.

  live.py run DIR [--kernel auto|reference|torch-fa2] [--paths flash,sdpa]   judge DIR once, print JSON
  live.py serve [--kernel ...]                                               the worker `flashcheck hf-live` starts

For every case: the release's eager attention (hfapi.Release.run_eager) is the truth; its flash-attention path runs
on the kernel (fa_kernels: the fp64 reference on CPU, torch's FlashAttention-2 on CUDA) and its SDPA path on torch;
each is judged by judge.py against the exact attention under eager's own mask. A path that raises is classified:
  raises     the exception came from transformers (or the kernel refusing the call transformers made): a bug
  api-break  the harness could not drive the release (an entry point is missing or its signature changed)
  unsupported  the kernel cannot take the call (softcap on torch's FA2), or the path has no such feature

serve protocol (one JSON object per line): the worker first prints {"hello": {...}}; then for each request line
{"dir": DIR, "paths": [...]} it prints {"results": [...]} (or {"error": "..."}). stdout carries nothing else.
"""
import argparse
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fa_kernels  # noqa: E402
import hfapi  # noqa: E402
import judge as judging  # noqa: E402

PATHS = ("flash", "sdpa")


def classify(exc, release):
    """Where an exception came from: 'raises' (transformers or the kernel it called) or 'api-break'."""
    if isinstance(exc, (fa_kernels.Unsupported, hfapi.NotInRelease)):
        return "unsupported"
    if isinstance(exc, hfapi.ApiBreak):
        return "api-break"
    tb = traceback.extract_tb(exc.__traceback__)
    tr_dir = os.path.dirname(release.transformers.__file__) if release else None
    for frame in reversed(tb):
        f = os.path.abspath(frame.filename)
        if tr_dir and f.startswith(tr_dir):
            return "raises"
        if f.endswith("fa_kernels.py"):
            return "raises"
        if f.startswith(HERE):
            # the harness called a release function with arguments it rejects: its API moved
            return "api-break" if isinstance(exc, (TypeError, AttributeError, ImportError, KeyError)) else "raises"
    return "raises"


def message(exc):
    if isinstance(exc, (fa_kernels.Unsupported, hfapi.NotInRelease)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}".strip()


def run_case(release, case, tol, paths):
    torch = release.torch
    res = {"name": case.name, "paths": {}}
    try:
        eager_out, eager_mask = release.run_eager(case)
    except Exception as e:  # noqa: BLE001
        kind = classify(e, release)
        res["paths"]["eager"] = {"verdict": "unsupported" if kind == "unsupported" else "error", "class": kind,
                                 "reason": f"eager: {message(e)}", "trace": traceback.format_exc(limit=-4)}
        return res
    res["paths"]["eager"] = {"verdict": "pass"}
    for path in paths:
        runner = {"flash": release.run_flash, "sdpa": release.run_sdpa}[path]
        if path == "sdpa" and case.softcap is not None:
            res["paths"][path] = {"verdict": "unsupported", "class": "unsupported",
                                  "reason": "SDPA has no softcap (models with one require eager)"}
            continue
        try:
            with torch.no_grad():
                out = runner(case)
        except Exception as e:  # noqa: BLE001
            kind = classify(e, release)
            res["paths"][path] = {"verdict": "unsupported" if kind == "unsupported" else "error", "class": kind,
                                  "reason": message(e), "trace": traceback.format_exc(limit=-4)}
            continue
        out = out.to("cpu") if hasattr(out, "to") else out
        j = judging.judge(torch, case, out, eager_out, eager_mask, tol)
        if j["verdict"] != "pass":
            j["class"] = "wrong-output"  # a wrong shape is the path's output too
        res["paths"][path] = j
    return res


def run_dir(release, root, paths):
    torch = release.torch
    manifest = hfapi.load_manifest(root)
    if "tolerance" not in manifest:
        raise hfapi.BadInput(f"{root}/manifest.json has no tolerance block (written by flashcheck export)")
    tol = judging.Tolerance(manifest["tolerance"])
    results = []
    for entry in manifest["cases"]:
        try:
            case = hfapi.Case(torch, entry, root)
        except hfapi.BadInput as e:
            results.append({"name": entry.get("name"), "bad_input": str(e)})
            continue
        results.append(run_case(release, case, tol, paths))
    return results


def start(kernel):
    import torch

    backend = kernel
    if backend == "auto":
        backend = "torch-fa2" if torch.cuda.is_available() else "reference"
    fa_kernels.install(backend)
    release = hfapi.Release(flash=True)
    if backend == "torch-fa2":
        torch.set_default_device("cuda")
    hello = {"transformers": release.version, "torch": torch.__version__, "kernel": backend,
             "python": sys.version.split()[0], "transformers_path": os.path.dirname(release.transformers.__file__),
             "probes": {"masking_utils": release.masking_utils is not None,
                        "attention_functions": release.attention_functions is not None,
                        "integrations.flash_attention": release.fai is not None,
                        "integrations.sdpa_attention": release.sdpai is not None,
                        "flash_checks_patched": release.flash_patched}}
    return release, hello


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("run", "serve"))
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--kernel", default="auto", choices=("auto", "reference", "torch-fa2"))
    ap.add_argument("--paths", default=",".join(PATHS))
    args = ap.parse_args(argv)
    paths = [p for p in args.paths.split(",") if p]
    for p in paths:
        if p not in PATHS:
            print(f"live.py: unknown path {p!r} (flash, sdpa)", file=sys.stderr)
            return 2
    out = sys.stdout
    sys.stdout = sys.stderr  # anything a release prints must not corrupt the protocol
    try:
        release, hello = start(args.kernel)
    except Exception as e:  # noqa: BLE001
        out.write(json.dumps({"error": f"cannot start: {message(e)}", "trace": traceback.format_exc()}) + "\n")
        out.flush()
        return 2
    if args.mode == "run":
        if not args.dir:
            print("live.py run: give the export directory", file=sys.stderr)
            return 2
        try:
            results = run_dir(release, args.dir, paths)
        except hfapi.BadInput as e:
            print(f"live.py: bad input: {e}", file=sys.stderr)
            return 2
        out.write(json.dumps({"hello": hello, "results": results}, indent=1) + "\n")
        return 0
    out.write(json.dumps({"hello": hello}) + "\n")
    out.flush()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            results = run_dir(release, req["dir"], req.get("paths") or paths)
            reply = {"results": results}
        except Exception as e:  # noqa: BLE001
            reply = {"error": message(e), "trace": traceback.format_exc()}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
