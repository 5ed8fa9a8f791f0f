"""FlashInfer (`flashinfer-python` on PyPI: CUDA kernels compiled on first use) under flashcheck.

First run on the H200 on 2026-12-02 (FlashInfer 0.7.4, bf16, head dim 128, its modules built off the node by
tools/wheels/flashinfer_aot.py): results/RESULTS.md. That run found that the ragged wrapper keeps the custom mask of an
earlier plan() (fixtures/found/flashinfer-ragged-wrapper-stale-custom-mask.json), so `attention` plans masked and
unmasked batches on wrappers of their own; `attention_one_wrapper` keeps one wrapper per layout, as an application
that re-plans a single wrapper does, and shows the fault. The realistic-size campaign of a later session found a fault
of FlashInfer's FA3 kernel itself, the LSE of the rows after a query tile without keys overwritten with -inf
(fixtures/found/flashinfer-fa3-empty-tile-lse-overrun.json); that one is not worked around: it is FlashInfer's.

The batch prefill wrappers take a packed batch as it is: BatchPrefillWithRaggedKVCacheWrapper for packed K/V
(kv_indptr from cu_seqlens_k) and BatchPrefillWithPagedKVCacheWrapper for paged K/V, whose NHD page pool is the
harness's (pages, page size, KV heads, d) and whose page list and last-page lengths come from the block table and
seqused_k. The backend is FlashInfer's own choice ("auto"): FA3 on sm90, FA2 where a custom mask is given.
Native: bottom-right causal, a causal left window (window_left), softcap (logits_soft_cap), GQA, the LSE
(lse_base="ln"). Translated: top-left causal and any other window as a custom mask; seqused_k of packed K/V by
gathering the used keys (the ragged layout has no per-sequence used length; paged K/V takes it natively).
"""
import torch

from .masks import sequence_lengths, visible

CONTRACT = {
    "summary": "FlashInfer batch prefill (ragged and paged KV wrappers, backend auto: FA3 on sm90, FA2 with a mask)",
    "device": "cuda",
    "features": {"bottom_right": "native", "top_left": "translated", "window": "translated", "softcap": "native",
                 "gqa": "native", "varlen": "native", "seqused_k": "translated", "paged": "native"},
    "dtypes": ["fp16", "bf16"],
    "head_dims": [64, 128, 256],
    "empty_row": "zero",
    "returns_lse": True,
    "deterministic": True,
    "notes": ["causal bottom-right: causal=True; a causal left window: window_left (FlashInfer's sliding window)",
              "top-left causal and other windows: a custom mask of each sequence's visible keys (the FA2 backend)",
              "seqused_k: packed K/V gathered to the used keys (translated); paged K/V: last page lengths (native)",
              "masked and unmasked batches are planned on separate wrappers: FlashInfer 0.7.4's ragged wrapper keeps "
              "an earlier plan's custom mask (attention_one_wrapper shows it)",
              "known defect: FA3 (sm90) writes LSE -inf over the 128 rows after a query tile without keys when that "
              "tile runs last (fixtures/found/flashinfer-fa3-empty-tile-lse-overrun.json)",
              "no backward: FlashInfer's prefill and decode kernels are inference-only (the gradient properties are "
              "not applicable)"],
}

_WORKSPACE_BYTES = 128 << 20  # FlashInfer's recommended float workspace
_wrappers = {}


