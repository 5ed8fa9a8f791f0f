#!/usr/bin/env python3
"""tools/hf_live/backward_selftest.py — proves that `live.py --backward` can fail: planted defects in the reference
kernel's backward (fa_kernels.DEFECTS) must be flagged, the intact kernel must pass.

    tools/hf_live/python.sh 5.17.0 tools/hf_live/backward_selftest.py [--keep DIR]

Writes its own export (training-shaped cases in the format of `flashcheck export`: no flashcheck build, no network)
and runs the installed release on it:
  1. intact kernel: every flash-backward and sdpa-backward result passes (where this release's flash forward fails,
     e.g. 4.55.0's batch without a mask (#39814), the backward inherits that verdict instead), and the tiny-model
     step (model-backward); packed with a gap (F16) inherits its forward failure, a case with a past is unsupported;
  2. each planted defect (gqa-no-sum, dv-scale, dq-row-zero, no-delta): at least one flash-backward failure, every
     flash forward and every SDPA result unchanged; gqa-no-sum also fails model-backward;
  3. the judge itself: eager's own gradients pass as a path, a NaN or a cut gradient fails.
Exit 0 when all hold, 1 otherwise (each check printed). About 20 s on a 2-core CPU.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fa_kernels  # noqa: E402

# core/tolerance.h's constants as `flashcheck export` writes them into manifest.json (copied: no build needed here)
TOLERANCE = {"k_integration": 2.0, "floor_offset": 0.3, "floor_spacings": 2.0, "noise_lambda": 8.0,
             "unit_roundoff32": 2.0 ** -24,
             "formats": {"bf16": {"mantissa_bits": 7, "min_normal_exp": -126},
                         "fp16": {"mantissa_bits": 10, "min_normal_exp": -14},
                         "fp32": {"mantissa_bits": 23, "min_normal_exp": -126}}}

DEFECTS = fa_kernels.KNOWN_DEFECTS


def case(name, dtype, batch, q_len, heads, kv_heads, head_dim, **extra):
    c = {"name": name, "dtype": dtype, "batch": batch, "q_len": q_len, "heads": heads, "kv_heads": kv_heads,
         "head_dim": head_dim, "past": 0, "causal": True, "sliding_window": None, "softcap": None, "scale": None,
         "static_cache_len": None, "use_cache": False, "query_length": None, "position_ids_3d": False,
         "varlen_kwargs": None, "via_generate": False, "attention_mask": None, "position_ids": None}
    c.update(extra)
    return c


def cases():
    """Training-shaped cases over the flash path's branches (dense, mask, packed, the caller's cu_seqlens), GQA and
    MQA, a window and a softcap, fp16 (fine enough to see a 1% dV) and bf16; then a forward failure and a past."""
    packed = [[0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 4]]
    return [
        case("dense-gqa-fp16", "fp16", 2, 10, 4, 2, 16),
        case("right-pad-fp16", "fp16", 2, 8, 6, 2, 16, attention_mask=[[1] * 8, [1] * 5 + [0] * 3]),
        case("left-pad-bf16", "bf16", 2, 7, 4, 4, 16, attention_mask=[[0, 0, 1, 1, 1, 1, 1], [1] * 7]),
        case("packed-mqa-fp16", "fp16", 1, 12, 4, 1, 16, position_ids=packed),
        case("window-bf16", "bf16", 1, 12, 4, 2, 16, sliding_window=4),
        case("softcap-fp16", "fp16", 1, 9, 2, 1, 16, softcap=2.0),
        case("cu-seqlens-fp16", "fp16", 1, 10, 4, 2, 16, position_ids=[[0, 1, 2, 0, 1, 2, 3, 4, 5, 6]],
             varlen_kwargs={"cu_seq_lens_q": [0, 3, 10], "cu_seq_lens_k": [0, 3, 10], "max_length_q": 7,
                            "max_length_k": 7}),
        case("packed-gap-fp16", "fp16", 1, 8, 2, 2, 16, position_ids=[[0, 1, 2, 4, 5, 0, 1, 2]]),  # F16
        case("past-fp16", "fp16", 1, 3, 2, 2, 16, past=4, use_cache=True),
    ]


def write_export(torch, root):
    from safetensors.torch import save_file

    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    entries = []
    for i, c in enumerate(cases()):
        gen = torch.Generator().manual_seed(1000 + i)
        lk = c["past"] + c["q_len"]
        scale = 3.0 if c["softcap"] else 1.0  # logits that reach the cap
        t = {"q": torch.randn(c["batch"], c["q_len"], c["heads"], c["head_dim"], generator=gen) * scale,
             "k": torch.randn(c["batch"], lk, c["kv_heads"], c["head_dim"], generator=gen),
             "v": torch.randn(c["batch"], lk, c["kv_heads"], c["head_dim"], generator=gen)}
        save_file({k: v.to(dtypes[c["dtype"]]).contiguous() for k, v in t.items()}, os.path.join(root, f"{i:04d}.st"))
        entries.append({"name": c["name"], "case": c, "tensors": f"{i:04d}.st"})
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump({"schema": "flashcheck.export/1", "tolerance": TOLERANCE, "cases": entries}, f)


class Checks:
    def __init__(self):
        self.failed = 0

    def expect(self, ok, what):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        self.failed += 0 if ok else 1


def verdicts(results, path):
    return {r["name"]: r["paths"].get(path, {}) for r in results}


def check_intact(chk, reply):
    res = reply["results"]
    fb, sb = verdicts(res, "flash-backward"), verdicts(res, "sdpa-backward")
    training = [c["name"] for c in cases() if c["past"] == 0 and c["name"] != "packed-gap-fp16"]
    judged = 0
    for name in training:
        if fb[name].get("inherited"):  # this release's flash forward fails here (4.55.0: #39814, its window)
            chk.expect(fb[name].get("verdict") == verdicts(res, "flash")[name].get("verdict"),
                       f"intact: {name} flash-backward inherits the forward's failure ({fb[name]['reason'][:90]})")
            continue
        judged += 1
        chk.expect(fb[name].get("verdict") == "pass", f"intact: {name} flash-backward passes "
                                                      f"({fb[name].get('detail') or fb[name].get('reason')})")
        ok = sb[name].get("verdict") == "pass" or (name.startswith("softcap") and sb[name].get("verdict") == "unsupported")
        chk.expect(ok, f"intact: {name} sdpa-backward {sb[name].get('verdict')}")
    chk.expect(judged >= 4, f"intact: {judged} of {len(training)} training cases judged on the flash backward")
    gap = fb["packed-gap-fp16"]
    chk.expect(gap.get("inherited") == "flash" and gap.get("verdict") == "fail",
               f"a failing flash forward is inherited, not judged again: {gap.get('reason', '')[:90]}")
    chk.expect(fb["past-fp16"].get("verdict") == "unsupported", f"a case with a past: {fb['past-fp16'].get('reason')}")
    mb = reply.get("model_backward", {})
    chk.expect(mb.get("verdict") == "pass", f"intact: model-backward passes ({mb.get('detail') or mb.get('reason')})")


def check_defect(chk, defect, reply, intact):
    res = reply["results"]
    fb = verdicts(res, "flash-backward")
    caught = sorted(n for n, r in fb.items() if r.get("verdict") == "fail" and not r.get("inherited"))
    chk.expect(bool(caught), f"{defect}: flash-backward fails on {len(caught)} case(s) {caught}")
    if caught:
        print(f"       e.g. {caught[0]}: {fb[caught[0]]['reason'][:200]}")
    same = all(verdicts(res, p)[n].get("verdict") == verdicts(intact["results"], p)[n].get("verdict")
               for p in ("flash", "sdpa", "sdpa-backward") for n in fb)
    chk.expect(same, f"{defect}: the forward paths and sdpa-backward are unchanged")


def check_judge(chk, live, release, root):
    """The judge on hand-made gradients: eager's own pass, a NaN fails, a cut gradient fails."""
    import hfapi
    import judge as judging

    torch = release.torch
    manifest = hfapi.load_manifest(root)
    tol = judging.Tolerance(manifest["tolerance"])
    c = hfapi.Case(torch, manifest["cases"][0], root)
    _, mask = release.run_eager(c)
    allowed = judging.allowed_keys(torch, mask, c.B, c.Lq, c.Lk)
    dout = live.make_dout(torch, c, judging.comparable_rows(torch, c, allowed))
    eager = live.gradients_through(release, release.run_eager, c, dout)
    exact, terms, noise = judging.exact_gradients(torch, c, allowed, dout)
    j = judging.judge_gradients(torch, c, eager, eager, exact, terms, noise, tol)
    chk.expect(j["verdict"] == "pass", f"judge: eager's gradients as a path pass ({j['detail'][:80]})")
    nan = dict(eager, dk=eager["dk"].clone())
    nan["dk"][0, 1, 0, 2] = float("nan")
    j = judging.judge_gradients(torch, c, nan, eager, exact, terms, noise, tol)
    chk.expect(j["verdict"] == "fail" and "NaN" in j["reason"], f"judge: one NaN fails ({j['reason'][:80]})")
    cut = dict(eager, dq=None)
    j = judging.judge_gradients(torch, c, cut, eager, exact, terms, noise, tol)
    chk.expect(j["verdict"] == "fail", f"judge: a cut dq (no gradient) fails ({j['reason'][:80]})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", help="write the export here and keep it")
    args = ap.parse_args()
    start = time.time()
    fa_kernels.install("reference")
    import live

    release = live.hfapi.Release(flash=True)
    torch = release.torch
    root = args.keep or tempfile.mkdtemp(prefix="flashcheck-bw-selftest-")
    os.makedirs(root, exist_ok=True)
    chk = Checks()
    try:
        write_export(torch, root)
        print(f"backward self-test on transformers {release.version}, torch {torch.__version__} ({root})")
        intact = live.judge_request(release, root, ["flash", "sdpa"], True, True)
        check_intact(chk, intact)
        for defect in DEFECTS:
            fa_kernels.DEFECTS.clear()
            fa_kernels.DEFECTS.add(defect)
            reply = live.judge_request(release, root, ["flash", "sdpa"], True, defect == "gqa-no-sum")
            check_defect(chk, defect, reply, intact)
            if defect == "gqa-no-sum":
                mb = reply["model_backward"]
                chk.expect(mb["verdict"] == "fail", f"{defect}: model-backward fails ({mb.get('reason', '')[:150]})")
        fa_kernels.DEFECTS.clear()
        check_judge(chk, live, release, root)
    finally:
        fa_kernels.DEFECTS.clear()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"backward self-test: {'PASS' if chk.failed == 0 else f'{chk.failed} check(s) FAILED'} "
          f"in {time.time() - start:.1f} s")
    return 0 if chk.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
