"""PyTorch's FlexAttention (torch.nn.attention.flex_attention), compiled, under flashcheck.

The packed batch goes in as one sequence of all rows, and a mask_mod keeps each query inside its own
document (the varlen batch), applies the causal diagonal (bottom-right or top-left), the window and
seqused_k; softcap is a score_mod; grouped KV heads use enable_gqa; the LSE comes from return_aux.
Paged K/V goes through torch's PagedAttention helper instead, with the queries batched (see _paged()).
FlexAttention picks its decoding kernel for short queries by itself. The compiled function is made
once per process and reused with dynamic shapes, so that a campaign is not dominated by recompilation:
flex_compile_seconds() reports the time spent compiling.

Dynamo still specializes every size that is 0 or 1 (a batch of one, one block of queries or keys, one query),
so each configuration compiles up to 2^k graphs. The adapter pads away the two that do not change the kernel
(the per-document tensors and the key blocks: see attention()); with Dynamo alone on the CPU (no Inductor), 200
cases of a mixed batch took 24 graphs instead of 44: 8 configurations (KV heads, softcap) times one query row,
one query block, or more (tools/flex_graphs.py, docs/RESULTS.md). FLASHCHECK_FLEX_SIZE_OBLIVIOUS=1 sets torch's
experimental `backed_size_oblivious`, which drops the query guards too (16 graphs: the decoding kernel's
q_len < 128 guard stays). Whether Inductor lowers the kernel that way on the GPU has not been run yet, so it is a
switch, off by default.
"""
import os
import time

import torch

CONTRACT = {
    "summary": "torch.nn.attention.flex_attention (torch.compile, dynamic shapes), document masking for varlen",
    "device": "cuda",
    "features": {"bottom_right": "native", "top_left": "native", "window": "native", "softcap": "native",
                 "gqa": "native", "varlen": "native", "seqused_k": "native", "paged": "native"},
    "page_size_multiple": 128,
    "dtypes": ["fp16", "bf16", "fp32"],
    "max_head_dim": 256,
    "head_dim_multiple": 16,
    "empty_row": "zero",
    "returns_lse": True,
    "deterministic": True,
    "finite_unused_slots": "known defect: NaN in key slots the mask excludes (past seqused_k, slack) reaches the "
                           "output, 0 x NaN in P.V (fixtures/found/flex-attention-nan-in-masked-keys.json)",
    "notes": ["zero-length sequences excluded: a batch without keys makes an empty (1, H, 0, d) call",
              "varlen: one (1, H, total, d) call with a document mask_mod over cu_seqlens",
              "causal and windows: mask_mod on positions within the document (bottom-right unless top-left)",
              "softcap: score_mod tanh; GQA: enable_gqa=True",
              "paged K/V: torch's PagedAttention helper (experimental), queries batched, pages of 128 x n keys"],
}

_MIN_KEY_ROWS = 2 * 128 + 1  # more than two of flex_attention's default 128-row blocks: never one block
_compiled = {}  # by Dynamo backend
_compile_seconds = 0.0
_shapes_seen = set()


def flex_compile_seconds():
    return _compile_seconds


def _flex(backend="inductor"):
    if backend not in _compiled:
        import torch._dynamo.config as dynamo
        from torch.nn.attention.flex_attention import flex_attention
        # Dynamo specializes sizes 0 and 1 and each (grouping, softcap) graph separately, so a campaign passes the
        # default limit of 8 graphs quickly; past it Dynamo silently runs flex_attention eagerly (the unfused
        # path that materializes the scores), which is not the kernel under test. A higher limit, and an error
        # instead of the fallback, so that a verdict always concerns the compiled kernel.
        dynamo.recompile_limit = 128
        dynamo.fail_on_recompile_limit_hit = True
        if os.environ.get("FLASHCHECK_FLEX_SIZE_OBLIVIOUS") == "1":
            import torch.fx.experimental._config as fx_config
            fx_config.backed_size_oblivious = True
        _compiled[backend] = torch.compile(flex_attention, dynamic=True, backend=backend)
    return _compiled[backend]


