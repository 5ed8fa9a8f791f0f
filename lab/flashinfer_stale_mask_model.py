"""lab/flashinfer_stale_mask_model.py — a CPU model of one fault, to check an analysis against a GPU run.

FlashInfer 0.7.4's BatchPrefillWithRaggedKVCacheWrapper.plan() (flashinfer/prefill.py) stores a custom mask when it
is given one and never clears it (its paged twin sets _custom_mask_buf = None), and run() picks MaskMode.CUSTOM
whenever that buffer is set. So once one plan() had a mask, every later batch on the wrapper is masked by the old
batch's packed bits, read at the old mask_indptr. This module is a kernel for the Python bridge that computes
attention the way such a wrapper would, driven by the adapter's own translation
(kernels/python/flashcheck_kernels/flashinfer.py: _masking), with the adapter's contract on the CPU: fuzzing it with
the seeds of the GPU run should fail the same cases.

    FLASHCHECK_PYTHONPATH=tools flashcheck fuzz --kernel py:flashinfer_stale_mask_model:attention \\
        --property conformance --dtype bf16 --head-dim 128 --cases 40 --seed 61 --no-isolate

Bits the stale buffers do not cover (a longer or larger batch than the masked one) read as unset here; on the GPU
they are whatever memory follows, so those cases may differ (or fault).
"""
import types

import torch

from flashcheck_kernels import flashinfer as adapter
from flashcheck_kernels import reference
from flashcheck_kernels.masks import sequence_lengths, visible

CONTRACT = dict(adapter.CONTRACT, device="cpu", summary="CPU model of FlashInfer 0.7.4's ragged wrapper with a stale mask")
_stale = {}  # the ragged wrapper's mask: "bits" (bool, packed per request to whole bytes) and "byte_indptr"


def _pack(lens_q, lens_k, args):
    """What plan() keeps from a custom mask: each request's bits padded to a byte (segment_packbits)."""
    segs, indptr = [], [0]
    for lq, lk in zip(lens_q, lens_k):
        bits = visible(lq, lk, args.window_left, args.window_right, args.top_left, "cpu").flatten()
        seg = torch.zeros((bits.numel() + 7) // 8 * 8, dtype=torch.bool)
        seg[:bits.numel()] = bits
        segs.append(seg)
        indptr.append(indptr[-1] + seg.numel() // 8)
    return torch.cat(segs), indptr


def _stale_visible(b, lq, lk):
    bits, indptr = _stale["bits"], _stale["byte_indptr"]
    start = indptr[b] * 8 if b + 1 < len(indptr) else bits.numel()
    need = start + lq * lk
    padded = torch.cat([bits, torch.zeros(max(0, need - bits.numel()), dtype=torch.bool)])
    return padded[start:need].view(lq, lk)


def _unpaged(k, v, args, lens_k):
    """Packed K/V and arguments for a paged case (the paged wrapper clears its mask: the truth applies)."""
    ps, table = args.page_size, args.block_table.tolist()
    ks, vs, cu = [], [], [0]
    for b, n in enumerate(lens_k):
        pages = table[b][:(n + ps - 1) // ps]
        ks.append(torch.cat([k[p] for p in pages])[:n] if pages else k[0][:0])
        vs.append(torch.cat([v[p] for p in pages])[:n] if pages else v[0][:0])
        cu.append(cu[-1] + n)
    a = dict(vars(args), block_table=None, seqused_k=None, cu_seqlens_k=torch.tensor(cu, dtype=torch.int32))
    return torch.cat(ks), torch.cat(vs), types.SimpleNamespace(**a)


def attention(q, k, v, out, lse, args):
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    lens_q, lens_k = sequence_lengths(args)
    causal, window_left, mask = adapter._masking(args, lens_q, lens_k, "cpu")
    if args.block_table is not None:
        k, v, args = _unpaged(k, v, args, lens_k)
    elif mask is not None:
        _stale["bits"], _stale["byte_indptr"] = _pack(lens_q, lens_k, args)
    elif _stale:  # an unmasked batch on a wrapper that once had a mask: MaskMode.CUSTOM with the old bits
        for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
            allowed = _stale_visible(b, lq, lk)
            if window_left >= 0:  # the sliding-window module still applies its window
                allowed = allowed & visible(lq, lk, window_left, -1, False, "cpu")
            reference.attend_masked(q, k, v, out, lse, cu_q[b], cu_k[b], allowed, args)
        return
    reference.attention(q, k, v, out, lse, args)
