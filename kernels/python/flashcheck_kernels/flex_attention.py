"""PyTorch's FlexAttention (torch.nn.attention.flex_attention), compiled, under flashcheck.

The packed batch goes in as one sequence of all rows, and a mask_mod keeps each query inside its own
document (the varlen batch), applies the causal diagonal (bottom-right or top-left), the window and
seqused_k; softcap is a score_mod; grouped KV heads use enable_gqa; the LSE comes from return_aux.
Paged K/V goes through torch's PagedAttention helper instead, with the queries batched (see _paged()).
FlexAttention picks its decoding kernel for short queries by itself. The compiled function is made
once per process and reused with dynamic shapes, so that a campaign is not dominated by recompilation:
flex_compile_seconds() reports the time spent compiling.

Each distinct static size is a graph of its own, an Inductor compilation of seconds on the GPU, so the layout keeps
them few. Dynamo treats the head counts of q and k as static (flex_attention's GQA checks guard them), so one
(1, H, rows, d) call per case made a graph per (H, Hk) pair: 124 graphs in 200 cases with the generator's heads.
The adapter therefore folds the KV heads in pairs into flex_attention's batch dimension, which stays dynamic: q goes
in as (pairs, 2 x group, rows, d) and K/V as (pairs, 2, rows, d), so only the group size is static, and the kernel
still maps query heads onto two KV heads in each batch entry (a head-mapping bug is not hidden). Heads are padded
with zeros to at least two pairs, since Dynamo also specializes every size that is 0 or 1; likewise the per-document
tensors get a spare entry and K/V zero rows past two key blocks. Queries are not padded: one query row and one query
block select FlexAttention's decoding kernel and its variants, which are under test. The decoding kernel also needs a
static batch (_decoding()), which its calls get at one size. That leaves, per group size and softcap, three query
shapes for each of the unpaged and paged paths (lab/flex_graphs.py: 34 graphs in 300 unpaged cases, 70 with a
third paged). FLASHCHECK_FLEX_SIZE_OBLIVIOUS=1 sets torch's experimental `backed_size_oblivious`, which drops the
query guards too; it is off by default.
"""
import os
import time

import torch

from .masks import sequence_lengths

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
              "varlen: one call over all packed rows with a document mask_mod over cu_seqlens",
              "layout: KV heads folded in pairs into flex's batch, (pairs, 2 x group, rows, d); calls of fewer "
              "than 128 query rows with a power-of-two group get a static batch, so the decoding kernel runs",
              "known defect: the decoding kernel fails to compile when query rows x group > 128 "
              "(fixtures/found/flex-attention-gqa-dynamic-no-valid-choices.json)",
              "causal and windows: mask_mod on positions within the document (bottom-right unless top-left)",
              "softcap: score_mod tanh; GQA: enable_gqa=True",
              "paged K/V: torch's PagedAttention helper (experimental), queries batched, pages of 128 x n keys"],
    # The compiled backward (Inductor's flex_attention_backward template) through autograd of the same call: one
    # program per KV block sums dK/dV over the query heads of its group and the query blocks, with no atomics
    # (torch/_inductor/kernel/flex/templates/flex_backwards.py.jinja), hence bitwise reproducible.
    "backward": {"deterministic": True,
                 "notes": ["torch's autograd through the adapter's compiled call (Inductor's flex_attention_backward "
                           "kernel)",
                           "dK/dV of a KV head are summed over its group inside the kernel; the adapter's folding, "
                           "padding and page pool are differentiable copies"]},
}

_MIN_KEY_ROWS = 2 * 128 + 1  # more than two of flex_attention's default 128-row blocks: never one block
_DECODING_ROWS = 128  # below this many query rows Inductor may pick the decoding kernel
_DECODING_SEQS = 4  # a paged call for the decoding kernel has at least this many sequences (empty ones added)
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
        # instead of the fallback, which _call answers by compiling afresh, so that a verdict always concerns the
        # compiled kernel. FLASHCHECK_FLEX_RECOMPILE_LIMIT lowers it (ci/plugins.sh checks _call's reset that way).
        dynamo.recompile_limit = int(os.environ.get("FLASHCHECK_FLEX_RECOMPILE_LIMIT", "128"))
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