def _document_maps(cu, total, device):
    """For each packed row: its document and its position inside it (rows past the last document: -1).
    Built on the host in a few vector operations and copied once: a loop of per-document device writes cost
    more than the kernel on short cases."""
    cu_t = torch.tensor(cu, dtype=torch.int64)
    lens = cu_t.diff()
    docs = torch.arange(len(lens), dtype=torch.int64).repeat_interleave(lens)
    rows = torch.arange(cu[0], cu[-1], dtype=torch.int64)
    doc = torch.full((total,), -1, dtype=torch.int32)
    pos = torch.zeros(total, dtype=torch.int32)
    doc[cu[0]:cu[-1]] = docs.to(torch.int32)
    pos[cu[0]:cu[-1]] = (rows - cu_t[docs]).to(torch.int32)
    return doc.to(device), pos.to(device)


def _mods(args, device):
    """The window bounds and the softcap score_mod. Window and softcap are tensors: values captured by the mods'
    closures would be guarded by value and recompile the kernel for every new window; tensors are inputs of one
    compiled graph."""
    left = torch.tensor(args.window_left, dtype=torch.int32, device=device)
    right = torch.tensor(args.window_right, dtype=torch.int32, device=device)
    score_mod = None
    if args.softcap > 0:
        cap = torch.tensor(args.softcap, dtype=torch.float32, device=device)

        def score_mod(score, b, h, qi, ki):
            return cap * torch.tanh(score / cap)

    def in_window(kp, diag):
        return ((right < 0) | (kp <= diag + right)) & ((left < 0) | (kp >= diag - left))

    return in_window, score_mod


def _call(q4, k4, v4, score_mod, block_mask, args, config):
    """flex_attention, compiled (eager on the CPU), with the LSE; counts the first call of a configuration as
    compile time."""
    from torch.nn.attention.flex_attention import AuxRequest
    global _compile_seconds
    start = time.perf_counter()
    # return_aux, not the deprecated return_lse: its one-time warning is a guard of the compiled graph, and the
    # first call after it recompiled.
    o, aux = _flex("inductor" if q4.is_cuda else "eager")(
        q4, k4, v4, score_mod=score_mod, block_mask=block_mask, scale=args.softmax_scale,
        enable_gqa=q4.shape[1] != k4.shape[1], return_aux=AuxRequest(lse=True))
    if config not in _shapes_seen:
        if q4.is_cuda:
            torch.cuda.synchronize()
        _compile_seconds += time.perf_counter() - start
        _shapes_seen.add(config)
    return o, aux.lse


def _config(q, k, v, args, paged):
    return (q.dtype, q.shape[1], k.shape[-2], q.shape[-1], v.shape[-1], args.softcap > 0, paged)


def attention(q, k, v, out, lse, args):
    if q.shape[0] == 0:
        return
    if args.block_table is not None:
        return _paged(q, k, v, out, lse, args)
    from torch.nn.attention.flex_attention import create_block_mask
    device = q.device
    cu_q, cu_k = args.cu_seqlens_q.tolist(), args.cu_seqlens_k.tolist()
    total_q, total_k = q.shape[0], k.shape[0]
    lens_k = [cu_k[b + 1] - cu_k[b] for b in range(args.batch)]
    used = args.seqused_k.tolist() if args.seqused_k is not None else lens_k
    # Dynamo specializes sizes 0 and 1, each a graph more (an Inductor compilation on the GPU). Two of them say
    # nothing about the kernel, so they are padded away: the per-document tensors get a spare entry (a batch of
    # one is two entries long), and K/V get zero rows outside every document up to two key blocks (one block or
    # two differ only in how many blocks the block mask lists; a block without a visible key is skipped).
    # Queries are not padded: one query row and one query block select FlexAttention's decoding kernel and its
    # variants, which are under test.
    lens_q = torch.tensor([cu_q[b + 1] - cu_q[b] for b in range(args.batch)] + [0], dtype=torch.int32, device=device)
    used_t = torch.tensor(used + [0], dtype=torch.int32, device=device)
    k_rows = max(total_k, _MIN_KEY_ROWS)
    if k_rows > total_k:
        k, v = (torch.cat([x, x.new_zeros((k_rows - total_k,) + tuple(x.shape[1:]))]) for x in (k, v))
    doc_q, pos_q = _document_maps(cu_q, total_q, device)
    doc_k, pos_k = _document_maps(cu_k, k_rows, device)
    # Bottom-right: the diagonal of document b is offset by (used keys - queries).
    offset = torch.zeros_like(used_t) if args.top_left else used_t - lens_q
    in_window, score_mod = _mods(args, device)

    def mask_mod(b, h, qi, ki):
        d = doc_q[qi].clamp(min=0)
        kp = pos_k[ki]
        ok = (doc_q[qi] == doc_k[ki]) & (doc_q[qi] >= 0) & (kp < used_t[d])
        return ok & in_window(kp, pos_q[qi] + offset[d])

    block_mask = create_block_mask(mask_mod, 1, None, total_q, k_rows, device=device)
    qh, kh, vh = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))  # (1, H, rows, d)
    o, row_lse = _call(qh, kh, vh, score_mod, block_mask, args, _config(q, k, v, args, False))
    out.copy_(o[0].transpose(0, 1))
    if lse is not None:
        lse.copy_(row_lse[0].transpose(0, 1))


