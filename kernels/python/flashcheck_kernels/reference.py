"""A plain PyTorch attention kernel for the Python bridge: exact softmax attention in float32, one
sequence at a time, with its gradients through torch's autograd (`attention.backward = "autograd"`). It is the
bridge's own test subject (CI fuzzes it forward and backward, and its broken twins below must be caught), and the
smallest complete example of the interface (docs/PYTHON_KERNELS.md).
"""
import torch

from .masks import sequence_lengths, visible

CONTRACT = {
    "summary": "PyTorch float32 attention, one sequence at a time (the Python bridge's example)",
    "device": "cpu",
    "features": {"bottom_right": "native", "top_left": "native", "window": "native", "softcap": "native",
                 "gqa": "native", "varlen": "native", "seqused_k": "native", "zero_length": "native",
                 "dv_differs": "native"},
    "dtypes": ["fp16", "bf16", "fp32"],
    "max_head_dim": 256,
    "empty_row": "zero",
    "returns_lse": True,
    "deterministic": True,
    "backward": {"deterministic": True},
}


def softcap_exact(s, cap):
    return cap * torch.tanh(s / cap)


def attend_masked(q, k, v, out, lse, q0, k0, ok, args, softcap=softcap_exact):
    """One sequence: queries from row q0, keys from row k0, attending where ok (lq, lk) is True; rows without keys
    get 0 and an LSE of -inf. Differentiable everywhere (rows without keys get zero gradients, not NaN)."""
    lq, lk = ok.shape
    group = q.shape[1] // k.shape[1]
    qs = q[q0:q0 + lq].float().transpose(0, 1)                                  # (H, lq, d)
    ks = k[k0:k0 + lk].float().repeat_interleave(group, dim=1).transpose(0, 1)  # (H, lk, d)
    vs = v[k0:k0 + lk].float().repeat_interleave(group, dim=1).transpose(0, 1)
    s = torch.matmul(qs, ks.transpose(1, 2)) * args.softmax_scale
    if args.softcap > 0:
        s = softcap(s, args.softcap)
    has_key = ok.any(dim=-1, keepdim=True)                                       # (lq, 1)
    s = s.masked_fill(~ok, float("-inf")).masked_fill(~has_key, 0.0)             # rows without keys: finite
    row_lse = torch.logsumexp(s, dim=-1)                                         # (H, lq)
    p = torch.exp(s - row_lse.unsqueeze(-1)) * ok                                # empty rows: all zero
    out[q0:q0 + lq] = torch.matmul(p, vs).transpose(0, 1).to(out.dtype)
    if lse is not None:
        lse[q0:q0 + lq] = row_lse.masked_fill(~has_key.squeeze(-1), float("-inf")).transpose(0, 1)


def _attend(q, k, v, out, lse, args, top_left, softcap=softcap_exact):
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    for b, (lq, lk) in enumerate(zip(*sequence_lengths(args))):
        if lq == 0:
            continue
        ok = visible(lq, lk, args.window_left, args.window_right, top_left, q.device)
        attend_masked(q, k, v, out, lse, cu_q[b], cu_k[b], ok, args, softcap)


def attention(q, k, v, out, lse, args):
    """Writes out (total_q, H, dv) and lse (total_q, H) for the packed sequences of args.cu_seqlens_*."""
    _attend(q, k, v, out, lse, args, args.top_left)


attention.backward = "autograd"


def attention_top_left(q, k, v, out, lse, args):
    """Deliberately broken: always aligns the causal diagonal top-left (flash-attention#466's confusion).
    It claims the same contract; flashcheck must catch it."""
    _attend(q, k, v, out, lse, args, True)


attention_top_left.contract = dict(CONTRACT, summary="broken on purpose: top-left causal under a bottom-right contract")
attention_top_left.backward = "autograd"


def softcap_straight_through(s, cap):
    """The capped values forward, the identity backward: softcap's derivative 1 - tanh^2 dropped."""
    return s + (cap * torch.tanh(s / cap) - s).detach()


def attention_softcap_no_derivative(q, k, v, out, lse, args):
    """Deliberately broken backward: a correct forward whose softcap passes gradients straight through (a
    `.detach()` in the wrong place). Only the gradient properties can see it; flashcheck must catch it."""
    _attend(q, k, v, out, lse, args, args.top_left, softcap_straight_through)


attention_softcap_no_derivative.contract = dict(CONTRACT, summary="broken on purpose: softcap's derivative dropped")
attention_softcap_no_derivative.backward = "autograd"