def _call(q4, k4, v4, score_mod, block_mask, args, config, decoding):
    """flex_attention, compiled (eager on the CPU), with the LSE; counts the first call of a configuration as
    compile time. For the decoding kernel the batch is marked static: Inductor picks that kernel only for a static
    batch and head count, and with every size dynamic (dynamic=True) it would never run."""
    from torch.nn.attention.flex_attention import AuxRequest
    global _compile_seconds
    if decoding:
        for t in (q4, k4, v4):
            torch._dynamo.mark_static(t, 0)
    start = time.perf_counter()
    backend = "inductor" if q4.is_cuda else "eager"

    def run():
        # return_aux, not the deprecated return_lse: its one-time warning is a guard of the compiled graph, and the
        # first call after it recompiled.
        return _flex(backend)(q4, k4, v4, score_mod=score_mod, block_mask=block_mask, scale=args.softmax_scale,
                              enable_gqa=q4.shape[1] != k4.shape[1], return_aux=AuxRequest(lse=True))
    try:
        o, aux = run()
    except torch._dynamo.exc.FailOnRecompileLimitHit:
        # A long-lived worker meets more configurations than the limit allows graphs (a realistic-size worker hit
        # it after thousands of cases on 2026-12-02). Past the limit the choice is an error or Dynamo's eager
        # fallback, and neither is the compiled kernel: start Dynamo's cache afresh, once, and compile again.
        torch._dynamo.reset()
        _compiled.clear()
        _shapes_seen.clear()
        o, aux = run()
    # Dynamo's specializations (module notes); a call whose inputs require gradients is a training graph of its own.
    graph = config + (q4.shape[-2] == 1, q4.shape[-2] <= 128, decoding, q4.requires_grad)
    if graph not in _shapes_seen:
        if q4.is_cuda:
            torch.cuda.synchronize()
        _compile_seconds += time.perf_counter() - start
        _shapes_seen.add(graph)
    return o, aux.lse


def _config(q, group, args, paged):
    return (q.dtype, group, q.shape[-1], args.softcap > 0, paged)


def _decoding(q_rows, group):
    """Whether Inductor lowers the call to FlexAttention's decoding kernel: fewer than 128 query rows and a
    power-of-two group (torch/_inductor/kernel/flex/flex_decoding.py, _use_flex_decoding), and only with a static
    batch and head count, which the adapter then gives it (see _call)."""
    return q_rows < _DECODING_ROWS and group & (group - 1) == 0


def _pairs(kv_heads, decoding):
    """KV heads taken two at a time: at least two pairs, against Dynamo's 0/1 specializations, and for the decoding
    kernel, whose batch must be static, four (the generators' eight KV heads), so that its batch is one size."""
    return max(4 if decoding else 2, (kv_heads + 1) // 2)


def _fold(x, pairs, group):
    """(rows, heads, d) -> (pairs, 2 x group, rows, d): KV heads 2p and 2p + 1 with their query heads (group each,
    head h on KV head h // group) become batch entry p; heads past the real ones are zeros."""
    rows, heads, d = x.shape
    want = pairs * 2 * group
    if heads < want:
        x = torch.cat([x, x.new_zeros(rows, want - heads, d)], dim=1)
    return x.view(rows, pairs, 2 * group, d).permute(1, 2, 0, 3).contiguous()


def _unfold(x, heads):
    """(pairs, 2 x group, rows, ...) -> (rows, heads, ...), dropping the padded heads."""
    x = x.movedim(2, 0)
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2], *x.shape[3:])[:, :heads]


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
    # Padding against Dynamo's 0/1 specializations (module notes): a spare per-document entry, so that a batch of
    # one is two entries long, and K/V zero rows outside every document up to two key blocks (one block or two
    # differ only in how many blocks the block mask lists; a block without a visible key is skipped).
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

    def mask_mod(b, h, qi, ki):  # the same for every batch entry (KV head pair) and head
        d = doc_q[qi].clamp(min=0)
        kp = pos_k[ki]
        ok = (doc_q[qi] == doc_k[ki]) & (doc_q[qi] >= 0) & (kp < used_t[d])
        return ok & in_window(kp, pos_q[qi] + offset[d])

    block_mask = create_block_mask(mask_mod, 1, None, total_q, k_rows, device=device)
    heads, group = q.shape[1], q.shape[1] // k.shape[1]
    decoding = _decoding(total_q, group)
    pairs = _pairs(k.shape[1], decoding)
    qf, kf, vf = _fold(q, pairs, group), _fold(k, pairs, 1), _fold(v, pairs, 1)
    o, row_lse = _call(qf, kf, vf, score_mod, block_mask, args, _config(q, group, args, False), decoding)
    out.copy_(_unfold(o, heads))
    if lse is not None:
        lse.copy_(_unfold(row_lse, heads))


