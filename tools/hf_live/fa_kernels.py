"""Kernels with flash-attn 2's Python API (flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache and
flash_attn.bert_padding's pad_input / unpad_input), for driving a transformers release's real flash-attention
path without the flash-attn package:

  reference   (CPU) exact attention in fp64, rounded once to the inputs' dtype: the most accurate kernel there
              can be, so anything the integration property finds is the integration's doing, not the kernel's.
              It is differentiable: its backward is flash-attn 2's, written in fp64 (see _ExactAttention), and the
              gradients reach q, k and v through transformers' own unpad, index and re-pad code.
  torch-fa2   (CUDA) torch's own FlashAttention-2 (torch.ops.aten._flash_attention_forward), a real kernel.

Conventions are flash-attn >= 2.1's (flash_attn/flash_attn_interface.py docstrings): causal is aligned
bottom-right (query i of a sequence with nq queries and nk keys sees key j iff j <= i + nk - nq), window_size
(left, right) is inclusive around that diagonal with -1 unbounded, softcap is cap * tanh(logit / cap) on the
scaled logits, a query with no allowed key gets 0, query head h reads KV head h // (Hq / Hkv). The varlen call
leaves rows outside [cu_seqlens_q[0], cu_seqlens_q[-1]) unwritten, as flash-attn's torch.empty output does; here
they hold NaN so that reading one cannot pass for a value.

install(backend) writes a `flash_attn` package (with a dist-info claiming version 2.8.3, which every
transformers release from 4.42 accepts) into a temporary folder at the front of sys.path, so that a release
finds these functions exactly where it imports flash-attn from.
"""
import atexit
import math
import os
import shutil
import sys
import tempfile

import torch

FAKE_VERSION = "2.8.3"
BACKEND = {"name": "reference"}
# tools/hf_crosscheck/crosscheck.py records the calls instead: HOOKS["varlen"] / HOOKS["dense"] then receive every
# call (with the flash-attn defaults filled in) and return its output.
HOOKS = {"varlen": None, "dense": None}
# Calls made to each entry point (tools/hf_live/model_backward.py checks that a packed batch took the varlen one).
CALLS = {"varlen": 0, "dense": 0}


class Unsupported(Exception):
    """The kernel cannot take this call (the harness reports the path as unsupported, not as a finding)."""


def _window(window_size):
    if window_size is None:
        return -1, -1
    left, right = int(window_size[0]), int(window_size[1])
    return left, right


def _allowed(nq, nk, causal, left, right, device):
    i = torch.arange(nq, device=device)[:, None]
    j = torch.arange(nk, device=device)[None, :]
    diag = i + nk - nq  # bottom-right: the last query is aligned with the last key
    ok = torch.ones(nq, nk, dtype=torch.bool, device=device)
    if causal:
        right = 0
    if right >= 0:
        ok &= j <= diag + right
    if left >= 0:
        ok &= j >= diag - left
    return ok


def _probabilities(q, k, scale, causal, left, right, softcap):
    """(P [Hq, nq, nk], tanh of the capped logits or None, rep): the fp64 softmax weights of one sequence, 0 on rows
    without an allowed key. q [nq, Hq, D], k [nk, Hkv, D]."""
    nq, hq = q.shape[:2]
    nk, hk = k.shape[0], k.shape[1]
    if hq % hk:
        raise RuntimeError(f"Number of heads in key/value ({hk}) must divide number of heads in query ({hq})")
    rep = hq // hk
    q64, k64 = q.double(), k.double().repeat_interleave(rep, dim=1)
    s = torch.einsum("ihd,jhd->hij", q64, k64) * scale
    t = None
    if softcap and softcap > 0:
        t = torch.tanh(s / softcap)
        s = softcap * t
    ok = _allowed(nq, nk, causal, left, right, s.device)[None]
    s = s.masked_fill(~ok, -math.inf)
    has_key = ok.any(-1, keepdim=True)
    m = torch.where(has_key, s.amax(-1, keepdim=True), torch.zeros_like(s[..., :1]))
    p = torch.exp(s - m)
    p = p / torch.where(has_key, p.sum(-1, keepdim=True), torch.ones_like(m))
    return p, t, rep


