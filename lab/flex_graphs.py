#!/usr/bin/env python3
"""lab/flex_graphs.py [--cases N] [--seed S] [--paged] [--size-oblivious] [--log] — how many graphs Dynamo builds for the
FlexAttention adapter (kernels/python/flashcheck_kernels/flex_attention.py) over N cases of a mixed batch.

Runs on the CPU with a counting Dynamo backend instead of Inductor: the guards, and so the recompilations, are the
ones a GPU campaign meets, without their cost. Each graph is one Inductor compilation of the flex template on a GPU,
which is what bounds FlexAttention campaigns (results/RESULTS.md). --log prints Dynamo's recompilation reasons.
"""
import argparse
import os
import random
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "python"))


PAGE_SIZE = 128  # the adapter's paged path takes pages of 128 x n keys


def adapter_call(lens, heads, kv_heads, d, *, window=(-1, -1), softcap=0.0, used=None, pool=None, dtype, dev):
    """The arguments the Python bridge gives the FlexAttention adapter, (q, k, v, out, lse, args), for sequences of
    (q_len, k_len) with random data: packed K/V, or paged K/V when `pool` lists the physical page of each logical
    page, sequence after sequence (pages of PAGE_SIZE). Shared with lab/flex_kernel_probe.py."""
    import torch
    cu_q, cu_k = [0], [0]
    for lq, lk in lens:
        cu_q.append(cu_q[-1] + lq)
        cu_k.append(cu_k[-1] + lk)
    q = torch.randn(cu_q[-1], heads, d, dtype=dtype, device=dev)
    table = None
    if pool is None:
        k = torch.randn(cu_k[-1], kv_heads, d, dtype=dtype, device=dev)
    else:
        blocks = [(lk + PAGE_SIZE - 1) // PAGE_SIZE for _, lk in lens]
        table = torch.full((len(lens), max(blocks)), -1, dtype=torch.int32)
        start = 0
        for b, nb in enumerate(blocks):
            table[b, :nb] = torch.tensor(pool[start:start + nb], dtype=torch.int32)
            start += nb
        k = torch.randn(len(pool), PAGE_SIZE, kv_heads, d, dtype=dtype, device=dev)
    v = torch.randn_like(k)
    args = types.SimpleNamespace(
        cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32), cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32),
        seqused_k=None if used is None else torch.tensor(used, dtype=torch.int32), batch=len(lens),
        softmax_scale=d ** -0.5, softcap=softcap, top_left=False, window_left=window[0], window_right=window[1],
        block_table=table, page_size=PAGE_SIZE)
    out = torch.empty(cu_q[-1], heads, d, dtype=dtype, device=dev)
    return q, k, v, out, torch.empty(cu_q[-1], heads, dtype=torch.float32, device=dev), args


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size-oblivious", action="store_true", help="set FLASHCHECK_FLEX_SIZE_OBLIVIOUS=1")
    ap.add_argument("--log", action="store_true", help="print Dynamo's recompilation reasons")
    ap.add_argument("--paged", action="store_true", help="a third of the cases with paged K/V (pages of 128)")
    a = ap.parse_args()
    if a.size_oblivious:
        os.environ["FLASHCHECK_FLEX_SIZE_OBLIVIOUS"] = "1"
    import torch
    from torch.nn.attention.flex_attention import flex_attention
    from flashcheck_kernels import flex_attention as adapter
    if a.log:
        torch._logging.set_logs(recompiles=True)
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    adapter._flex()  # the adapter's Dynamo settings, then the same call with the counting backend
    adapter._compiled["eager"] = torch.compile(flex_attention, dynamic=True, backend=counting)
    rng = random.Random(a.seed)
    for n in range(1, a.cases + 1):
        lens = []
        for _ in range(rng.randint(1, 4)):
            lq = rng.choice([1, 2, rng.randint(1, 300)])
            lens.append((lq, lq + rng.randint(0, 64)))
        # Heads as the generator draws them (search/generators.cc): KV heads 1/2/4/8, group 1/2/3/4/7/8, H <= 16.
        group = rng.choice([1, 2, 4, 8, 3, 7])
        kv_heads = rng.choice([h for h in (1, 2, 4, 8) if h * group <= 16])
        heads = kv_heads * group
        window = rng.choice([(-1, -1), (-1, 0), (16, 0), (5, 7)])
        softcap = rng.choice([0.0, 0.0, 5.0])
        used = [max(1, lk - rng.randint(0, 3)) for _, lk in lens] if rng.random() < 0.3 else None
        paged = a.paged and rng.random() < 1 / 3
        pool = None
        if paged:  # each sequence's pages in a shuffled pool, as the case's block table lays them out
            pool = list(range(sum((lk + PAGE_SIZE - 1) // PAGE_SIZE for _, lk in lens)))
            rng.shuffle(pool)
        call = adapter_call(lens, heads, kv_heads, 64, window=window, softcap=softcap, used=used, pool=pool,
                            dtype=torch.float32, dev="cpu")
        adapter.attention(*call)
        if n in (10, 50, 100) or n == a.cases:
            print(f"after {n} cases: {len(graphs)} graphs", flush=True)


if __name__ == "__main__":
    main()
