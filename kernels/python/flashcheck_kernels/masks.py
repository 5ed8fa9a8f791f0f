"""Which keys each query row of one sequence sees, in flash-attn's conventions.

Shared by the Python kernels here: the causal diagonal is aligned bottom-right (the last query sees the last
key, flash-attn >= 2.1) unless `top_left`; a window (left, right) admits keys within those distances of the
diagonal, -1 meaning unbounded; causal attention arrives folded into the window as right == 0.
"""
import torch


def sequence_lengths(args):
    """(query lengths, key lengths) of the case's sequences: from cu_seqlens, the keys capped by seqused_k where
    the case has it."""
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    lens_q = [b - a for a, b in zip(cu_q, cu_q[1:])]
    lens_k = args.seqused_k.tolist() if args.seqused_k is not None else [b - a for a, b in zip(cu_k, cu_k[1:])]
    return lens_q, lens_k


def visible(lq, lk, window_left, window_right, top_left, device):
    """Boolean (lq, lk): True where query i may attend key j."""
    i = torch.arange(lq, device=device).unsqueeze(1)
    j = torch.arange(lk, device=device).unsqueeze(0)
    diagonal = i + (0 if top_left else lk - lq)
    ok = torch.ones(lq, lk, dtype=torch.bool, device=device)
    if window_right >= 0:
        ok &= j <= diagonal + window_right
    if window_left >= 0:
        ok &= j >= diagonal - window_left
    return ok
