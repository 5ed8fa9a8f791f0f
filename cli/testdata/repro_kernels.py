"""Python kernels for `flashcheck repro`'s test (cli/repro_test.sh), for the layouts and behaviours no CPU kernel of the
project has: a KV-cache append (the script passes k_new, v_new, cache_seqlens and cu_seqlens_k_new, and its reference
reads the keys in logical order), and state kept from one call to the next (the script runs the fixture's earlier
cases first). They import the project's reference kernel from another package, which the script embeds too.
"""
import torch

from flashcheck_kernels.masks import visible
from flashcheck_kernels.reference import attend_masked

CONTRACT = {
    "summary": "float32 attention over a KV cache with new tokens appended (repro's test kernel)",
    "device": "cpu",
    "features": {"bottom_right": "native", "window": "native", "gqa": "native", "varlen": "native",
                 "kv_cache": "native", "zero_length": "native"},
    "dtypes": ["fp16", "bf16", "fp32"],
    "max_head_dim": 256,
    "empty_row": "zero",
    "returns_lse": True,
    "deterministic": True,
}


def _keys(k, v, args, b):
    """Sequence b's keys: its cache rows before cache_seqlens[b], then its new tokens."""
    k0 = int(args.cu_seqlens_k[b])
    cached = int(args.cache_seqlens[b])
    n0, n1 = int(args.cu_seqlens_k_new[b]), int(args.cu_seqlens_k_new[b + 1])
    return (torch.cat([k[k0:k0 + cached], args.k_new[n0:n1]]), torch.cat([v[k0:k0 + cached], args.v_new[n0:n1]]))


def _cache_attention(q, k, v, out, lse, args, skip_new=False):
    cu_q = args.cu_seqlens_q.tolist()
    for b in range(args.batch):
        lq = cu_q[b + 1] - cu_q[b]
        if lq == 0:
            continue
        ks, vs = _keys(k, v, args, b)
        if skip_new:  # broken: the appended tokens are dropped
            ks, vs = ks[:int(args.cache_seqlens[b])], vs[:int(args.cache_seqlens[b])]
        ok = visible(lq, ks.shape[0], args.window_left, args.window_right, args.top_left, q.device)
        attend_masked(q, ks, vs, out, lse, cu_q[b], 0, ok, args)


def cache_attention(q, k, v, out, lse, args):
    _cache_attention(q, k, v, out, lse, args)


def cache_attention_drops_new(q, k, v, out, lse, args):
    """Deliberately broken: attends over the cache without the tokens appended to it."""
    _cache_attention(q, k, v, out, lse, args, skip_new=True)


cache_attention_drops_new.contract = dict(CONTRACT, summary="broken on purpose: the appended tokens are dropped")

_first_scale = []


def stale_scale(q, k, v, out, lse, args):
    """Deliberately broken, statefully: keeps the softmax scale of its first call for every later one (as a planned
    wrapper reused with a stale plan would), so a case fails only after a case of another head dimension."""
    if not _first_scale:
        _first_scale.append(args.softmax_scale)
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    for b in range(args.batch):
        lq, lk = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        if lq == 0:
            continue
        ok = visible(lq, lk, args.window_left, args.window_right, args.top_left, q.device)
        stale = type(args)(**dict(vars(args), softmax_scale=_first_scale[0]))
        attend_masked(q, k, v, out, lse, cu_q[b], cu_k[b], ok, stale)


stale_scale.contract = dict(CONTRACT, summary="broken on purpose: the first call's softmax scale kept",
                            features={"bottom_right": "native", "gqa": "native", "varlen": "native"})
