#!/usr/bin/env python3
"""tools/hf_live/live.py — the Python half of `flashcheck hf-live`: runs the transformers installed for this
interpreter on the cases of an export directory (`flashcheck export --out DIR`) and judges its paths.

  live.py run DIR [--kernel auto|reference|torch-fa2] [--paths flash,sdpa] [--backward]   judge DIR, print JSON
  live.py serve [--kernel ...]                                               the worker `flashcheck hf-live` starts

For every case: the release's eager attention (hfapi.Release.run_eager) is the truth; its flash-attention path runs
on the kernel (fa_kernels: the fp64 reference on CPU, torch's FlashAttention-2 on CUDA) and its SDPA path on torch;
each is judged by judge.py against the exact attention under eager's own mask. A path that raises is classified:
  raises     the exception came from transformers (or the kernel refusing the call transformers made): a bug
  api-break  the harness could not drive the release (an entry point is missing or its signature changed)
  unsupported  the kernel cannot take the call (softcap on torch's FA2), or the path has no such feature

With --backward (a request's "backward": true) every training-shaped case (no past, no KV cache, not inside
generate()) also gets "<path>-backward" results: the gradients of <dO, out> w.r.t. q, k and v through the release's
own code with autograd (eager in the model dtype, the flash path on the differentiable reference kernel, SDPA),
judged against the exact fp64 gradients under eager's mask by judge.judge_gradients. dO is seeded from the case
name and zero on rows that are not comparable. A path whose forward already fails gets its forward's verdict and
class, marked "inherited" (one bug, reported once). The reply then also holds "model_backward", a training step
of a tiny Llama (model_backward.py; a request's "model_backward": false leaves it out).

serve protocol (one JSON object per line): the worker first prints {"hello": {...}}; then for each request line
{"dir": DIR, "paths": [...], "backward": bool, "model_backward": bool} it prints {"results": [...]} (with
"model_backward": {...} when asked) or {"error": "..."}. stdout carries nothing else.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fa_kernels  # noqa: E402
import hfapi  # noqa: E402
import judge as judging  # noqa: E402
import model_backward  # noqa: E402

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


def run_case(release, case, tol, paths, backward=False):
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
    if backward:
        res["paths"].update(run_backward(release, case, tol, paths, res["paths"], eager_mask))
    return res


# --- the backward -------------------------------------------------------------------------------------------------


def unsupported(reason):
    return {"verdict": "unsupported", "class": "unsupported", "reason": reason}


def make_dout(torch, case, comparable):
    """dO [B, Lq, Hq, D]: normal values seeded from the case name, rounded to the dtype, zero on rows that are not
    comparable (training masks padding out of the loss; eager's uniform weights on rows without a key must not
    count)."""
    seed = int.from_bytes(hashlib.sha256(case.name.encode()).digest()[:8], "little") & ((1 << 63) - 1)
    gen = torch.Generator().manual_seed(seed)
    d = torch.randn(case.B, case.Lq, case.Hq, case.D, generator=gen, dtype=torch.float64)
    return (d * comparable[:, :, None, None]).to(case.dtype)


def gradients_through(release, runner, case, dout):
    """{dq, dk, dv}: autograd of <dO, out> through one of the release's paths, from fresh leaves of the case's
    q, k, v; None for an input the path cut from its output."""
    torch = release.torch
    leaves = [t.detach().clone().requires_grad_(True) for t in (case.q, case.k, case.v)]
    out = runner(case.with_inputs(*leaves), grad=True)
    out = out[0] if isinstance(out, tuple) else out
    if list(out.shape) != list(dout.shape):
        raise RuntimeError(f"the path returns shape {list(out.shape)} for a {list(dout.shape)} query")
    if not out.requires_grad:
        return {"dq": None, "dk": None, "dv": None}
    grads = torch.autograd.grad(out, leaves, dout.to(out.dtype), allow_unused=True)
    return dict(zip(judging.GRADIENTS, grads))


def inherited(path, fwd):
    """The backward verdict of a path whose forward does not pass: the forward's, marked, so that one bug is one
    finding (the C++ side counts these, it does not shrink them again)."""
    if fwd["verdict"] == "unsupported":
        return unsupported(f"forward unsupported: {fwd.get('reason', '')}")
    return {"verdict": fwd["verdict"], "class": fwd.get("class", "wrong-output"), "inherited": path,
            "reason": f"the {path} forward already fails (reported there): {fwd.get('reason', '')}"}


def backward_of(release, case, tol, path, dout, eager_grads, exact, scales):
    """One path's backward result, judged; an exception is classified like the forward's."""
    runner = {"flash": release.run_flash, "sdpa": release.run_sdpa}[path]
    try:
        if path == "flash" and fa_kernels.BACKEND["name"] != "reference":
            raise fa_kernels.Unsupported("the backward is checked on the reference kernel only")
        grads = gradients_through(release, runner, case, dout)
    except Exception as e:  # noqa: BLE001
        kind = classify(e, release)
        # the reason is the exception's own text (a saved fixture expects it), the stage says where it came from
        return {"verdict": "unsupported" if kind == "unsupported" else "error", "class": kind, "stage": "backward",
                "reason": message(e), "trace": traceback.format_exc(limit=-4)}
    j = judging.judge_gradients(release.torch, case, grads, eager_grads, exact, *scales, tol)
    if j["verdict"] != "pass":
        j["class"] = "wrong-gradient"
    return j


def run_backward(release, case, tol, paths, fwd, eager_mask):
    """{"<path>-backward": result} for one case (and "eager-backward": whether eager's own backward ran)."""
    torch = release.torch
    names = [f"{p}-backward" for p in paths]
    why = case.training_shaped()
    if why:
        return {n: unsupported(why) for n in names}
    allowed = judging.allowed_keys(torch, eager_mask, case.B, case.Lq, case.Lk)
    dout = make_dout(torch, case, judging.comparable_rows(torch, case, allowed))
    res = {}
    try:
        eager_grads = gradients_through(release, release.run_eager, case, dout)
    except Exception as e:  # noqa: BLE001
        res["eager-backward"] = {"verdict": "error", "class": classify(e, release), "reason": f"backward: {message(e)}",
                                 "trace": traceback.format_exc(limit=-4)}
        res.update({n: unsupported(f"eager's backward raised: {message(e)}") for n in names})
        return res
    res["eager-backward"] = {"verdict": "pass"}
    exact, *scales = judging.exact_gradients(torch, case, allowed, dout)
    for path, name in zip(paths, names):
        if fwd[path]["verdict"] != "pass":
            res[name] = inherited(path, fwd[path])
        else:
            res[name] = backward_of(release, case, tol, path, dout, eager_grads, exact, scales)
    return res


def run_dir(release, root, paths, backward=False):
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
        results.append(run_case(release, case, tol, paths, backward))
    return results


def strict_json(x):
    """x with every non-finite float made JSON: +-inf as +-DBL_MAX (an error "past any bound"), NaN as null.
    json.dumps would write Infinity/NaN, which the C++ side (and JSON) rejects."""
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else math.copysign(sys.float_info.max, x)
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict_json(v) for v in x]
    return x