# Planted backward defects for tools/hf_live/backward_selftest.py; empty in every real run.
#   gqa-no-sum   dK/dV of a KV head from the first query head of its group only (the group sum dropped)
#   dv-scale     dV scaled by 1.01
#   dq-row-zero  dQ of each sequence's last query row zeroed
#   no-delta     dS = P dP, without FA2's D = rowsum(dO * O) term
DEFECTS = set()
KNOWN_DEFECTS = ("gqa-no-sum", "dv-scale", "dq-row-zero", "no-delta")


class _ExactAttention(torch.autograd.Function):
    """One sequence's exact attention: forward in fp64; backward flash-attn 2's formulas in fp64 (dV = P^T dO,
    dP = dO V^T, D = rowsum(dO * O), dS = P (dP - D) times the softcap's 1 - tanh^2, dQ = scale dS K,
    dK = scale dS^T Q, dK/dV summed over the query heads of each KV group), each gradient rounded once to the
    inputs' dtype. The output's rounding to the dtype (by the caller) passes the gradient straight through, so
    this is the exact gradient of the rounded kernel's inputs, derived independently of the judge's autograd."""

    @staticmethod
    def forward(ctx, q, k, v, scale, causal, left, right, softcap):
        p, t, rep = _probabilities(q, k, scale, causal, left, right, softcap)
        out = torch.einsum("hij,jhd->ihd", p, v.double().repeat_interleave(rep, dim=1))
        ctx.save_for_backward(q, k, v, p, out)
        ctx.tanh, ctx.rep, ctx.scale = t, rep, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, p, out = ctx.saved_tensors
        rep, scale = ctx.rep, ctx.scale
        do = dout.double()
        k64, v64 = k.double().repeat_interleave(rep, dim=1), v.double().repeat_interleave(rep, dim=1)
        dv = torch.einsum("hij,ihd->jhd", p, do)
        dp = torch.einsum("ihd,jhd->hij", do, v64)
        delta = torch.einsum("ihd,ihd->hi", do, out)[..., None]
        ds = p * dp if "no-delta" in DEFECTS else p * (dp - delta)
        if ctx.tanh is not None:
            ds = ds * (1 - ctx.tanh * ctx.tanh)
        dq = scale * torch.einsum("hij,jhd->ihd", ds, k64)
        dk = scale * torch.einsum("hij,ihd->jhd", ds, q.double())
        dk, dv = _group_sum(dk, rep), _group_sum(dv, rep)
        if "dv-scale" in DEFECTS:
            dv = dv * 1.01
        if "dq-row-zero" in DEFECTS and dq.shape[0] > 0:
            dq[-1] = 0
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None, None


def _group_sum(g, rep):
    """[n, Hq, D] -> [n, Hkv, D]: the gradient of repeat_interleave(rep, dim=1), a sum over each group."""
    n, hq, d = g.shape
    grouped = g.view(n, hq // rep, rep, d)
    return grouped[:, :, 0] if "gqa-no-sum" in DEFECTS else grouped.sum(2)


def _exact(q, k, v, scale, causal, left, right, softcap):
    """One sequence: q [nq, Hq, D], k/v [nk, Hkv, D] -> [nq, Hq, D] in fp64, 0 for rows without an allowed key;
    differentiable (_ExactAttention)."""
    nq, hq = q.shape[:2]
    nk = k.shape[0]
    if nq == 0 or nk == 0:  # a sequence without keys: every query row is 0 (flash-attn >= 2.1)
        return torch.zeros(nq, hq, v.shape[-1], dtype=torch.float64)
    if hq % k.shape[1]:
        raise RuntimeError(f"Number of heads in key/value ({k.shape[1]}) must divide number of heads in query ({hq})")
    return _ExactAttention.apply(q, k, v, scale, causal, left, right, softcap)


def _check(q, k, v, dims):
    if q.dim() != dims or k.dim() != dims or v.dim() != dims:
        raise RuntimeError(f"flash_attn: q, k, v must have {dims} dimensions, got q {list(q.shape)}, k {list(k.shape)}, "
                           f"v {list(v.shape)}")
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        # transformers refuses to load a model in fp32 with flash_attention_2, so no model makes this call
        raise Unsupported(f"FlashAttention only support fp16 and bf16 data type (got q {q.dtype}, k {k.dtype}, "
                           f"v {v.dtype})")


def _scale(q, softmax_scale):
    return q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)


