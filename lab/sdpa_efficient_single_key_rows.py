"""Probe (lab, not product): PyTorch's memory-efficient SDPA backend on broadcast K/V under a mask.

The 2026-12-06 false-alarm campaign (seed 29203) found two metamorphic failures of sdpa-efficient, each one row wrong
by more than 1: gqa-repeat on b1 h3/1 d8 fp16 win(0,0) kv-expanded L[129x1] and chunked-prefill on b1 h4/1 d8 fp16
causal win(0,0) kv-expanded L[65x65] (fixtures/found/sdpa-efficient-broadcast-kv-*.json). Both have a boolean mask,
K/V heads presented with stride 0 (expanded) and 32n+1 keys: pytorch/pytorch#191937, fixed upstream by
pytorch/pytorch#191984 after the torch of that run. This probe runs the public
scaled_dot_product_attention with only the memory-efficient backend over a grid around those shapes (query counts,
one key or the diagonal, stride-0 or contiguous K/V heads, boolean or additive mask) and prints, per configuration,
the worst error against an fp64 reference over the rows that have a key, and which row it is.

Usage (on a GPU node): python3 lab/sdpa_efficient_single_key_rows.py
"""
import itertools

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def reference(q, k, v, ok):
    s = torch.einsum("bhid,bhjd->bhij", q.double(), k.double()) / q.shape[-1] ** 0.5
    s = s.masked_fill(~ok, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return torch.einsum("bhij,bhjd->bhid", p, v.double())


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    print(torch.__version__, torch.cuda.get_device_name())
    print("lq    lk  H  kv        mask      worst_err  row  rows_over_0.01  baseline_err")
    # The diagonal gives key counts 63 to 130 (32n+1 among them); one key is 32 x 0 + 1.
    for lq, diag, H, expanded, boolean in itertools.product([63, 64, 65, 66, 97, 127, 128, 129, 130], [False, True],
                                                           [3, 4], [True, False], [True, False]):
        lk = lq if diag else 1
        d = 8
        q = torch.randn(1, H, lq, d, device=dev, dtype=torch.float16)
        k1 = torch.randn(1, 1, lk, d, device=dev, dtype=torch.float16)
        v1 = torch.randn(1, 1, lk, d, device=dev, dtype=torch.float16)
        k = k1.expand(1, H, lk, d) if expanded else k1.repeat(1, H, 1, 1)
        v = v1.expand(1, H, lk, d) if expanded else v1.repeat(1, H, 1, 1)
        i = torch.arange(lq, device=dev).unsqueeze(1)
        j = torch.arange(lk, device=dev).unsqueeze(0)
        ok = j == i + (lk - lq)  # window (0, 0), bottom-right: the diagonal key only
        mask = ok if boolean else torch.zeros(lq, lk, device=dev, dtype=torch.float16).masked_fill(~ok, float("-inf"))
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        ref = reference(q, k, v, ok)
        base = reference(q.half().float(), k.float(), v.float(), ok).half().double()
        has_key = ok.any(-1)
        err = (o.double() - ref).abs().nan_to_num(float("inf"))[:, :, has_key]
        rows = torch.nonzero(has_key).flatten()
        worst = float(err.max())
        row = int(rows[int(err.amax(dim=(0, 1, 3)).argmax())])
        over = int((err.amax(dim=(0, 1, 3)) > 0.01).sum())
        base_err = float((base - ref).abs()[:, :, has_key].max())
        print("%-4d %4d %2d  %-8s  %-8s  %9.3g  %4d  %14d  %.3g" % (lq, lk, H, "expanded" if expanded else "contig",
                                                                   "bool" if boolean else "additive", worst, row, over,
                                                                   base_err))


if __name__ == "__main__":
    main()
