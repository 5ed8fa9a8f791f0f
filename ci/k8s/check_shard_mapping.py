"""Runs the shard pod's command of campaign-indexed-job.yaml as Kubernetes would, once per completion
index, with a stub `flashcheck` first on PATH that records its arguments: pod i must run shard
i/completions into its own directory, an exit status of 1 (findings) must not fail the pod, and 2 must.

    python3 check_shard_mapping.py MANIFEST
"""
import os
import subprocess
import sys
import tempfile

import yaml

job = yaml.safe_load(open(sys.argv[1]))
spec = job["spec"]
n = spec["completions"]
assert spec["completionMode"] == "Indexed", spec["completionMode"]
assert spec["parallelism"] == n, (spec["parallelism"], n)
container = spec["template"]["spec"]["containers"][0]
with tempfile.TemporaryDirectory() as tmp:
    stub = os.path.join(tmp, "flashcheck")
    with open(stub, "w") as f:
        f.write('#!/bin/sh\nprintf "%s\\n" "$@" > "$STUB_ARGS"\nexit "$STUB_EXIT"\n')
    os.chmod(stub, 0o755)
    outs = set()
    for i in range(n):
        for code, want_ok in ((0, True), (1, True), (2, False)):
            env = dict(os.environ, PATH=tmp + os.pathsep + os.environ["PATH"], JOB_COMPLETION_INDEX=str(i),
                       STUB_ARGS=os.path.join(tmp, "args"), STUB_EXIT=str(code))
            rc = subprocess.run(container["command"] + container["args"], env=env).returncode
            assert (rc == 0) == want_ok, f"index {i}: flashcheck exit {code} made the pod exit {rc}"
        args = open(os.path.join(tmp, "args")).read().split("\n")
        assert args[0] == "campaign", args
        shard = args[args.index("--shard") + 1]
        assert shard == f"{i}/{n}", f"pod {i} runs shard {shard}, not {i}/{n}"
        outs.add(args[args.index("--out") + 1])
    assert len(outs) == n, f"pods share campaign directories: {sorted(outs)}"
print(f"{sys.argv[1]}: pods 0..{n - 1} run shards 0/{n}..{n - 1}/{n} into {n} directories; exit 1 (findings) passes, 2 fails")
