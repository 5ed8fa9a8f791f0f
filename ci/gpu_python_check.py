#!/usr/bin/env python3
"""ci/gpu.sh's python stage, after `pip install` of the package with the CUDA engine: the Python front door on the
GPU. flashcheck.check on CUDA kernels of the engine by name (forward and backward), a mutant caught through it, and
the fp64 reference and the rule on CUDA tensors against torch's SDPA and its autograd on the GPU. The last line says
how it went; the exit status is 1 when any check did not go as expected."""
import sys
import tempfile

import torch
import torch.nn.functional as F

import flashcheck

failed = []


def expect(what, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}", flush=True)
    if not ok:
        failed.append(what)


for kernel in ("flash-fwd-varlen", "efficient-fwd-varlen", "sdpa-cudnn"):
    report = flashcheck.check(kernel, properties=["conformance", "grad-conformance"], cases=200, seed=2812,
                              out=tempfile.mkdtemp(prefix=f"fc-{kernel}-"), raise_on_failure=False)
    expect(f"check({kernel})", report.passed, str(report).splitlines()[0])

try:
    flashcheck.check("mutant-top-left-causal", properties="conformance", cases=100, seed=1,
                     out=tempfile.mkdtemp(prefix="fc-mutant-"))
    expect("check(mutant-top-left-causal)", False, "passed: the mutant was not caught")
except flashcheck.CheckFailed as e:
    expect("check(mutant-top-left-causal)", True, e.report.findings[0].line[:100])

torch.manual_seed(0)
B, L, S, H, Hk, d = 2, 300, 512, 16, 4, 128
q = torch.randn(B, L, H, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k = torch.randn(B, S, Hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
v = torch.randn(B, S, Hk, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
do = torch.randn(B, L, H, d, device="cuda", dtype=torch.bfloat16)
# SDPA's is_causal is top-left; enable_gqa repeats the KV heads.
out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                     enable_gqa=True).transpose(1, 2)
dq, dk, dv = torch.autograd.grad(out, (q, k, v), do)
verdict = flashcheck.judge(out.detach(), q.detach(), k.detach(), v.detach(), causal=True, top_left=True)
expect("SDPA (CUDA, bf16, GQA 4:1, L 300x512) vs attention_ref", verdict.passed, verdict.line)
grads = flashcheck.judge_gradients((dq, dk, dv), q.detach(), k.detach(), v.detach(), do, causal=True, top_left=True)
expect("SDPA's autograd (CUDA) vs the fp64 gradients", grads.passed, grads.line)
wrong = flashcheck.judge(out.detach(), q.detach(), k.detach(), v.detach(), causal=True)  # bottom-right: must fail
expect("the same output judged bottom-right fails", not wrong.passed, wrong.line[:120])

print(f"gpu python check: {'all as expected' if not failed else 'FAILED: ' + ', '.join(failed)}")
sys.exit(1 if failed else 0)
