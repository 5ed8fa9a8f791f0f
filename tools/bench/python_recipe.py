#!/usr/bin/env python3
"""The comparator of `flashcheck bench`: a Python harness with flash-attn's own test recipe, timed on the same
mixes in the same GPU visit (issue 12, docs/PERFORMANCE.md).

The recipe is flash-attn's tests/test_flash_attn.py (test_flash_attn_varlen_output): inputs drawn with torch,
the kernel on the unpadded varlen batch, `attention_ref` twice on the padded batch -- in fp32 (upcast=True, the
reference) and in the dtype (upcast=False, reorder_ops=True, the low-precision baseline) -- and the 2x rule
`max|out - ref| <= 2 max|out_pt - ref| + fwd_atol`, fwd_atol = 2 max|(ref + 0.3 - 0.3) - ref|. attention_ref
is restated below from that file (without einops), and, so that L 32768 fits in memory, evaluated a few heads at
a time (the same arithmetic per head). The kernel is torch's FlashAttention-2,
torch.ops.aten._flash_attention_forward.

  python3 tools/bench/python_recipe.py --mix standard --cases 1000
  python3 tools/bench/python_recipe.py --mix realistic --runs 3
  python3 tools/bench/python_recipe.py --pass backward --mix both --cases 300 --runs 1

The standard mix draws from the distribution of search/generators.cc standard_mix_gen (B 1-4, q_len 1-512,
k_len = q_len + 0-256, Hk in {1,2,4,8}, g in {1,2,3,4,8}, d in {64,128}, bf16, 60% causal, 20% a window
(0-255, 0)) with Python's random: the same mix, not the same cases. The realistic shapes are those of
search/samples.cc realistic_mix.
"""
import argparse
import math
import random
import sys
import time

import torch


def construct_local_mask(seqlen_q, seqlen_k, window_size, query_padding_mask, key_padding_mask, device):
    row_idx = torch.arange(seqlen_q, device=device, dtype=torch.long).view(-1, 1)
    col_idx = torch.arange(seqlen_k, device=device, dtype=torch.long)
    sk = seqlen_k if key_padding_mask is None else key_padding_mask.sum(-1).view(-1, 1, 1, 1)
    sq = seqlen_q if query_padding_mask is None else query_padding_mask.sum(-1).view(-1, 1, 1, 1)
    if window_size[0] < 0:
        return col_idx > row_idx + sk - sq + window_size[1]
    sk = torch.full_like(col_idx, seqlen_k) if key_padding_mask is None else sk
    return torch.logical_or(col_idx > torch.minimum(row_idx + sk - sq + window_size[1], sk),
                            col_idx < row_idx + sk - sq - window_size[0])


def attention_ref_heads(q, k, v, query_padding_mask, key_padding_mask, causal, window_size, upcast, reorder_ops):
    """flash-attn's attention_ref (tests/test_flash_attn.py) for q (b, s, h, d) and k, v already repeated to h heads."""
    if causal:
        window_size = (window_size[0], 0)
    dtype_og = q.dtype
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    d = q.shape[-1]
    if not reorder_ops:
        scores = torch.einsum("bthd,bshd->bhts", q / math.sqrt(d), k)
    else:
        scores = torch.einsum("bthd,bshd->bhts", q, k / math.sqrt(d))
    if key_padding_mask is not None:
        scores.masked_fill_(~key_padding_mask.view(key_padding_mask.shape[0], 1, 1, -1), float("-inf"))
    local_mask = None
    if window_size[0] >= 0 or window_size[1] >= 0:
        local_mask = construct_local_mask(seqlen_q, seqlen_k, window_size, query_padding_mask, key_padding_mask, q.device)
        scores.masked_fill_(local_mask, float("-inf"))
    attention = torch.softmax(scores, dim=-1).to(v.dtype)
    del scores
    if local_mask is not None:
        attention = attention.masked_fill(torch.all(local_mask, dim=-1, keepdim=True), 0.0)
    if query_padding_mask is not None:
        attention = attention.masked_fill(~query_padding_mask.view(query_padding_mask.shape[0], 1, -1, 1), 0.0)
    output = torch.einsum("bhts,bshd->bthd", attention, v)
    if query_padding_mask is not None:
        output.masked_fill_(~query_padding_mask.view(query_padding_mask.shape[0], -1, 1, 1), 0.0)
    return output.to(dtype=dtype_og)


