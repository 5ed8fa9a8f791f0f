"""Direct probes of PyTorch's CUDA attention backwards, for the analysis of what the backward campaign found on an
H200 (results/RESULTS.md). Each probe compares an op's gradients with torch's autograd of exact float64 attention under
the same mask, and prints one line; run it on a GPU node: python3 lab/backward_probes.py"""
import torch

torch.manual_seed(0)
dev = "cuda"


def exact_grads(q, k, v, allowed, dout, scale):
    """Gradients of <dout, attention> in float64 under `allowed` [Lq, Lk] (rows without a key: zero)."""
    q64, k64, v64 = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q64, k64) * scale
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    out = torch.einsum("bhqk,bkhd->bqhd", p, v64)
    return torch.autograd.grad(out, (q64, k64, v64), dout.double())


def mask(lq, lk, bottom_right, left):
    i = torch.arange(lq, device=dev)[:, None]
    j = torch.arange(lk, device=dev)[None, :]
    diag = i + (lk - lq if bottom_right else 0)
    ok = j <= diag
    if left >= 0:
        ok &= j >= diag - left
    return ok


def probe_efficient_window_backward():
    # aten::_efficient_attention_backward with causal windows (custom_mask_type 1 top-left, 2 bottom-right),
    # window_size = left + 1 keys: max error of dq, dk, dv against exact gradients, and the forward's error.
    for mask_type, lq, lk in ((2, 1, 2), (2, 4, 8), (1, 8, 8), (1, 65, 25)):
        for window in (1, 2, 3, None):
            q = torch.randn(1, lq, 1, 8, device=dev, dtype=torch.float16)
            k = torch.randn(1, lk, 1, 8, device=dev, dtype=torch.float16)
            v = torch.randn(1, lk, 1, 8, device=dev, dtype=torch.float16)
            g = torch.randn(1, lq, 1, 8, device=dev, dtype=torch.float16)
            scale = 8 ** -0.5
            out, lse, seed, offset, *_ = torch.ops.aten._efficient_attention_forward(
                q, k, v, None, None, None, lq, lk, 0.0, mask_type, True, scale=scale, window_size=window)
            dq, dk, dv, _ = torch.ops.aten._efficient_attention_backward(
                g, q, k, v, None, out, None, None, lq, lk, lse, 0.0, seed, offset, mask_type, False, scale=scale,
                window_size=window)
            allowed = mask(lq, lk, mask_type == 2, -1 if window is None else window - 1)
            eq, ek, ev = exact_grads(q, k, v, allowed, g, scale)
            err = [(a.double() - b).abs().max().item() for a, b in ((dq, eq), (dk, ek), (dv, ev))]
            print(f"efficient backward type {mask_type} q{lq} k{lk} window_size {window}: "
                  f"max err dq {err[0]:.3g} dk {err[1]:.3g} dv {err[2]:.3g}")


def probe_flash_varlen_backward_zero_keys():
    # aten::_flash_attention_backward in varlen mode with sequences of zero keys (the forward takes them): a batch
    # whose only sequence has none (max_seqlen_k 0), and a batch where one of two has none.
    for q_lens, k_lens in (([1], [0]), ([1, 2], [0, 3]), ([2, 1], [3, 0])):
        cq = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), device=dev, dtype=torch.int32)
        ck = torch.tensor([0] + list(torch.tensor(k_lens).cumsum(0)), device=dev, dtype=torch.int32)
        q = torch.randn(sum(q_lens), 1, 8, device=dev, dtype=torch.float16)
        k = torch.randn(sum(k_lens), 1, 8, device=dev, dtype=torch.float16)
        v = torch.randn(sum(k_lens), 1, 8, device=dev, dtype=torch.float16)
        mq, mk = max(q_lens), max(k_lens)
        out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(q, k, v, cq, ck, mq, mk, 0.0, False, False)
        what = f"flash varlen backward, q_lens {q_lens} k_lens {k_lens}"
        try:
            g = torch.randn_like(out)
            dq, dk, dv = torch.ops.aten._flash_attention_backward(g, q, k, v, out, lse, cq, ck, mq, mk, 0.0, False,
                                                                  rng, unused)
            torch.cuda.synchronize()
            # the exact gradients, sequence by sequence (a sequence without keys: zero)
            eq = torch.zeros_like(q, dtype=torch.float64)
            ek = torch.zeros_like(k, dtype=torch.float64)
            ev = torch.zeros_like(v, dtype=torch.float64)
            for b in range(len(q_lens)):
                qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
                if k_lens[b] == 0 or q_lens[b] == 0:
                    continue
                allowed = torch.ones(q_lens[b], k_lens[b], dtype=torch.bool, device=dev)
                gq, gk, gv = exact_grads(q[None, qs], k[None, ks], v[None, ks], allowed, g[None, qs], 8 ** -0.5)
                eq[qs], ek[ks], ev[ks] = gq[0], gk[0], gv[0]
            err = [(a.double() - b).abs().max().item() for a, b in ((dq, eq), (dk, ek), (dv, ev))]
            print(f"{what}: max err dq {err[0]:.3g} dk {err[1]:.3g} dv {err[2]:.3g}")
        except RuntimeError as e:
            print(f"{what}: raises", str(e).splitlines()[0])
            torch.cuda.synchronize()
        print("  forward: out of the first sequence", out[0].flatten().tolist()[:4])


if __name__ == "__main__":
    probe_efficient_window_backward()
    probe_flash_varlen_backward_zero_keys()