def _paged(q, k, v, out, lse, args):
    """Paged K/V through torch's own helper, torch.nn.attention.experimental._paged_attention.PagedAttention, as a
    serving engine uses it: queries batched (entries, heads, max_q, d) over one (1, heads, pages x page size, d)
    page pool, and the logical block mask converted to physical pages by convert_logical_block_mask. The helper
    wants a page as wide as a key block of the mask, hence page sizes in multiples of 128 (the contract). The KV
    heads are folded in pairs as in attention(): entry b x pairs + p is sequence b's pair p, whose pages are the
    case's pages of that sequence in pair p's copy of the pool. The helper's page table and page-to-position map
    are filled from the case's block table instead of its allocator, so that pages sit where the case puts them."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask
    device = q.device
    B, ps, H, d = args.batch, args.page_size, q.shape[1], q.shape[2]
    n_pages, Hk = k.shape[0], k.shape[2]
    lens_q, used = sequence_lengths(args)
    table = args.block_table.to(device="cpu", dtype=torch.int64)  # (B, max_blocks), -1 past a sequence's pages
    max_q, max_blocks = max(lens_q), table.shape[1]
    group = H // Hk
    decoding = _decoding(max_q, group)
    pairs = _pairs(Hk, decoding)
    if decoding and B < _DECODING_SEQS:  # a static batch of one size: empty sequences, no queries and no pages
        lens_q += [0] * (_DECODING_SEQS - B)
        used += [0] * (_DECODING_SEQS - B)
        table = torch.cat([table, table.new_full((_DECODING_SEQS - B, max_blocks), -1)])
        B = _DECODING_SEQS
    entries = B * pairs

    # The helper's tables, built on the host and copied once.
    page_table = torch.full((entries, pairs * n_pages), -1, dtype=torch.int64)
    physical_to_logical = page_table.clone()
    capacity = torch.zeros(entries, dtype=torch.int64)
    for b in range(B):
        pages = table[b][table[b] >= 0]
        for p in range(pairs):
            e = b * pairs + p
            page_table[e, :len(pages)] = pages + p * n_pages
            physical_to_logical[e, pages + p * n_pages] = torch.arange(len(pages))
            capacity[e] = len(pages) * ps
    pa = PagedAttention(pairs * n_pages, ps, entries, device=device)
    for mine, theirs in ((page_table, pa.page_table), (physical_to_logical, pa.physical_to_logical),
                         (capacity, pa.capacity)):
        theirs.copy_(mine)

    # Query rows of sequence b at rows [b x max_q, b x max_q + lens_q[b]); the rest are zeros that the mask leaves
    # without keys. Folded: (pairs, 2 x group, B x max_q, d) -> entries (B x pairs, 2 x group, max_q, d).
    rows = torch.tensor([b * max_q + i for b in range(B) for i in range(lens_q[b])], dtype=torch.int64, device=device)
    qrows = q.new_zeros(B * max_q, H, d).index_copy_(0, rows, q)
    qb = _fold(qrows, pairs, group).view(pairs, 2 * group, B, max_q, d).permute(2, 0, 1, 3, 4)
    qb = qb.reshape(entries, 2 * group, max_q, d)
    lens_q_t = torch.tensor(lens_q, dtype=torch.int32, device=device).repeat_interleave(pairs)
    used_t = torch.tensor(used, dtype=torch.int32, device=device).repeat_interleave(pairs)
    offset = torch.zeros_like(used_t) if args.top_left else used_t - lens_q_t
    in_window, score_mod = _mods(args, device)

    def logical_mask(e, h, qi, ki):  # ki: the key's position in its sequence
        return (qi < lens_q_t[e]) & (ki < used_t[e]) & in_window(ki, qi + offset[e])

    logical = create_block_mask(logical_mask, entries, None, max_q, max_blocks * ps, device=device,
                                BLOCK_SIZE=(128, ps))
    block_mask = pa.convert_logical_block_mask(logical, kv_len=used_t)
    # The pool: pair p's copy of every page after pair p - 1's, (1, 2, pairs x pages x page size, d).
    kc, vc = (_fold(x.reshape(n_pages * ps, Hk, x.shape[3]), pairs, 1).transpose(0, 1)
              .reshape(2, pairs * n_pages * ps, x.shape[3]).unsqueeze(0) for x in (k, v))
    o, row_lse = _call(qb, kc, vc, score_mod, block_mask, args, _config(q, group, args, True), decoding)

    def unbatch(x):  # (entries, 2 x group, max_q, ...) -> (real query rows, H, ...)
        x = x.reshape(B, pairs, 2 * group, max_q, *x.shape[3:]).movedim(3, 1)  # (B, max_q, pairs, 2g, ...)
        x = x.reshape(B * max_q, pairs * 2 * group, *x.shape[4:])[:, :H]
        return x.index_select(0, rows)

    out.copy_(unbatch(o))
    if lse is not None:
        lse.copy_(unbatch(row_lse))


def attention_cpu(q, k, v, out, lse, args):
    """The adapter on the CPU, for CI: the same masks, document maps, score_mod and LSE, traced by Dynamo with
    its eager backend, so that flex_attention runs its unfused reference path instead of a compiled kernel.
    It tests this adapter's translation of the case, not FlexAttention's kernel."""
    attention(q, k, v, out, lse, args)


attention.backward = "autograd"
# No backward: flex_attention raises "FlexAttention does not support backward on CPU" (torch 2.11).
attention_cpu.contract = dict(
    {key: value for key, value in CONTRACT.items() if key != "backward"}, device="cpu", dtypes=["fp32"],
    summary="this adapter on the CPU (Dynamo's eager backend: flex_attention's unfused path), to test the adapter")
