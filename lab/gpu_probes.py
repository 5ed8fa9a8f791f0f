"""Direct probes of PyTorch's CUDA attention ops, for the analysis of what `flashcheck fuzz` found on an
H200 (results/RESULTS.md). Each probe prints one line; run it on a GPU node: python3 lab/gpu_probes.py"""
import torch

torch.manual_seed(0)
dev = "cuda"


def eff(q, k, v, mask_type, seqlen_k=None):
    out, lse, *_ = torch.ops.aten._efficient_attention_forward(
        q, k, v, None, None, None, q.shape[1], k.shape[1], 0.0, mask_type, True, seqlen_k=seqlen_k)
    return out, lse


def probe_efficient_bottom_right_empty_rows():
    # custom_mask_type 2 (bottom-right), 4 queries over 2 keys: rows 0 and 1 see no key.
    q = torch.randn(1, 4, 1, 8, device=dev, dtype=torch.float16)
    k = torch.randn(1, 2, 1, 8, device=dev, dtype=torch.float16)
    v = torch.randn(1, 2, 1, 8, device=dev, dtype=torch.float16)
    out, lse = eff(q, k, v, 2)
    rows = []
    for i in range(4):
        o = out[0, i, 0].float()
        cand = {"zero": torch.zeros_like(o), "v0": v[0, 0, 0].float(), "v1": v[0, 1, 0].float(),
                "mean": v[0, :, 0].float().mean(0)}
        best = min(cand, key=lambda n: (o - cand[n]).abs().max().item())
        rows.append(f"row{i}~{best}({(o - cand[best]).abs().max().item():.1e})")
    print("efficient type-2, 4 queries over 2 keys:", ", ".join(rows), "| lse", lse[0, 0, :4].tolist())


def probe_efficient_seqlen_k_nan_tail():
    # Dense batch of one, 2 key slots of which seqlen_k = 1 are used; NaN in the unused slot of K, V or both.
    for where in ("k", "v", "kv"):
        q = torch.randn(1, 1, 1, 8, device=dev, dtype=torch.float16)
        k = torch.randn(1, 2, 1, 8, device=dev, dtype=torch.float16)
        v = torch.randn(1, 2, 1, 8, device=dev, dtype=torch.float16)
        if "k" in where:
            k[0, 1] = float("nan")
        if "v" in where:
            v[0, 1] = float("nan")
        out, _ = eff(q, k, v, 0, seqlen_k=torch.tensor([1], device=dev, dtype=torch.int32))
        ref = v[0, 0, 0].float()
        print(f"efficient seqlen_k=1, NaN in unused {where}: out has NaN: {bool(out.isnan().any())}, "
              f"max |out - v0| = {(out[0, 0, 0].float() - ref).abs().max().item():.2e}")
    # The same with finite garbage in the unused slot: does it leak into the output?
    q = torch.randn(1, 1, 1, 8, device=dev, dtype=torch.float16)
    k = torch.randn(1, 2, 1, 8, device=dev, dtype=torch.float16)
    v = torch.randn(1, 2, 1, 8, device=dev, dtype=torch.float16)
    v[0, 1] = 1000.0
    out, _ = eff(q, k, v, 0, seqlen_k=torch.tensor([1], device=dev, dtype=torch.int32))
    print(f"efficient seqlen_k=1, V[1] = 1000 (finite): max |out - v0| = {(out[0, 0, 0].float() - v[0, 0, 0].float()).abs().max().item():.2e}")


if __name__ == "__main__":
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    probe_efficient_bottom_right_empty_rows()
    probe_efficient_seqlen_k_nan_tail()


def probe_efficient_bottom_right_weights():
    # One-hot V reads back the softmax weights each row gives each key (custom_mask_type 2).
    for nq, nk in ((2, 1), (4, 2), (5, 3)):
        q = torch.randn(1, nq, 1, 8, device=dev, dtype=torch.float16)
        k = torch.randn(1, nk, 1, 8, device=dev, dtype=torch.float16)
        v = torch.zeros(1, nk, 1, 8, device=dev, dtype=torch.float16)
        for j in range(nk):
            v[0, j, 0, j] = 1.0
        out, _ = eff(q, k, v, 2)
        w = [[round(x, 3) for x in out[0, i, 0, :nk].float().tolist()] for i in range(nq)]
        print(f"efficient type-2 weights, {nq} queries over {nk} keys (row i may see keys <= i - {nq - nk}):", w)


def probe_flash_window_normalization():
    # aten::_flash_attention_forward directly, window (0, -1) with 3 queries over 1 key: every row sees key 0.
    q = torch.randn(1, 3, 1, 8, device=dev, dtype=torch.float16)
    k = torch.randn(1, 1, 1, 8, device=dev, dtype=torch.float16)
    v = torch.randn(1, 1, 1, 8, device=dev, dtype=torch.float16)
    for wl, wr in ((0, None), (0, 2), (None, 13)):
        nq = 15 if wr == 13 else 3
        qq = torch.randn(1, nq, 1, 8, device=dev, dtype=torch.float16)
        out = torch.ops.aten._flash_attention_forward(qq, k, v, None, None, nq, 1, 0.0, False, False,
                                                      window_size_left=wl, window_size_right=wr)[0]
        rows = ["0" if out[0, i].abs().max().item() == 0 else "V" for i in range(nq)]
        print(f"flash window ({wl}, {wr}), {nq} queries over 1 key: rows {''.join(rows)} (0 = zero row, V = attends the key)")


if __name__ == "__main__":
    probe_efficient_bottom_right_weights()
    probe_flash_window_normalization()


def probe_sdpa_cudnn_fully_masked_rows():
    # SDPA with only the cuDNN backend, a boolean mask whose first row is all False.
    from torch.nn.attention import sdpa_kernel, SDPBackend
    q = torch.randn(1, 1, 3, 8, device=dev, dtype=torch.float16)
    k = torch.randn(1, 1, 4, 8, device=dev, dtype=torch.float16)
    v = torch.randn(1, 1, 4, 8, device=dev, dtype=torch.float16)
    mask = torch.ones(3, 4, dtype=torch.bool, device=dev)
    mask[0] = False
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
        with sdpa_kernel(backend):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        o = out[0, 0, 0].float()
        mean = v[0, 0].float().mean(0)
        print(f"sdpa {backend.name}, fully masked row: |out|max {o.abs().max().item():.3g}, "
              f"max |out - mean(V)| {(o - mean).abs().max().item():.3g}, NaN {bool(o.isnan().any())}")


if __name__ == "__main__":
    probe_sdpa_cudnn_fully_masked_rows()
