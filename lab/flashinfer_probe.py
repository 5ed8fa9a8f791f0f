#!/usr/bin/env python3
"""lab/flashinfer_probe.py — which FlashInfer backend the adapter's calls run on, and what a call costs.

The adapter (kernels/python/flashcheck_kernels/flashinfer.py) leaves the backend to FlashInfer ("auto"): on sm90 the
FA3 kernels where no custom mask is needed, FA2 where one is (top-left causal, windows other than a causal left
one). For one call of each kind this prints the backend the wrapper settled on and the time of the first call
(module loading or JIT compilation included: flashinfer/data/aot holds the modules built off the node by
tools/wheels/flashinfer_aot.py) beside that of the same call again. Needs CUDA and flashinfer.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # lab/flex_graphs.py: adapter_call


def main():
    import torch
    from flex_graphs import PAGE_SIZE, adapter_call
    from flashcheck_kernels import flashinfer as adapter
    from flashcheck_kernels.masks import sequence_lengths

    def call(lens, heads, kv_heads, **kw):
        return adapter_call(lens, heads, kv_heads, 128, dtype=torch.bfloat16, dev="cuda", **kw)

    reversed_pages = list(range(((300 + PAGE_SIZE - 1) // PAGE_SIZE) + 1))[::-1]
    probes = [
        ("bottom-right causal, 300 x 400, 8:2", call([(300, 400)], 8, 2, window=(-1, 0)), "ragged"),
        ("no mask, two sequences, 4:4", call([(100, 120), (30, 90)], 4, 4), "ragged"),
        ("causal left window 64, 4:1", call([(200, 200)], 8, 2, window=(64, 0)), "ragged"),
        ("softcap 30, causal", call([(128, 256)], 8, 2, window=(-1, 0), softcap=30.0), "ragged"),
        ("two-sided window (custom mask)", call([(150, 170)], 4, 2, window=(32, 16)), "ragged"),
        ("seqused_k (gathered)", call([(40, 200), (10, 100)], 8, 1, window=(-1, 0), used=[150, 60]), "ragged"),
        ("paged, one row per sequence, 8:1", call([(1, 300), (1, 40)], 8, 1, window=(-1, 0),
                                                   pool=reversed_pages), "paged"),
        ("realistic: 4 x 2048, 32 heads, 8:1, causal", call([(2048, 2048)] * 4, 32, 4, window=(-1, 0)), "ragged"),
    ]
    for name, (q, k, v, out, lse, args), kind in probes:
        times = []
        try:
            for _ in range(2):
                start = time.perf_counter()
                adapter.attention(q, k, v, out, lse, args)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
        except Exception as e:  # one probe's failure is its line of the report, not the end of the others
            print(f"{name}: {type(e).__name__}: {str(e).splitlines()[-1] if str(e) else ''}", flush=True)
            continue
        masked = adapter._masking(args, *sequence_lengths(args), "cpu")[2] is not None  # which of the layout's wrappers ran
        backend = getattr(adapter._wrappers.get((kind, masked)), "_backend", "?")
        finite = bool(torch.isfinite(out).all())
        print(f"{name}: backend {backend}; first call {times[0]:.2f} s, again {times[1] * 1e3:.1f} ms; "
              f"output finite: {finite}", flush=True)


if __name__ == "__main__":
    main()