def attention_ref(q, k, v, qmask, kmask, causal, window, upcast, reorder_ops, score_bytes=8 << 30):
    g = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(g, dim=2)  # einops "b s h d -> b s (h g) d"
    v = v.repeat_interleave(g, dim=2)
    b, sq, h, _ = q.shape
    per_head = b * sq * k.shape[1] * 4
    chunk = max(1, min(h, score_bytes // max(per_head, 1)))
    outs = [attention_ref_heads(q[:, :, i:i + chunk], k[:, :, i:i + chunk], v[:, :, i:i + chunk], qmask, kmask,
                                causal, window, upcast, reorder_ops) for i in range(0, h, chunk)]
    return torch.cat(outs, dim=2)


class Timer:
    """Synchronized wall time per stage."""

    def __init__(self):
        self.seconds = {}

    def stage(self, name):
        timer = self

        class Ctx:
            def __enter__(self):
                torch.cuda.synchronize()
                self.t = time.perf_counter()

            def __exit__(self, *a):
                torch.cuda.synchronize()
                timer.seconds[name] = timer.seconds.get(name, 0.0) + time.perf_counter() - self.t

        return Ctx()


def run_case(case, timer, gen, backward=False):
    """One case of the recipe; returns whether the kernel passes the rule (the backward: every gradient)."""
    lq, lk, h, hk, d, causal, window = case
    dev, dt = "cuda", torch.bfloat16
    b = len(lq)
    t = timer or Timer()
    wl, wr = (None if window[0] < 0 else window[0]), (None if window[1] < 0 else window[1])
    with t.stage("inputs"):
        mq, mk = max(lq), max(lk)
        q = torch.randn(b, mq, h, d, device=dev, dtype=dt, generator=gen)
        k = torch.randn(b, mk, hk, d, device=dev, dtype=dt, generator=gen)
        v = torch.randn(b, mk, hk, d, device=dev, dtype=dt, generator=gen)
        g = torch.randn(b, mq, h, d, device=dev, dtype=dt, generator=gen) if backward else None
        qmask = torch.arange(mq, device=dev).view(1, -1) < torch.tensor(lq, device=dev).view(-1, 1)
        kmask = torch.arange(mk, device=dev).view(1, -1) < torch.tensor(lk, device=dev).view(-1, 1)
        cu_q = torch.tensor([0] + list(__import__("itertools").accumulate(lq)), device=dev, dtype=torch.int32)
        cu_k = torch.tensor([0] + list(__import__("itertools").accumulate(lk)), device=dev, dtype=torch.int32)
        q_un, k_un, v_un = q[qmask], k[kmask], v[kmask]
    with t.stage("kernel"):
        out_un, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
            q_un, k_un, v_un, cu_q, cu_k, mq, mk, 0.0, causal, False, window_size_left=wl, window_size_right=wr)
        if backward:
            grads_un = torch.ops.aten._flash_attention_backward(
                g[qmask], q_un, k_un, v_un, out_un, lse, cu_q, cu_k, mq, mk, 0.0, causal, rng, unused,
                window_size_left=wl, window_size_right=wr)
    if not backward:
        with t.stage("reference fp32"):
            out_ref = attention_ref(q, k, v, qmask, kmask, causal, window, upcast=True, reorder_ops=False)
        with t.stage("baseline"):
            out_pt = attention_ref(q, k, v, qmask, kmask, causal, window, upcast=False, reorder_ops=True)
        with t.stage("compare"):
            out = torch.zeros_like(q)
            out[qmask] = out_un
            fwd_atol = 2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max().item()
            ok = (out - out_ref).abs().max().item() <= 2 * (out_pt - out_ref).abs().max().item() + fwd_atol
        return ok

    # The backward as flash-attn's tests check it (test_flash_attn_varlen_output): autograd through attention_ref in
    # fp32 and in the dtype, and each gradient within 3x the dtype's error.
    def grads(upcast, reorder_ops):
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        out = attention_ref(*leaves, qmask, kmask, causal, window, upcast=upcast, reorder_ops=reorder_ops)
        return torch.autograd.grad(out, leaves, g)

    with t.stage("reference fp32"):
        ref = grads(True, False)
    with t.stage("baseline"):
        pt = grads(False, True)
    with t.stage("compare"):
        ok = True
        for got_un, mask, r, p in zip(grads_un, (qmask, kmask, kmask), ref, pt):
            got = torch.zeros_like(r)
            got[mask] = got_un
            ok = ok and (got - r).abs().max().item() <= 3 * (p - r).abs().max().item()
    return ok


def standard_case(rng):
    d = 64 if rng.randrange(2) == 0 else 128
    hk = rng.choice([1, 2, 4, 8])
    h = hk * rng.choice([1, 2, 3, 4, 8])
    causal = rng.randrange(10) < 6
    window = (rng.randrange(256), 0) if rng.randrange(10) < 2 else (-1, -1)
    lq = [1 + rng.randrange(512) for _ in range(1 + rng.randrange(4))]
    lk = [x + rng.randrange(257) for x in lq]
    return lq, lk, h, hk, d, causal, window


def realistic_cases():
    # search/samples.cc realistic_mix: H 32 / Hk 8 at L 2048 (B 8) and 8192 (B 2), H 16 / Hk 4 at L 32768 (B 1).
    for length in (2048, 8192, 32768):
        for windowed in (False, True):
            b = max(1, 16384 // length)
            h, hk = (16, 4) if length > 16384 else (32, 8)
            yield (f"L {length} B {b} H {h}{' win 1024' if windowed else ''}",
                   ([length] * b, [length] * b, h, hk, 128, True, (1024, 0) if windowed else (-1, -1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mix", choices=["standard", "realistic", "both"], default="both")
    ap.add_argument("--cases", type=int, default=1000, help="timed cases of the standard mix")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per realistic shape")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pass", dest="which", choices=["forward", "backward"], default="forward",
                    help="backward: dQ, dK, dV through the kernel's backward against autograd through attention_ref")
    a = ap.parse_args()
    bw = a.which == "backward"
    if not torch.cuda.is_available():
        print("python_recipe: no CUDA device", file=sys.stderr)
        return 2
    print(f"python recipe (flash-attn tests' attention_ref, 2x rule) on {torch.cuda.get_device_name(0)}, "
          f"torch {torch.__version__}, kernel aten._flash_attention_forward" + (" and _backward" if bw else ""))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(a.seed)
    status = 0
    if a.mix in ("standard", "both"):
        rng = random.Random(a.seed)
        cases = [standard_case(rng) for _ in range(a.warmup + a.cases)]
        for c in cases[:a.warmup]:
            run_case(c, None, gen, bw)
        torch.cuda.synchronize()
        start = time.perf_counter()
        passed = sum(run_case(c, None, gen, bw) for c in cases[a.warmup:])
        torch.cuda.synchronize()
        s = time.perf_counter() - start
        tokens = sum(sum(c[0]) for c in cases[a.warmup:]) / max(a.cases, 1)
        print(f"standard mix{', backward' if bw else ''}: {a.cases} cases in {s:.2f} s = {a.cases / s:.1f} cases/s ({passed} pass, "
              f"{a.cases - passed} fail); {tokens:.0f} query tokens per case")
        status |= passed != a.cases
    if a.mix in ("realistic", "both"):
        print(f"realistic shapes{', backward' if bw else ''} (bf16, GQA 4:1, d 128, causal), ms per case, mean of {a.runs} runs after 1 warm-up:")
        cols = ["inputs", "kernel", "reference fp32", "baseline", "compare"]
        print(f"{'shape':<24} " + " ".join(f"{c:>14}" for c in cols) + f" {'harness':>10} {'h/kernel':>9}  verdicts")
        for name, c in realistic_cases():
            try:
                run_case(c, None, gen, bw)
                t = Timer()
                passed = sum(run_case(c, t, gen, bw) for _ in range(a.runs))
            except torch.OutOfMemoryError as e:
                print(f"{name:<24} out of memory: {str(e).splitlines()[0]}")
                torch.cuda.empty_cache()
                continue
            ms = {k: 1e3 * v / a.runs for k, v in t.seconds.items()}
            harness = sum(v for k, v in ms.items() if k != "kernel")
            print(f"{name:<24} " + " ".join(f"{ms.get(k, 0.0):>14.2f}" for k in cols) +
                  f" {harness:>10.2f} {harness / ms['kernel']:>9.1f}  {passed} pass {a.runs - passed} fail")
            status |= passed != a.runs
            torch.cuda.empty_cache()
    return status


if __name__ == "__main__":
    sys.exit(main())