def _paged(q, k, v, out, lse, args):
    """Paged K/V through torch's own helper, torch.nn.attention.experimental._paged_attention.PagedAttention, as a
    serving engine uses it: queries batched (B, H, max_q, d), the page pool as one (1, Hk, pages x page size, d)
    cache, and the logical block mask converted to physical pages by convert_logical_block_mask. The helper
    wants a page as wide as a key block of the mask, hence page sizes in multiples of 128 (the contract). Its
    page table and page-to-position map are filled from the case's block table instead of its allocator, so
    that pages sit where the case puts them."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask
    device = q.device
    B, ps, H, d = args.batch, args.page_size, q.shape[1], q.shape[2]
    n_pages, Hk = k.shape[0], k.shape[2]
    cu_q = args.cu_seqlens_q.tolist()
    lens_q = [cu_q[b + 1] - cu_q[b] for b in range(B)]
    cu_k = args.cu_seqlens_k.tolist()
    used = args.seqused_k.tolist() if args.seqused_k is not None else [cu_k[b + 1] - cu_k[b] for b in range(B)]
    table = args.block_table.to(device=device, dtype=torch.int64)  # (B, max_blocks), -1 past a sequence's pages
    max_q, max_blocks = max(lens_q), table.shape[1]

    pa = PagedAttention(n_pages, ps, B, device=device)
    pa.page_table[:, :max_blocks] = table
    for b in range(B):
        pages = table[b][table[b] >= 0]
        pa.physical_to_logical[b, pages] = torch.arange(len(pages), device=device)
        pa.capacity[b] = len(pages) * ps

    # Query rows of sequence b at [b, :lens_q[b]]; the rest are zeros that the mask leaves without keys.
    rows = torch.tensor([b * max_q + i for b in range(B) for i in range(lens_q[b])], dtype=torch.int64, device=device)
    qb = q.new_zeros(B * max_q, H, d).index_copy_(0, rows, q).view(B, max_q, H, d).transpose(1, 2)
    lens_q_t = torch.tensor(lens_q, dtype=torch.int32, device=device)
    used_t = torch.tensor(used, dtype=torch.int32, device=device)
    offset = torch.zeros_like(used_t) if args.top_left else used_t - lens_q_t
    in_window, score_mod = _mods(args, device)

    def logical_mask(b, h, qi, ki):  # ki: the key's position in its sequence
        return (qi < lens_q_t[b]) & (ki < used_t[b]) & in_window(ki, qi + offset[b])

    logical = create_block_mask(logical_mask, B, None, max_q, max_blocks * ps, device=device, BLOCK_SIZE=(128, ps))
    block_mask = pa.convert_logical_block_mask(logical, kv_len=used_t)
    kc, vc = (x.reshape(n_pages * ps, Hk, x.shape[3]).transpose(0, 1).unsqueeze(0) for x in (k, v))
    o, row_lse = _call(qb, kc, vc, score_mod, block_mask, args, _config(q, k, v, args, True))
    out.copy_(o.transpose(1, 2).reshape(B * max_q, H, -1).index_select(0, rows))
    if lse is not None:
        lse.copy_(row_lse.transpose(1, 2).reshape(B * max_q, H).index_select(0, rows))


def attention_cpu(q, k, v, out, lse, args):
    """The adapter on the CPU, for CI: the same masks, document maps, score_mod and LSE, traced by Dynamo with
    its eager backend, so that flex_attention runs its unfused reference path instead of a compiled kernel.
    It tests this adapter's translation of the case, not FlexAttention's kernel."""
    attention(q, k, v, out, lse, args)


attention_cpu.contract = dict(
    CONTRACT, device="cpu", dtypes=["fp32"],
    summary="this adapter on the CPU (Dynamo's eager backend: flex_attention's unfused path), to test the adapter")
