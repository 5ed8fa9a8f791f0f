#!/usr/bin/env python3
"""tools/flex_kernel_probe.py — which FlexAttention kernel the adapter's calls lower to on a GPU.

Inductor picks flex_attention's decoding kernel only for fewer than 128 query rows, a power-of-two group and a
static batch and head count (torch/_inductor/kernel/flex/flex_decoding.py); the adapter
(kernels/python/flashcheck_kernels/flex_attention.py) folds KV heads into the batch and marks it static for those
calls. This compiles one call of each kind through the adapter and prints the Triton templates in the generated
code, so that a run shows the decoding kernel is the one under test where it should be, and the time of the first call
(compilation included; Inductor's on-disk cache makes it a load in a later process) beside that of the same call
again, which is the compile time a campaign pays per graph and process. Needs CUDA.
"""
import os
import re
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "python"))


def case(lens, heads, kv_heads, paged=False, softcap=0.0, d=128, dev="cuda"):
    import torch
    cu_q, cu_k = [0], [0]
    for lq, lk in lens:
        cu_q.append(cu_q[-1] + lq)
        cu_k.append(cu_k[-1] + lk)
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    q = torch.randn(cu_q[-1], heads, d, device=dev, dtype=dt)
    table, ps = None, 128
    if paged:
        blocks = [(lk + ps - 1) // ps for _, lk in lens]
        table = torch.full((len(lens), max(blocks)), -1, dtype=torch.int32)
        start = 0
        for b, nb in enumerate(blocks):
            table[b, :nb] = torch.arange(start, start + nb, dtype=torch.int32).flip(0)
            start += nb
        k = torch.randn(sum(blocks), ps, kv_heads, d, device=dev, dtype=dt)
    else:
        k = torch.randn(cu_k[-1], kv_heads, d, device=dev, dtype=dt)
    v = torch.randn_like(k)
    args = types.SimpleNamespace(
        cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32), cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32),
        seqused_k=None, batch=len(lens), softmax_scale=d ** -0.5, softcap=softcap, top_left=False,
        window_left=-1, window_right=0, block_table=table, page_size=ps)
    out = torch.empty(cu_q[-1], heads, d, device=dev, dtype=dt)
    return q, k, v, out, torch.empty(cu_q[-1], heads, device=dev, dtype=torch.float32), args


def main():
    # --device cpu: a dry run of this script (the adapter then runs Dynamo's eager backend: no code, no kernels)
    dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cuda"
    from torch._inductor.utils import run_and_get_code
    from flashcheck_kernels import flex_attention as adapter
    probes = [
        ("one query row, 4:1 groups", case([(1, 300)], 8, 2, dev=dev)),
        ("40 query rows in 2 sequences, 2:1", case([(10, 200), (30, 90)], 4, 2, dev=dev)),
        ("300 query rows, 4:1 (main kernel)", case([(300, 400)], 8, 2, dev=dev)),
        ("40 query rows, 3:1 (not a power of two: main kernel)", case([(40, 100)], 6, 2, dev=dev)),
        ("paged, one query row per sequence, 8:1", case([(1, 300), (1, 200)], 8, 1, paged=True, dev=dev)),
    ]
    import torch
    for name, (q, k, v, out, lse, args) in probes:
        start = time.perf_counter()
        _, code = run_and_get_code(adapter.attention, q, k, v, out, lse, args)
        if q.is_cuda:
            torch.cuda.synchronize()
        first = time.perf_counter() - start
        start = time.perf_counter()
        adapter.attention(q, k, v, out, lse, args)  # the same call again: the compiled graph, no compilation
        if q.is_cuda:
            torch.cuda.synchronize()
        again = time.perf_counter() - start
        text = "\n".join(code)
        kind = "decoding" if "SPLIT_KV" in text else "flex_attention" if text else "?"  # SPLIT_KV: decoding only
        kernels = ", ".join(sorted(set(re.findall(r"def (triton_\w+)\(", text))))
        kernels = kernels or "no code generated: a cache hit, or the eager backend of --device cpu"
        print(f"{name}: {kind} ({kernels}); first call {first:.1f} s (compilation included), "
              f"again {again * 1e3:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