def _ints(x):
    return [int(a) for a in (x.reshape(-1).tolist() if hasattr(x, "tolist") else x)]


# --- torch's FlashAttention-2 (CUDA) ----------------------------------------------------------------------------


def _torch_fa2(q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, left, right, softcap):
    if softcap:
        raise Unsupported("torch's FlashAttention-2 has no softcap")
    out = torch.ops.aten._flash_attention_forward(
        q, k, v, cu_q, cu_k, max_q, max_k, 0.0, causal, False, scale=scale,
        window_size_left=None if left < 0 else left, window_size_right=None if right < 0 else right)
    return out[0]


# --- flash-attn's API ---------------------------------------------------------------------------------------------


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    if HOOKS["varlen"] is not None:
        return HOOKS["varlen"](q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               softmax_scale=softmax_scale, causal=causal, window_size=window_size, softcap=softcap)
    _check(q, k, v, 3)
    CALLS["varlen"] += 1
    if alibi_slopes is not None or block_table is not None or return_attn_probs:
        raise Unsupported("alibi, paged KV and attention probabilities are not modelled")
    if dropout_p:
        raise Unsupported("dropout is random: nothing to compare")
    cq, ck = _ints(cu_seqlens_q), _ints(cu_seqlens_k)
    if len(cq) < 2:
        raise RuntimeError("batch size must be postive")  # flash-attn's message, spelling included
    if len(cq) != len(ck):
        raise RuntimeError(f"cu_seqlens_q has {len(cq)} entries and cu_seqlens_k {len(ck)}")
    if any(b < a for a, b in zip(cq, cq[1:])) or any(b < a for a, b in zip(ck, ck[1:])) or min(cq[0], ck[0]) < 0:
        raise RuntimeError("cu_seqlens must be non-decreasing and non-negative")
    # flash-attn reads what cu_seqlens say without checking: past the tensors that is an illegal memory access
    if cq[-1] > q.shape[0] or ck[-1] > k.shape[0]:
        # worded as oracles/hf_flash_path.cc's check_bounds words it
        raise RuntimeError(f"illegal memory access: cu_seqlens reach query row {cq[-1]} and key row {ck[-1]}, but the call "
                           f"has {q.shape[0]} query and {k.shape[0]} key rows")
    scale, (left, right) = _scale(q, softmax_scale), _window(window_size)
    if BACKEND["name"] == "torch-fa2":
        out = torch.full_like(q, math.nan)
        lo, hi = cq[0], cq[-1]
        res = _torch_fa2(q, k, v, torch.tensor(cq, dtype=torch.int32, device=q.device) - cq[0],
                         torch.tensor(ck, dtype=torch.int32, device=q.device) - ck[0], int(max_seqlen_q),
                         int(max_seqlen_k), scale, causal, left, right, softcap)
        out[lo:hi] = res[: hi - lo] if res.shape[0] >= hi - lo else res
        return out
    out = torch.full(q.shape[:2] + (v.shape[-1],), math.nan, dtype=torch.float64)
    for b in range(len(cq) - 1):
        out[cq[b]:cq[b + 1]] = _exact(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], scale, causal, left,
                                       right, softcap)
    return out.to(q.dtype)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    if HOOKS["dense"] is not None:
        return HOOKS["dense"](q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                              softcap=softcap)
    _check(q, k, v, 4)
    CALLS["dense"] += 1
    if alibi_slopes is not None or return_attn_probs:
        raise Unsupported("alibi and attention probabilities are not modelled")
    if dropout_p:
        raise Unsupported("dropout is random: nothing to compare")
    if q.shape[0] != k.shape[0] or k.shape[:2] != v.shape[:2]:
        raise RuntimeError(f"flash_attn_func: batch or length mismatch q {list(q.shape)}, k {list(k.shape)}")
    scale, (left, right) = _scale(q, softmax_scale), _window(window_size)
    if BACKEND["name"] == "torch-fa2":
        return _torch_fa2(q, k, v, None, None, q.shape[1], k.shape[1], scale, causal, left, right, softcap)
    out = torch.stack([_exact(q[b], k[b], v[b], scale, causal, left, right, softcap) for b in range(q.shape[0])])
    return out.to(q.dtype)


