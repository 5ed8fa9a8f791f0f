#!/usr/bin/env python3
"""The FlashInfer adapter's translation of a case into plan()/run() arguments, on the CPU with a recording stand-in
for the flashinfer package (ci/plugins.sh): which wrapper each batch is planned on (masked and unmasked batches
apart, since FlashInfer 0.7.4's ragged wrapper keeps an old custom mask; one wrapper in attention_one_wrapper), the
indptrs, the custom mask, the keys gathered for seqused_k, the pages and last-page lengths. What the kernels compute
is the GPU campaign's business. Prints 'flashinfer adapter ok' and exits 0, or raises."""
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from flashcheck_kernels import flashinfer as adapter  # noqa: E402
from flashcheck_kernels.masks import visible  # noqa: E402


class RecordingWrapper:
    """Records plan()'s arguments; run() returns zeros of the right shapes and the inputs it was given."""
    def __init__(self, workspace, layout):
        self.layout, self.plans, self.runs = layout, [], []

    def plan(self, *args, **kwargs):
        self.plans.append((args, kwargs))

    def run(self, q, kv, *rest, return_lse, lse_base):
        assert return_lse and lse_base == "ln"
        v = kv[1] if isinstance(kv, tuple) else rest[0]
        self.runs.append((q, kv, rest))
        return torch.zeros(q.shape[0], q.shape[1], v.shape[-1]), torch.zeros(q.shape[0], q.shape[1])


fake = types.ModuleType("flashinfer")
fake.BatchPrefillWithRaggedKVCacheWrapper = type("Ragged", (RecordingWrapper,), {})
fake.BatchPrefillWithPagedKVCacheWrapper = type("Paged", (RecordingWrapper,), {})
sys.modules["flashinfer"] = fake


def case(lens, heads=4, kv_heads=2, window=(-1, -1), top_left=False, used=None, table=None, page_size=0):
    cu_q, cu_k = [0], [0]
    for lq, lk in lens:
        cu_q.append(cu_q[-1] + lq)
        cu_k.append(cu_k[-1] + lk)
    q = torch.randn(cu_q[-1], heads, 8)
    k = torch.randn(cu_k[-1], kv_heads, 8) if table is None else torch.randn(6, page_size, kv_heads, 8)
    args = types.SimpleNamespace(
        cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32), cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32),
        seqused_k=None if used is None else torch.tensor(used, dtype=torch.int32), batch=len(lens), softmax_scale=0.3,
        softcap=0.0, top_left=top_left, window_left=window[0], window_right=window[1],
        block_table=None if table is None else torch.tensor(table, dtype=torch.int32), page_size=page_size)
    return q, k, torch.randn_like(k), torch.full((cu_q[-1], heads, 8), float("nan")), torch.zeros(cu_q[-1], heads), args


def call(fn, *a, **kw):
    adapter._wrappers.clear()
    fn(*case(*a, **kw))
    return dict(adapter._wrappers)


def main():
    # masked, then unmasked: two wrappers, the unmasked one never planned with a mask; one wrapper when asked
    adapter._wrappers.clear()
    adapter.attention(*case([(2, 3), (1, 4)], top_left=True, window=(-1, 0)))
    adapter.attention(*case([(1, 1)]))
    masked, unmasked = adapter._wrappers[("ragged", True)], adapter._wrappers[("ragged", False)]
    assert masked is not unmasked and all(p[1]["custom_mask"] is None for p in unmasked.plans)
    adapter._wrappers.clear()
    adapter.attention_one_wrapper(*case([(2, 3)], top_left=True, window=(-1, 0)))
    adapter.attention_one_wrapper(*case([(1, 1)]))
    assert list(adapter._wrappers) == [("ragged",)] and len(adapter._wrappers[("ragged",)].plans) == 2

    # top-left causal: each sequence's visible keys, row-major, concatenated; indptrs from the lengths
    (w,) = call(adapter.attention, [(2, 3), (3, 2)], top_left=True, window=(-1, 0)).values()
    args, kw = w.plans[0]
    want = torch.cat([visible(2, 3, -1, 0, True, "cpu").flatten(), visible(3, 2, -1, 0, True, "cpu").flatten()])
    assert torch.equal(kw["custom_mask"], want) and not kw["causal"] and kw["window_left"] == -1
    assert args[0].tolist() == [0, 2, 5] and args[1].tolist() == [0, 3, 5] and args[2:5] == (4, 2, 8)

    # bottom-right causal with a left window: native flags, no mask
    (w,) = call(adapter.attention, [(3, 5)], window=(2, 0)).values()
    kw = w.plans[0][1]
    assert kw["causal"] and kw["window_left"] == 2 and kw["custom_mask"] is None

    # seqused_k on packed K/V: the used keys of each sequence gathered, kv_indptr from the used lengths
    q, k, v, out, lse, a = case([(1, 4), (2, 5)], used=[2, 3])
    adapter._wrappers.clear()
    adapter.attention(q, k, v, out, lse, a)
    (w,) = adapter._wrappers.values()
    assert w.plans[0][0][1].tolist() == [0, 2, 5]
    assert torch.equal(w.runs[0][1], torch.cat([k[0:2], k[4:7]])), "the gathered keys"
    assert torch.equal(out, torch.zeros_like(out)), "every query row written"

    # paged: the pages each sequence uses, in table order, and the last page's length
    (w,) = call(adapter.attention, [(1, 5), (2, 3)], table=[[4, 1, 0], [2, 5, 0]], page_size=4,
                window=(-1, 0)).values()
    args = w.plans[0][0]
    assert args[1].tolist() == [0, 2, 3] and args[2].tolist() == [4, 1, 2] and args[3].tolist() == [1, 3]
    assert args[7] == 4
    print("flashinfer adapter ok")


if __name__ == "__main__":
    main()
