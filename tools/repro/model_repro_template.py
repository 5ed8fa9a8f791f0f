#!/usr/bin/env python3
# @@HEADER@@
#
# Needs torch and transformers (the release under test: install it as usual, `pip install transformers==X.Y.Z`).
# The case is in the folder beside this script (manifest.json and a safetensors file: the attention layer's q, k, v,
# the attention mask and position ids, and the cache when the case has one). The script runs that layer through the
# installed release's own code on each path: eager attention is the truth; the flash-attention path runs on a stand-in
# `flash_attn` package whose kernels are exact (an fp64 reference on the CPU; PyTorch's FlashAttention-2 on a GPU),
# and the SDPA path on torch. Each path's output is compared with the exact attention under eager's own mask, under
# the integration rule of flashcheck's docs/TOLERANCE.md (constants in manifest.json). The driver is flashcheck's
# tools/hf_live (the code of `flashcheck hf-live`), embedded below as it was when this script was written.
#
# Exit status: 1 when the bug reproduces (a path raises from inside transformers or gives a wrong output), 0 when
# every path passes, 2 when this machine cannot run the case (no transformers, a release the driver cannot drive).
# `--markdown` prints the environment and the observed verdicts as Markdown, for the issue body (ISSUE.md).
import argparse
import json
import os
import platform
import sys
import types

SPEC = json.loads(r'''@@SPEC@@''')
HERE = os.path.dirname(os.path.abspath(__file__))

# flashcheck's transformers driver (tools/hf_live): live.py and the modules it imports, dependencies first.
MODULE_SOURCES = {
@@MODULES@@
}


def load_driver():
    """The driver's modules from MODULE_SOURCES, under their own names (they import one another by them)."""
    for name, source in MODULE_SOURCES.items():
        module = types.ModuleType(name)
        module.__file__ = os.path.join(HERE, name + ".py")  # where fa_kernels looks for itself: this folder
        sys.modules[name] = module
        exec(compile(source, "<%s, in %s>" % (name, os.path.basename(__file__)), "exec"), module.__dict__)
    return sys.modules["live"]


def main():
    parser = argparse.ArgumentParser(description=SPEC["title"])
    parser.add_argument("--markdown", action="store_true", help="print the environment and observations as Markdown")
    parser.add_argument("--paths", default=",".join(SPEC["paths"]), help="the paths to run (flash, sdpa)")
    args = parser.parse_args()
    print("%s\n  case %s of %s: %s" % (SPEC["title"], SPEC["case"], SPEC["fixture"], SPEC["summary"]))
    try:
        import torch
        import transformers
    except ImportError as e:
        print("this case needs torch and transformers: %s" % e)
        return 2
    live = load_driver()
    stdout = sys.stdout
    try:
        release, hello = live.start("auto")
        results = live.run_dir(release, os.path.join(HERE, SPEC["case_dir"]), [p for p in args.paths.split(",") if p])
    except Exception as e:  # noqa: BLE001 - the driver could not drive this release: not the bug
        sys.stdout = stdout
        print("cannot run the case on transformers %s: %s: %s" % (transformers.__version__, type(e).__name__, e))
        return 2
    sys.stdout = stdout
    env = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
           "transformers": hello["transformers"], "flash-attention kernel": hello["kernel"]}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    lines, reproduced, ran = [], False, False
    for result in results:
        if "bad_input" in result:
            print("the case folder is not readable: %s" % result["bad_input"])
            return 2
        for path, r in result["paths"].items():
            verdict, kind = r["verdict"], r.get("class", "")
            ran = ran or (path != "eager" and verdict != "unsupported" and kind != "api-break")
            bug = verdict in ("fail", "error") and kind in ("raises", "wrong-output")
            reproduced = reproduced or bug
            line = "%-6s %-11s %s" % (path, verdict.upper() if bug else verdict, kind)
            if r.get("reason"):
                line += ": " + r["reason"].strip().splitlines()[0][:300]
            if r.get("err") is not None and r.get("bound") is not None:
                line += " (error %.3g, eager's %.3g, ratio %.3g, bound %.3g)" % (
                    r["err"], r["base"], r["err"] / r["base"] if r["base"] else float("inf") if r["err"] else 0.0,
                    r["bound"])
            lines.append(line)
    verdict = ("REPRODUCED: transformers %s %s" % (hello["transformers"], "raises or gives a wrong output"))
    if not reproduced:
        verdict = ("not reproduced on transformers %s: every path passes" % hello["transformers"]) if ran else (
            "cannot judge on transformers %s: no path ran (unsupported or not drivable)" % hello["transformers"])
    if args.markdown:
        print("\n### Environment\n")
        for key, value in env.items():
            print("- %s: %s" % (key, value))
        print("\n### Observed\n\n```\n%s\n```" % "\n".join(lines + [verdict]))
        print("\nflashcheck's record: %s" % SPEC["expected"])
    else:
        for key, value in env.items():
            print("  %s: %s" % (key, value))
        for line in lines:
            print("  " + line)
        print(verdict)
    return 1 if reproduced else (0 if ran else 2)


if __name__ == "__main__":
    sys.exit(main())
