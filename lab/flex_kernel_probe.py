#!/usr/bin/env python3
"""lab/flex_kernel_probe.py — which FlexAttention kernel the adapter's calls lower to on a GPU.

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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # lab/flex_graphs.py


def case(lens, heads, kv_heads, paged=False, dev="cuda"):
    """One call of the adapter: head dim 128, causal, pages (if paged) in reverse order within each sequence."""
    import torch
    from flex_graphs import PAGE_SIZE, adapter_call
    pool = None
    if paged:
        pool, start = [], 0
        for _, lk in lens:
            n = (lk + PAGE_SIZE - 1) // PAGE_SIZE
            pool += list(range(start + n - 1, start - 1, -1))
            start += n
    return adapter_call(lens, heads, kv_heads, 128, window=(-1, 0), pool=pool,
                        dtype=torch.bfloat16 if dev == "cuda" else torch.float32, dev=dev)


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
    if dev == "cuda":  # the campaign's realistic sizes: what a compiled call costs there (the "again" time)
        probes += [("realistic: 4 sequences of 2048, 32 heads, 8:1", case([(2048, 2048)] * 4, 32, 4, dev=dev)),
                   ("realistic: 4096 rows, 32 heads, 4:1", case([(4096, 4096)], 32, 8, dev=dev))]
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
