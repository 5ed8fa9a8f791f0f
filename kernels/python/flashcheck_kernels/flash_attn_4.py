"""FlashAttention-4 (`flash-attn-4` on PyPI: CuTe DSL kernels, JIT-compiled) under flashcheck.

flash_attn.cute.flash_attn_varlen_func takes flash-attn's varlen arguments as they are: packed rows,
cu_seqlens, seqused_k, bottom-right causal, windows (left, right), softcap, grouped KV heads. Its LSE comes
back as (H, total_q). Each new configuration is compiled on first use and cached by the package.
"""
CONTRACT = {
    "summary": "FlashAttention-4 forward (flash_attn.cute.flash_attn_varlen_func, CuTe DSL, sm90 path)",
    "device": "cuda",
    "features": {"bottom_right": "native", "window": "native", "softcap": "native", "gqa": "native",
                 "varlen": "native", "seqused_k": "native", "zero_length": "native"},
    "dtypes": ["fp16", "bf16"],
    "max_head_dim": 256,
    "head_dim_multiple": 8,
    "empty_row": "zero",
    "returns_lse": True,
    "deterministic": True,
    "finite_unused_slots": "known behaviour of the sm90 forward: NaN in key rows past seqused_k reaches the output "
                           "(0 x NaN in P.V; FA4 documents it for paged KV only) "
                           "(fixtures/found/fa4-sm90-nan-past-seqused-k.json)",
    "notes": ["window (left, right) passed as window_size; causal as causal=True (bottom-right)",
              "paged KV (page_table) is supported by FA4 on sm90 but not passed by this adapter yet"],
    # flash_attn_varlen_func's autograd (FlashAttnVarlenFunc.backward -> _flash_attn_bwd, FlashAttentionBackwardSm90
    # on an H100/H200): dQ is accumulated across KV blocks with atomic adds unless deterministic=True, so only the
    # deterministic twin below promises bitwise reproducible gradients.
    # Its dK/dV are allocated with torch.empty_like and the kernel writes the sequences' keys only, so key rows past
    # seqused_k or past the last sequence are not promised to be zero.
    "backward": {"deterministic": False, "zeroes_unused_keys": False, "dtypes": ["fp16", "bf16"],
                 "notes": ["torch's autograd through flash_attn_varlen_func (FlashAttnVarlenFunc.backward, "
                           "flash_bwd_sm90.py on sm90), deterministic=False: dQ accumulated with atomics",
                           "softcap's derivative from FA4's own score_mod_bwd (utils.create_softcap_scoremod_bwd)"]},
}


def _attention(q, k, v, out, lse, args, deterministic):
    from flash_attn.cute import flash_attn_varlen_func
    left = None if args.window_left < 0 else args.window_left
    right = None if args.window_right < 0 else args.window_right
    causal = bool(args.causal) and left is None
    o, row_lse = flash_attn_varlen_func(
        q, k, v, cu_seqlens_q=args.cu_seqlens_q, cu_seqlens_k=args.cu_seqlens_k, seqused_k=args.seqused_k,
        max_seqlen_q=args.max_seqlen_q, max_seqlen_k=args.max_seqlen_k, softmax_scale=args.softmax_scale,
        causal=causal, window_size=(left, None if causal else right), softcap=args.softcap,
        deterministic=deterministic, return_lse=True)
    out.copy_(o)
    if lse is not None:
        lse.copy_(row_lse.transpose(0, 1))


def attention(q, k, v, out, lse, args):
    _attention(q, k, v, out, lse, args, deterministic=False)


def attention_deterministic(q, k, v, out, lse, args):
    """The same forward; the backward with deterministic=True (dQ reduced in a fixed order)."""
    _attention(q, k, v, out, lse, args, deterministic=True)


attention.backward = "autograd"
attention_deterministic.backward = "autograd"
attention_deterministic.contract = dict(
    CONTRACT, summary="FlashAttention-4 as `attention`, its backward with deterministic=True",
    backward=dict(CONTRACT["backward"], deterministic=True,
                  notes=["torch's autograd through flash_attn_varlen_func with deterministic=True"]))
