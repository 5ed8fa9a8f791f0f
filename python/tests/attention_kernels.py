"""Kernels under test for the package's tests, in the py: convention (docs/PYTHON_KERNELS.md): a correct one and
twins broken on purpose, each of which flashcheck must catch."""
import torch

CONTRACT = {"device": "cpu", "dtypes": ["bf16", "fp32"], "returns_lse": True, "empty_row": "zero",
            "features": {"bottom_right": "native", "window": "native", "gqa": "native", "varlen": "native"}}


def _attend(q, k, v, out, lse, args, top_left=False, scale=None):
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    group = q.shape[1] // k.shape[1]
    for b in range(args.batch):
        qs = q[cu_q[b]:cu_q[b + 1]].float().transpose(0, 1)
        ks = k[cu_k[b]:cu_k[b + 1]].float().repeat_interleave(group, 1).transpose(0, 1)
        vs = v[cu_k[b]:cu_k[b + 1]].float().repeat_interleave(group, 1).transpose(0, 1)
        lq, lk = qs.shape[1], ks.shape[1]
        if lq == 0:
            continue
        s = qs @ ks.transpose(1, 2) * (args.softmax_scale if scale is None else scale)
        i, j = torch.arange(lq).unsqueeze(1), torch.arange(lk).unsqueeze(0)
        diag = i if top_left else i + lk - lq
        ok = torch.ones(lq, lk, dtype=torch.bool)
        if args.window_right >= 0:
            ok &= j <= diag + args.window_right
        if args.window_left >= 0:
            ok &= j >= diag - args.window_left
        s = s.masked_fill(~ok, float("-inf"))
        row_lse = torch.logsumexp(s, -1)
        p = torch.exp(s - row_lse.unsqueeze(-1)).nan_to_num(0.0)
        out[cu_q[b]:cu_q[b + 1]] = (p @ vs).transpose(0, 1).to(out.dtype)
        lse[cu_q[b]:cu_q[b + 1]] = row_lse.transpose(0, 1)


def attention(q, k, v, out, lse, args):
    _attend(q, k, v, out, lse, args)


def attention_top_left(q, k, v, out, lse, args):
    """Broken: the causal diagonal aligned top-left under a bottom-right contract (flash-attention#466)."""
    _attend(q, k, v, out, lse, args, top_left=True)


def attention_scaled_twice(q, k, v, out, lse, args):
    """Broken: the softmax scale applied twice."""
    _attend(q, k, v, out, lse, args, scale=args.softmax_scale ** 2)