def _wrapper(key, device):
    """One wrapper per key and process, re-planned for every case (plan() is FlashInfer's per-batch step).
    key[0] is the layout, "paged" or "ragged"."""
    if key not in _wrappers:
        import flashinfer
        workspace = torch.empty(_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        cls = (flashinfer.BatchPrefillWithPagedKVCacheWrapper if key[0] == "paged"
               else flashinfer.BatchPrefillWithRaggedKVCacheWrapper)
        _wrappers[key] = cls(workspace, "NHD")
    return _wrappers[key]


def _masking(args, lens_q, lens_k, device):
    """(causal, window_left, custom_mask) for plan(): FlashInfer's native causal and causal left window where they
    say what the case says (bottom-right, right window 0), otherwise each sequence's visible keys, flattened
    row-major and concatenated over the batch, as plan()'s custom_mask wants them."""
    left, right = args.window_left, args.window_right
    if right == 0 and not args.top_left:
        return True, left, None
    if left < 0 and right < 0:
        return False, -1, None
    masks = [visible(lq, lk, left, right, args.top_left, device).flatten() for lq, lk in zip(lens_q, lens_k)]
    return False, -1, torch.cat(masks)


def _indptr(lens, device):
    return torch.tensor([0] + lens, dtype=torch.int32).cumsum(0, dtype=torch.int32).to(device)


def attention(q, k, v, out, lse, args):
    """Masked and unmasked batches on wrappers of their own: FlashInfer 0.7.4's ragged plan() sets
    _custom_mask_buf when given a mask and never clears it (the paged plan() does), so a wrapper that once planned
    a mask keeps applying it, stale, to every later batch."""
    _attend(q, k, v, out, lse, args, by_mask=True)


def attention_one_wrapper(q, k, v, out, lse, args):
    """One wrapper per layout, re-planned for every batch as an application keeps it: the stale mask shows."""
    _attend(q, k, v, out, lse, args, by_mask=False)


def _attend(q, k, v, out, lse, args, by_mask):
    device = q.device
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    B = args.batch
    lens_q, used = sequence_lengths(args)
    causal, window_left, mask = _masking(args, lens_q, used, device)
    H, Hk, d, dv = q.shape[1], k.shape[-2], q.shape[-1], v.shape[-1]
    common = dict(custom_mask=mask, causal=causal, window_left=window_left, sm_scale=args.softmax_scale,
                  logits_soft_cap=args.softcap if args.softcap > 0 else None, q_data_type=q.dtype,
                  kv_data_type=k.dtype, head_dim_vo=dv)
    qo_indptr = _indptr(lens_q, device)
    if cu_q[0] != 0:  # the packed rows start past row 0 of the buffer: FlashInfer's indptr counts from q's start
        q = q[cu_q[0]:]
    if args.block_table is not None:
        ps = args.page_size
        pages = [(n + ps - 1) // ps for n in used]
        table = args.block_table.to(device="cpu", dtype=torch.int32)
        indices = torch.cat([table[b, :pages[b]] for b in range(B)]).to(device)
        last = torch.tensor([n - (p - 1) * ps for n, p in zip(used, pages)], dtype=torch.int32, device=device)
        w = _wrapper(("paged", mask is not None) if by_mask else ("paged",), device)
        w.plan(qo_indptr, _indptr(pages, device), indices, last, H, Hk, d, ps, **common)
        o, row_lse = w.run(q[:cu_q[-1] - cu_q[0]], (k, v), return_lse=True, lse_base="ln")
    else:
        if args.seqused_k is not None:  # translated: the used keys of each sequence, packed
            k, v = (torch.cat([x[cu_k[b]:cu_k[b] + used[b]] for b in range(B)]) for x in (k, v))
            kv_lens = used
        else:
            k, v = k[cu_k[0]:cu_k[-1]], v[cu_k[0]:cu_k[-1]]
            kv_lens = [cu_k[b + 1] - cu_k[b] for b in range(B)]
        w = _wrapper(("ragged", mask is not None) if by_mask else ("ragged",), device)
        w.plan(qo_indptr, _indptr(kv_lens, device), H, Hk, d, **common)
        o, row_lse = w.run(q[:cu_q[-1] - cu_q[0]], k, v, return_lse=True, lse_base="ln")
    rows = slice(cu_q[0], cu_q[-1])
    out[rows].copy_(o)
    if lse is not None:
        lse[rows].copy_(row_lse)