def flash_attn_with_kvcache(*args, **kwargs):
    raise Unsupported("flash_attn_with_kvcache (paged decoding) is not modelled")


# --- flash_attn.bert_padding (flash-attn 2.8's: unpad_input returns five values, pad_input zero-fills) -------------


def index_first_axis(x, indices):
    return x[indices]


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    all_masks = (attention_mask + unused_mask) if unused_mask is not None else attention_mask
    seqlens = all_masks.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(all_masks.flatten(), as_tuple=False).flatten()
    max_seqlen = seqlens.max().item()
    cu = torch.nn.functional.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return flat[indices], indices, cu, max_seqlen, used


def pad_input(hidden_states, indices, batch, seqlen):
    out = torch.zeros((batch * seqlen), *hidden_states.shape[1:], device=hidden_states.device, dtype=hidden_states.dtype)
    out[indices] = hidden_states
    return out.view(batch, seqlen, *hidden_states.shape[1:])


# --- the package a release imports ------------------------------------------------------------------------------

_INIT = ('"""Stand-in for flash-attn written by flashcheck\'s tools/hf_live/fa_kernels.py (backend {backend})."""\n'
         '__version__ = "{version}"\n'
         'from fa_kernels import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: F401\n')


def install(backend):
    """Makes `import flash_attn` find these kernels; returns the folder it wrote."""
    if backend not in ("reference", "torch-fa2"):
        raise ValueError(f"unknown kernel backend {backend!r}")
    BACKEND["name"] = backend
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    root = tempfile.mkdtemp(prefix="flashcheck-fa-")
    atexit.register(shutil.rmtree, root, True)  # the package is imported by then; its folder goes with the process
    pkg = os.path.join(root, "flash_attn")
    os.makedirs(os.path.join(pkg, "layers"))
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write(_INIT.format(backend=backend, version=FAKE_VERSION))
    with open(os.path.join(pkg, "bert_padding.py"), "w") as f:
        f.write("from fa_kernels import index_first_axis, pad_input, unpad_input  # noqa: F401\n")
    with open(os.path.join(pkg, "layers", "__init__.py"), "w") as f:
        f.write("")
    with open(os.path.join(pkg, "layers", "rotary.py"), "w") as f:
        f.write("def apply_rotary_emb(*args, **kwargs):\n    raise NotImplementedError('not modelled')\n")
    dist = os.path.join(root, f"flash_attn-{FAKE_VERSION}.dist-info")
    os.makedirs(dist)
    with open(os.path.join(dist, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: flash_attn\nVersion: {FAKE_VERSION}\n")
    with open(os.path.join(dist, "top_level.txt"), "w") as f:
        f.write("flash_attn\n")
    with open(os.path.join(dist, "RECORD"), "w") as f:
        f.write("flash_attn/__init__.py,,\n")
    sys.path.insert(0, root)
    return root
