"""FlashInfer (`flashinfer-python` on PyPI: CUDA kernels compiled on first use) under flashcheck.

Not yet run on a GPU: written on 2026-12-02 from FlashInfer 0.7.4's Python API (flashinfer/prefill.py), after that
session's device time was spent; its wheels travel with tools/wheels/flashinfer.sh (docs/RESULTS.md). Until a GPU
run confirms them, the contract's conventions below (rows without keys written as zeros, deterministic) are what
FlashInfer documents or what flash-attn does, not measurements.

The batch prefill wrappers take a packed batch as it is: BatchPrefillWithRaggedKVCacheWrapper for packed K/V
(kv_indptr from cu_seqlens_k) and BatchPrefillWithPagedKVCacheWrapper for paged K/V, whose NHD page pool is the
harness's (pages, page size, KV heads, d) and whose page list and last-page lengths come from the block table and
seqused_k. The backend is FlashInfer's own choice ("auto"): FA3 on sm90, FA2 where a custom mask is given.
Native: bottom-right causal, a causal left window (window_left), softcap (logits_soft_cap), GQA, the LSE
(lse_base="ln"). Translated: top-left causal and any other window as a custom mask; seqused_k of packed K/V by
gathering the used keys (the ragged layout has no per-sequence used length; paged K/V takes it natively).
"""
import torch

from .masks import visible

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
              "not yet run on a GPU (written 2026-12-02 from FlashInfer 0.7.4's API)"],
}

_WORKSPACE_BYTES = 128 << 20  # FlashInfer's recommended float workspace
_wrappers = {}


def _wrapper(kind, device):
    """One wrapper of each kind per process, re-planned for every case (plan() is FlashInfer's per-batch step)."""
    if kind not in _wrappers:
        import flashinfer
        workspace = torch.empty(_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        cls = (flashinfer.BatchPrefillWithPagedKVCacheWrapper if kind == "paged"
               else flashinfer.BatchPrefillWithRaggedKVCacheWrapper)
        _wrappers[kind] = cls(workspace, "NHD")
    return _wrappers[kind]


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
    device = q.device
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    B = args.batch
    lens_q = [cu_q[b + 1] - cu_q[b] for b in range(B)]
    used = args.seqused_k.tolist() if args.seqused_k is not None else [cu_k[b + 1] - cu_k[b] for b in range(B)]
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
        w = _wrapper("paged", device)
        w.plan(qo_indptr, _indptr(pages, device), indices, last, H, Hk, d, ps, **common)
        o, row_lse = w.run(q[:cu_q[-1] - cu_q[0]], (k, v), return_lse=True, lse_base="ln")
    else:
        if args.seqused_k is not None:  # translated: the used keys of each sequence, packed
            k, v = (torch.cat([x[cu_k[b]:cu_k[b] + used[b]] for b in range(B)]) for x in (k, v))
            kv_lens = used
        else:
            k, v = k[cu_k[0]:cu_k[-1]], v[cu_k[0]:cu_k[-1]]
            kv_lens = [cu_k[b + 1] - cu_k[b] for b in range(B)]
        w = _wrapper("ragged", device)
        w.plan(qo_indptr, _indptr(kv_lens, device), H, Hk, d, **common)
        o, row_lse = w.run(q[:cu_q[-1] - cu_q[0]], k, v, return_lse=True, lse_base="ln")
    rows = slice(cu_q[0], cu_q[-1])
    out[rows].copy_(o)
    if lse is not None:
        lse[rows].copy_(row_lse)