def judge_request(release, root, paths, backward, model):
    """The reply to one request: {"results": [...]} and, when `model`, {"model_backward": {...}}."""
    reply = {"results": run_dir(release, root, paths, backward)}
    if model:
        reply["model_backward"] = model_backward.check(release, fa_kernels, judging.Tolerance(
            hfapi.load_manifest(root)["tolerance"]))
    return reply


def start(kernel):
    import torch

    backend = kernel
    if backend == "auto":
        backend = "torch-fa2" if torch.cuda.is_available() else "reference"
    fa_kernels.install(backend)
    # Planted backward defects (fa_kernels.DEFECTS), to see a flash-backward finding go through flashcheck hf-live's
    # shrinking and saving; named in the hello line so that no report hides them.
    defects = [d for d in os.environ.get("FLASHCHECK_HF_LIVE_DEFECTS", "").split(",") if d]
    for d in defects:
        if d not in fa_kernels.KNOWN_DEFECTS:
            raise ValueError(f"FLASHCHECK_HF_LIVE_DEFECTS: unknown defect {d!r} ({', '.join(fa_kernels.KNOWN_DEFECTS)})")
    fa_kernels.DEFECTS.update(defects)
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
    if defects:
        hello["kernel"] = f"{backend}+defects:{'+'.join(defects)}"
    return release, hello


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("run", "serve"))
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--kernel", default="auto", choices=("auto", "reference", "torch-fa2"))
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--backward", action="store_true", help="also judge the gradients (training-shaped cases) and "
                                                             "run the tiny-model training step")
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
            reply = judge_request(release, args.dir, paths, args.backward, args.backward)
        except hfapi.BadInput as e:
            print(f"live.py: bad input: {e}", file=sys.stderr)
            return 2
        out.write(json.dumps(strict_json(dict(hello=hello, **reply)), indent=1, allow_nan=False) + "\n")
        return 0
    out.write(json.dumps({"hello": hello}) + "\n")
    out.flush()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            backward = bool(req.get("backward", args.backward))
            reply = judge_request(release, req["dir"], req.get("paths") or paths, backward,
                                  backward and bool(req.get("model_backward", True)))
        except Exception as e:  # noqa: BLE001
            reply = {"error": message(e), "trace": traceback.format_exc()}
        out.write(json.dumps(strict_json(reply), allow_nan=False) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
