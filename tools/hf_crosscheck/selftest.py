#!/usr/bin/env python3
"""tools/hf_crosscheck/selftest.py [--keep DIR] [--spec hf517|draft --generate-only] — tests crosscheck.py (next
to this file) without the C++: writes an export directory in the exact `flashcheck export` format (schema
flashcheck.export/1) from a small, independent Python model of the C++ semantics (the eager output of
oracles/hf_eager and the flash dispatch of oracles/hf_flash_path, step labels below), then runs the cross-check on
it. It needs what crosscheck.py needs (torch, safetensors and transformers 5.17.0; run.sh installs them) but no
flashcheck build:
  build/venv/bin/python3 tools/hf_crosscheck/selftest.py --quiet

--spec hf517 (default) applies the RULES below, found by reading and running transformers 5.17.0; --spec draft
follows the draft spec the C++ was first written to, read from transformers' main branch before 5.17.0 (sequence
starts at pos == 0 only, every all-true flash mask dropped, a sliding-window dynamic cache of min(P, W-1)+Lq
columns). With no --generate-only the self-test runs:
  1. hf517 export                          -> crosscheck.py must exit 0 (every case agrees);
     the same written and checked with --sliding-cache model -> exit 0; the hf517 export checked with
     --sliding-cache model -> exit 1, exactly the cases in MODEL_CACHE_DIFFERS;
  2. draft export                          -> exit 1, and exactly the cases in DRAFT_DIFFERS differ;
  3. hf517 export with one eager element moved by 2 ulp, one moved by 1 ulp (must still pass) and one
     flash_rows entry changed -> exit 1, exactly the two broken cases;
  4. a manifest with a wrong schema, one whose tensors file is missing, a missing directory -> exit 2.
Exit 0 when all hold. Takes about half a minute on one core.

STEP LABELS (the comments below and oracles/ use them; paths are in huggingface/transformers):
  A  eager: src/transformers/masking_utils.py (create_causal_mask, create_sliding_window_causal_mask,
     find_packed_sequence_indices) and eager_attention_forward in src/transformers/models/llama/modeling_llama.py
     (gemma2's for softcap). A1 valid columns of the 2D mask; A2 query i sits at absolute column P+i, the cache
     holds the full history; A3 packed segments (a new one wherever position_ids do not step by +1; only without
     a 2D mask, a past or a cache object); A4 allowed keys (mask, causal, window, segment); A5 q.k^T then the
     scaling, rounded in the dtype; A6 softcap; A7 the additive mask (finfo.min); A8 softmax in fp32, rounded;
     A10 P.V. A row with no allowed key averages V over every column (A11), padding rows are not compared (A12).
  B  flash: masking_utils.flash_attention_mask (B0: bool(mask) sliced to the cache's kv_length, dropped when all
     true), src/transformers/integrations/flash_attention.py (B1: query_length, causal, dtype cast), and in
     src/transformers/modeling_flash_attention_utils.py _process_flash_attention_kwargs (B2: causal, window_size
     (W-1, W-1) when k is longer than W, softcap, scale) and _flash_attention_forward's branches: B3 the mask
     branch (_upad_input; B3d the query gather), B4 the caller's cu_seq_lens_q/k and max_length_q/k, B5 packed
     position_ids (_is_packed_sequence, prepare_fa_kwargs_from_position_ids; B5a the sequence starts), B6 dense.

RULES (transformers 5.17.0 where it differs from, or sharpens, the draft spec):
  R1 packed position_ids (B5a): a sequence starts wherever pos == min(pos) over the flattened tensor (PR #47525
     is in 5.17.0), so cu always has >= 2 entries and "no zero" never raises: [[10,12,14]] -> cu [0,3];
     [[2,3,4,2,3]] -> [0,3,5]; [[4,4,4]] -> [0,1,2,3]; [[3,4,0,1,2]] -> [2,5] (rows 0,1 unwritten).
  R2 flash mask (B0): flash_attention_mask returns None only if the sliced mask has exactly kv_length columns
     and is all true; an all-true mask shorter than kv_length (StaticCache: kv_length = max_cache_len) is kept,
     so the mask branch runs and cuts k/v to the mask's length.
  R3 sliding window + dynamic cache: with full-history K/V (the export's, crosscheck.py's default) the mask
     kv_length is P+Lq, not the draft's min(P, W-1)+Lq (that size belongs to the model's DynamicSlidingWindowLayer,
     which also hands the layer only the last min(P, W-1)+Lq K/V columns). With --sliding-cache model (a real
     Mistral/Gemma2 cache): off = max(P-W+1, 0), k/v = exported columns [off, P+Lq), kv_length = P+Lq-off,
     window_size needs P+Lq-off > W, and eager works on those columns only (a row with no allowed key averages
     V over them, not over all P+Lq).
  R4 mask branch (B3d): the query_length test compares with k.shape[1] after the static cut, i.e.
     min(k.shape[1], Lm'); the k/v gather and then the q gather index flat rows and raise
     "index I is out of bounds for dimension 0 with size N" (I the first index out of range) when the caller's
     query_length does not fit q.
  R5 without a cache object, an explicit 2D mask sets kv_length = its length Lm (not Lq): flash slices
     [:, -Lm:] (a no-op) and the eager mask is [B, 1, Lq, Lm] (it fails to add when Lm != Lq).
  R6 a varlen call whose cu_seqlens reach past the rows it was given (3-D M-RoPE positions flattened to 3*Lq,
     caller cu_seq_lens) is made by transformers without complaint; the C++ reports it as an illegal memory
     access (branch error), which crosscheck.py accepts, or records the call (case data fault_as_call).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# Where the draft spec (the --spec draft generator) and transformers 5.17.0 disagree: these cases must differ in
# step 2.
DRAFT_DIFFERS = {
    "pos-no-zero",          # 5.17.0: sequence starts are pos == pos.min() (PR #47525 is in), no error
    "pos-restart-at-2",     # same rule: [[2,3,4,2,3]] -> cu [0,3,5]; draft: no zero -> error
    "pos-all-equal",        # same rule: [[4,4,4]] -> cu [0,1,2,3]
    "static-cache-allones", # 5.17.0 flash_attention_mask keeps an all-true mask shorter than kv_length
    # the draft's B0 slices the mask to min(P, W-1)+Lq columns (all true -> dense, or other cu_seqlens_k), but with
    # the export's full-history K/V transformers' kv_length is P+Lq (R3):
    "sliding-left-pad-past", "sliding-decode-past", "sliding-cache-empty-row",
}
# The same with --sliding-cache model (both sides): must agree; with the hf517 export it must differ here.
MODEL_CACHE_DIFFERS = {"sliding-left-pad-past", "sliding-decode-past", "sliding-cache-empty-row"}


# ------------------------------------------------------------------------------------------------------------
# Cases: (name, case JSON without data) ; tensors are random, seeded by the case index


def cases():
    C = []

    def add(name, data=None, **kw):
        base = {"dtype": "fp16", "batch": 2, "q_len": 5, "past": 0, "heads": 4, "kv_heads": 4, "head_dim": 16,
                "causal": True, "sliding_window": None, "softcap": None, "scale": None, "attention_mask": None,
                "position_ids": None, "position_ids_3d": False, "query_length": None, "use_cache": False,
                "static_cache_len": None, "varlen_kwargs": None}
        base.update(kw)
        base["data"] = {"recipe": "selftest", "seed": len(C), **(data or {})}
        C.append((name, base))

    add("no-mask")
    add("no-mask-use-cache", use_cache=True, dtype="bf16")
    add("left-pad", attention_mask=[[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    add("right-pad", dtype="bf16", attention_mask=[[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    add("all-ones-mask", attention_mask=[[1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    add("mask-values-gt1", attention_mask=[[0, 2, 3, 1, 1], [1, 1, 1, 1, 1]])
    add("decode-past-mask", q_len=1, past=4, use_cache=True, attention_mask=[[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    add("decode-empty-row", q_len=1, past=3, use_cache=True, attention_mask=[[0, 0, 0, 0], [1, 1, 1, 1]])
    add("chunk-past-mask", q_len=3, past=2, use_cache=True, attention_mask=[[0, 1, 1, 1, 1], [1, 1, 1, 0, 1]])
    add("decode-no-mask", q_len=1, past=5, use_cache=True, dtype="bf16")
    add("packed-0-1-2-0-1", batch=1, position_ids=[[0, 1, 2, 0, 1]])
    add("packed-use-cache", batch=1, position_ids=[[0, 1, 2, 0, 1]], use_cache=True)
    add("pos-no-zero", batch=1, q_len=3, position_ids=[[10, 12, 14]])
    add("pos-restart-at-2", batch=1, position_ids=[[2, 3, 4, 2, 3]])
    add("pos-leading-tail", batch=1, position_ids=[[3, 4, 0, 1, 2]])
    add("pos-all-equal", batch=1, q_len=3, position_ids=[[4, 4, 4]])
    add("pos-packed-with-past", batch=1, q_len=3, past=2, use_cache=True, position_ids=[[0, 1, 0]])
    add("pos-offset-contiguous", batch=1, q_len=4, position_ids=[[5, 6, 7, 8]])
    add("pos-batch2-packed-looking", position_ids=[[0, 1, 2, 0, 1], [0, 1, 0, 1, 2]])
    add("pos-with-mask", batch=1, position_ids=[[0, 1, 2, 0, 1]], attention_mask=[[0, 1, 1, 1, 1]])
    add("sliding", batch=1, q_len=6, sliding_window=3)
    add("sliding-short", batch=1, q_len=3, sliding_window=4)
    add("sliding-left-pad-past", q_len=2, past=4, use_cache=True, sliding_window=3,
        attention_mask=[[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    add("sliding-decode-past", q_len=1, past=5, use_cache=True, sliding_window=3,
        attention_mask=[[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    add("sliding-cache-empty-row", q_len=2, past=4, use_cache=True, sliding_window=2,
        attention_mask=[[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    add("sliding-packed", batch=1, q_len=6, sliding_window=2, position_ids=[[0, 1, 2, 3, 0, 1]])
    add("softcap", dtype="bf16", q_len=4, softcap=5.0, scale=0.25)
    add("softcap-left-pad", q_len=4, softcap=2.0, attention_mask=[[0, 1, 1, 1], [1, 1, 1, 1]])
    add("gqa-8-2", dtype="fp32", q_len=6, heads=8, kv_heads=2, attention_mask=[[0, 0, 1, 1, 1, 1], [1] * 6])
    add("gqa-8-2-dense", dtype="bf16", q_len=6, heads=8, kv_heads=2)
    add("query-length-2", q_len=4, query_length=2, attention_mask=[[0, 1, 1, 1], [1, 1, 1, 1]])
    add("query-length-1-dense", q_len=3, query_length=1)
    add("query-length-1-mask", q_len=3, past=2, use_cache=True, query_length=1,
        attention_mask=[[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    add("query-length-gt-lq", q_len=2, past=2, use_cache=True, query_length=4,
        attention_mask=[[0, 1, 1, 1], [1, 1, 1, 1]])
    add("mask-shorter-than-kv", q_len=3, past=2, use_cache=True, attention_mask=[[1, 1, 1, 1], [0, 1, 1, 1]])
    add("mask-longer-than-kv", q_len=2, past=2, use_cache=True,
        attention_mask=[[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])
    add("static-cache", q_len=2, past=3, use_cache=True, static_cache_len=8,
        attention_mask=[[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    add("static-cache-allones", q_len=2, past=3, use_cache=True, static_cache_len=8,
        attention_mask=[[1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    add("static-cache-no-mask", q_len=2, past=3, use_cache=True, static_cache_len=7)
    add("varlen-kwargs", batch=1, q_len=6,
        varlen_kwargs={"cu_seq_lens_q": [0, 2, 6], "cu_seq_lens_k": [0, 2, 6], "max_length_q": 4,
                       "max_length_k": 4})
    add("varlen-kwargs-partial", batch=1, q_len=6, position_ids=[[0, 1, 0, 1, 2, 3]],
        varlen_kwargs={"cu_seq_lens_q": [0, 3, 6], "cu_seq_lens_k": None, "max_length_q": 3,
                       "max_length_k": None})
    add("varlen-kwargs-under-mask", batch=1, q_len=4, attention_mask=[[0, 1, 1, 1]],
        varlen_kwargs={"cu_seq_lens_q": [0, 4], "cu_seq_lens_k": [0, 4], "max_length_q": 4, "max_length_k": 4})
    add("mrope-3d", batch=1, q_len=4, position_ids=[[0, 1, 2, 3]], position_ids_3d=True)
    add("mrope-3d-call-recorded", batch=1, q_len=4, position_ids=[[0, 1, 2, 3]], position_ids_3d=True,
        data={"fault_as_call": True})  # the C++ may record an out-of-bounds call instead of an error
    add("mrope-3d-past", batch=1, q_len=3, past=2, use_cache=True, position_ids=[[2, 3, 4]], position_ids_3d=True)
    add("mrope-3d-batch2", batch=2, q_len=4, position_ids=[[0, 1, 2, 3], [0, 1, 2, 3]], position_ids_3d=True)
    add("noncausal-pad", causal=False, q_len=4, attention_mask=[[0, 1, 1, 1], [1, 1, 1, 1]])
    add("noncausal", causal=False, dtype="bf16", q_len=4)
    add("scale-fp32", dtype="fp32", q_len=3, scale=0.125, heads=2, kv_heads=1)
    return C


# ------------------------------------------------------------------------------------------------------------
# The independent model of the C++ semantics (STEP LABELS in the module docstring), in plain Python/torch. `spec`
# picks the draft spec ("draft") or the transformers 5.17.0 corrections ("hf517"), see RULES in the docstring.


def has_cache(c):
    return bool(c["use_cache"]) or c["past"] > 0 or c["static_cache_len"] is not None


def kv_offset(c, spec, sliding_cache):
    """First exported kv column the attention layer receives. With sliding_cache "model" (R3) a dynamic cache
    built from a sliding-window config keeps only the last W-1 past columns; "full" (A2, and
    crosscheck.py's default) keeps the whole history."""
    W, P = c["sliding_window"], c["past"]
    if sliding_cache == "model" and W is not None and has_cache(c) and c["static_cache_len"] is None:
        return max(P - (W - 1), 0)
    return 0


def eager_reference(torch, c, q, k, v, spec, sliding_cache):
    """Eager (A). q [B, Lq, Hq, D], k/v [B, Lk, Hkv, D] -> [B, Lq, Hq, D]."""
    dt = q.dtype
    B, Lq, Hq, D = q.shape
    Lk, Hkv = k.shape[1], k.shape[2]
    off = kv_offset(c, spec, sliding_cache)
    k, v = k[:, off:], v[:, off:]
    P = c["past"]
    M = c["attention_mask"]
    W = c["sliding_window"]
    causal = c["causal"]
    pos = c["position_ids"]
    segs = None
    if M is None and P == 0 and not has_cache(c) and pos is not None:  # A3
        rows = pos if len(pos) == B else [pos[0]] * B
        segs = []
        for r in rows:
            s = [0]
            for i in range(1, len(r)):
                s.append(s[-1] + (r[i] - r[i - 1] != 1))
            segs.append(s)
    allowed = torch.zeros(B, 1, Lq, Lk - off, dtype=torch.bool)
    for b in range(B):
        for i in range(Lq):
            qa = P + i  # A2
            for j in range(off, Lk):  # absolute kv index
                ok = (j < len(M[b]) and M[b][j] != 0) if M is not None else True  # A1
                if causal and j > qa:
                    ok = False
                if W is not None:
                    ok = ok and ((j > qa - W) if causal else abs(qa - j) <= W)
                if segs is not None:
                    ok = ok and (j < Lq and segs[b][i] == segs[b][j])
                allowed[b, 0, i, j - off] = ok  # A4
    add = torch.where(allowed, torch.tensor(0.0, dtype=dt), torch.tensor(torch.finfo(dt).min, dtype=dt))
    s = c["scale"] if c["scale"] is not None else D ** -0.5
    n_rep = Hq // Hkv
    qt = q.transpose(1, 2)
    kt = k.transpose(1, 2).repeat_interleave(n_rep, dim=1)
    vt = v.transpose(1, 2).repeat_interleave(n_rep, dim=1)
    t = torch.matmul(qt, kt.transpose(2, 3)) * s  # A5
    if c["softcap"] is not None:  # A6
        cap = c["softcap"]
        t = torch.tanh(t / cap) * cap
    t = t + add  # A7
    p = torch.softmax(t, dim=-1, dtype=torch.float32).to(dt)  # A8
    return torch.matmul(p, vt).transpose(1, 2).contiguous()  # A10


class FlashError(Exception):
    pass


def gather_check(indices, rows):
    """torch's `tensor[indices]` on the first axis: the first index out of range raises (IndexError)."""
    for i in indices:
        if i >= rows:
            raise FlashError(f"index {i} is out of bounds for dimension 0 with size {rows}")


def flash_reference(c, spec, sliding_cache):
    """The flash dispatch (B) -> (branch, call dict or None, rows or None, error or None)."""
    B, Lq, P = c["batch"], c["q_len"], c["past"]
    W, cap = c["sliding_window"], c["softcap"]
    D = c["head_dim"]
    static = c["static_cache_len"]
    Lk = static if static is not None else P + Lq
    off = kv_offset(c, spec, sliding_cache)
    Lk_eff = Lk - off  # k.shape[1] as the attention function receives it
    ql = c["query_length"] if c["query_length"] is not None else Lq
    M = c["attention_mask"]
    scale = c["scale"] if c["scale"] is not None else D ** -0.5

    # B0: the 2D mask from masking_utils.flash_attention_mask, sliced to the cache's kv_length
    Mb = None
    if M is not None:
        if static is not None:
            K = static
        elif has_cache(c):
            K = min(P, W - 1) + Lq if (spec == "draft" and W is not None) else Lk_eff
        else:
            K = len(M[0])  # no cache: kv_length is the mask's length
        Mb = [[x != 0 for x in row[-K:]] for row in M]
        all_true = all(all(row) for row in Mb)
        if spec == "draft":
            if all_true:
                Mb = None
        elif all_true and len(Mb[0]) == K:  # 5.17.0: only a full-length all-true mask becomes None
            Mb = None

    # B2: kernel kwargs
    call = {"causal": bool(c["causal"]),
            "window_size": [W - 1, W - 1] if W is not None and Lk_eff > W else None,
            "softcap": cap, "softmax_scale": scale}

    vk = c["varlen_kwargs"]
    have_vk = vk is not None and all(vk.get(n) is not None for n in ("cu_seq_lens_q", "cu_seq_lens_k",
                                                                       "max_length_q", "max_length_k"))
    pos = c["position_ids"]
    pos3 = [pos] * 3 if (pos is not None and c["position_ids_3d"]) else None

    if Mb is not None:  # B3
        Lm = len(Mb[0])
        nk = [sum(r) for r in Mb]
        cu_k = [0]
        for n in nk:
            cu_k.append(cu_k[-1] + n)
        idx_k = [b * Lm + j for b in range(B) for j in range(Lm) if Mb[b][j]]
        gather_check(idx_k, B * min(Lk_eff, Lm))  # k/v cut to the mask's length first (static cache)
        if ql == min(Lk_eff, Lm):
            cu_q, max_q, idx_q = cu_k, max(nk), idx_k
            gather_check(idx_q, B * Lq)
        elif ql == 1:
            if Lq != 1:  # q.squeeze(1) keeps a 4-D query: the varlen kernel rejects it
                raise FlashError(f"the varlen kernel received a 4-D query: query_length is 1 but q has {Lq} tokens")
            cu_q, max_q, idx_q = list(range(B + 1)), 1, list(range(B))
        else:
            Mq = [r[-ql:] for r in Mb]
            nq = [sum(r) for r in Mq]
            cu_q = [0]
            for n in nq:
                cu_q.append(cu_q[-1] + n)
            max_q = max(nq)
            idx_q = [b * len(Mq[0]) + i for b in range(B) for i in range(len(Mq[0])) if Mq[b][i]]
            gather_check(idx_q, B * Lq)
        call.update(kind="varlen", cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max_q, max_seqlen_k=max(nk))
        rows = [-1] * (B * ql)
        for r, dst in enumerate(idx_q):
            rows[dst] = r
        return "mask", call, rows, None

    def varlen_rows(nq_rows, cu):
        return [r if cu[0] <= r < cu[-1] else -2 for r in range(nq_rows)]

    def bounds(cu_q, cu_k, q_rows, k_rows):  # FlashAttention reads [cu[0], cu[-1]) unchecked
        if (cu_q[-1] > q_rows or cu_k[-1] > k_rows) and not c["data"].get("fault_as_call"):
            raise FlashError(f"illegal memory access: cu_seqlens reach query row {cu_q[-1]} and key row "
                                 f"{cu_k[-1]}, but the call has {q_rows} query and {k_rows} key rows")

    if have_vk:  # B4
        bounds(vk["cu_seq_lens_q"], vk["cu_seq_lens_k"], B * Lq, B * Lk_eff)
        call.update(kind="varlen", cu_seqlens_q=list(vk["cu_seq_lens_q"]), cu_seqlens_k=list(vk["cu_seq_lens_k"]),
                    max_seqlen_q=vk["max_length_q"], max_seqlen_k=vk["max_length_k"])
        return "varlen_kwargs", call, varlen_rows(B * Lq, vk["cu_seq_lens_q"]), None

    # B5: is_packed = B == 1 and pos differs from arange(pos.shape[1]) + min(pos), broadcast over the last dim.
    # For a [3, rows, L] M-RoPE tensor shape[1] is rows, not L (F21): with rows == 1 it compares against min(pos).
    packed = False
    if pos is not None and B == 1:
        rows3 = [r for plane in pos3 for r in plane] if pos3 is not None else pos
        L = len(pos[0])
        n = len(pos3[0]) if pos3 is not None else L
        mn = min(x for r in rows3 for x in r)
        if n == L:
            packed = any(r[i] != mn + i for r in rows3 for i in range(L))
        elif n == 1:
            packed = any(x != mn for r in rows3 for x in r)
        else:
            raise FlashError(f"The size of tensor a ({n}) must match the size of tensor b ({L})")
    if packed:
        flat = [x for row in (sum(pos3, []) if pos3 is not None else pos) for x in row]
        start = min(flat) if spec == "hf517" else 0
        starts = [i for i, x in enumerate(flat) if x == start]
        cu = starts + [len(flat)]
        if len(cu) < 2:
            return "error", None, None, ("max(): Expected reduction dim to be specified for input.numel() == 0. "
                                         "Specify the reduction dim with the 'dim' argument.")
        mx = max(cu[i + 1] - cu[i] for i in range(len(cu) - 1))
        bounds(cu, cu, B * Lq, B * Lk_eff)
        call.update(kind="varlen", cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=mx, max_seqlen_k=mx)
        return "packed", call, varlen_rows(B * Lq, cu), None

    call["kind"] = "dense"  # B6
    return "dense", call, [b * Lq + i for b in range(B) for i in range(Lq)], None


# ------------------------------------------------------------------------------------------------------------


def generate(out_dir, spec, sliding_cache="full"):
    import torch
    from safetensors.torch import save_file

    os.makedirs(out_dir, exist_ok=True)
    dts = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    manifest = {"schema": "flashcheck.export/1", "cases": []}
    for idx, (name, c) in enumerate(cases()):
        dt = dts[c["dtype"]]
        g = torch.Generator().manual_seed(1000 + idx)
        B, Lq, P, Hq, Hkv, D = c["batch"], c["q_len"], c["past"], c["heads"], c["kv_heads"], c["head_dim"]
        Lk = c["static_cache_len"] if c["static_cache_len"] is not None else P + Lq
        q = (torch.randn(B, Lq, Hq, D, generator=g) * 1.5).to(dt)
        k = (torch.randn(B, Lk, Hkv, D, generator=g) * 1.5).to(dt)
        v = torch.randn(B, Lk, Hkv, D, generator=g).to(dt)
        if c["static_cache_len"] is not None:
            k[:, P + Lq:] = 0
            v[:, P + Lq:] = 0
        tensors = {"q": q, "k": k, "v": v, "eager_out": eager_reference(torch, c, q, k, v, spec, sliding_cache)}
        if c["attention_mask"] is not None:
            tensors["attention_mask"] = torch.tensor(c["attention_mask"], dtype=torch.int64)
        if c["position_ids"] is not None:
            p = torch.tensor(c["position_ids"], dtype=torch.int64)
            tensors["position_ids"] = p[None].expand(3, -1, -1).contiguous() if c["position_ids_3d"] else p
        try:
            branch, call, rows, err = flash_reference(c, spec, sliding_cache)
        except FlashError as e:
            branch, call, rows, err = "error", None, None, str(e)
        except (IndexError, ValueError) as e:  # the model has no answer here: an error the check will report
            branch, call, rows, err = "error", None, None, f"selftest model: {type(e).__name__}: {e}"
        flash = {"profile": "hf-main", "branch": branch}
        if branch == "error":
            flash["error"] = err
        else:
            flash["call"] = call
            tensors["flash_rows"] = torch.tensor(rows, dtype=torch.int64)
        fname = f"{idx:04d}.safetensors"
        save_file({k_: v_.contiguous() for k_, v_ in tensors.items()}, os.path.join(out_dir, fname))
        manifest["cases"].append({"name": name, "case": c, "tensors": fname, "flash": flash})
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def run_check(dir_, extra=()):
    cmd = [sys.executable, os.path.join(HERE, "crosscheck.py"), dir_, "--verbose", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    failing = set()
    for line in p.stdout.splitlines():
        if line.startswith("FAIL  ") or line.startswith("BAD   "):
            failing.add(line[6:].split(":")[0])
    return p.returncode, failing, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", metavar="DIR", help="write the exports under DIR (kept) instead of a temporary folder")
    ap.add_argument("--spec", choices=("hf517", "draft"), default="hf517", help="with --generate-only: the rules")
    ap.add_argument("--sliding-cache", choices=("full", "model"), default="full",
                    help="with --generate-only: the sliding-window cache the export assumes (see R3)")
    ap.add_argument("--generate-only", action="store_true", help="only write the export (to --keep DIR)")
    ap.add_argument("--quiet", action="store_true", help="do not echo the cross-check output")
    args = ap.parse_args()

    if args.generate_only:
        if not args.keep:
            ap.error("--generate-only needs --keep DIR")
        m = generate(args.keep, args.spec, args.sliding_cache)
        print(f"wrote {len(m['cases'])} cases to {args.keep} (--spec {args.spec}, --sliding-cache {args.sliding_cache})")
        return 0

    base = args.keep or tempfile.mkdtemp(prefix="hfx-selftest-")
    ok = True

    def report(step, good, text):
        nonlocal ok
        ok &= good
        print(f"[selftest] {'PASS' if good else 'FAIL'}: {step}")
        if not args.quiet or not good:
            print("\n".join("    " + line for line in text.rstrip().splitlines()))

    # 1
    d1 = os.path.join(base, "hf517")
    generate(d1, "hf517")
    rc, failing, text = run_check(d1)
    report(f"hf517 export -> exit {rc} (want 0), differing {sorted(failing)}", rc == 0 and not failing, text)

    # 1b: the model's sliding-window cache, on both sides
    d1b = os.path.join(base, "hf517-model-cache")
    generate(d1b, "hf517", sliding_cache="model")
    rc, failing, text = run_check(d1b, ["--sliding-cache", "model"])
    report(f"hf517 export, --sliding-cache model -> exit {rc} (want 0), differing {sorted(failing)}",
           rc == 0 and not failing, text)
    rc, failing, text = run_check(d1, ["--sliding-cache", "model"])
    report(f"hf517 export checked with --sliding-cache model -> exit {rc} (want 1), differing {sorted(failing)} "
           f"(want {sorted(MODEL_CACHE_DIFFERS)})", rc == 1 and failing == MODEL_CACHE_DIFFERS, text)

    # 2
    d2 = os.path.join(base, "draft")
    generate(d2, "draft")
    rc, failing, text = run_check(d2)
    report(f"draft export -> exit {rc} (want 1), differing {sorted(failing)} (want {sorted(DRAFT_DIFFERS)})",
           rc == 1 and failing == DRAFT_DIFFERS, text)

    # 3: corrupt one eager element by 2 ulp and one flash_rows entry
    import torch
    from safetensors.torch import load_file, save_file

    d3 = os.path.join(base, "corrupt")
    shutil.rmtree(d3, ignore_errors=True)
    shutil.copytree(d1, d3)
    with open(os.path.join(d3, "manifest.json")) as f:
        m = json.load(f)
    by_name = {e["name"]: e for e in m["cases"]}
    e1 = by_name["left-pad"]
    t = load_file(os.path.join(d3, e1["tensors"]))
    bits = t["eager_out"].view(torch.int16).clone()
    bits.view(-1)[37] += 2
    t["eager_out"] = bits.view(torch.float16)
    save_file(t, os.path.join(d3, e1["tensors"]))
    e2 = by_name["packed-0-1-2-0-1"]
    t = load_file(os.path.join(d3, e2["tensors"]))
    t["flash_rows"] = t["flash_rows"].clone()
    t["flash_rows"][4] = -2
    save_file(t, os.path.join(d3, e2["tensors"]))
    one_ulp = by_name["right-pad"]  # one element moved by exactly 1 ulp must still pass
    t = load_file(os.path.join(d3, one_ulp["tensors"]))
    bits = t["eager_out"].view(torch.int16).clone()
    bits.view(-1)[5] += 1
    t["eager_out"] = bits.view(torch.bfloat16)
    save_file(t, os.path.join(d3, one_ulp["tensors"]))
    rc, failing, text = run_check(d3)
    want = {"left-pad", "packed-0-1-2-0-1"}
    report(f"corrupted export -> exit {rc} (want 1), differing {sorted(failing)} (want {sorted(want)})",
           rc == 1 and failing == want, text)

    # 3b: SDPA records that misstate transformers' call must differ (hand-written exports carry no SDPA records,
    # and a case without one is not compared)
    d3b = os.path.join(base, "sdpa-wrong")
    shutil.rmtree(d3b, ignore_errors=True)
    shutil.copytree(d1, d3b)
    with open(os.path.join(d3b, "manifest.json")) as f:
        m3 = json.load(f)
    for e in m3["cases"]:
        if e["name"] == "no-mask":  # 5.17.0 skips the mask and passes is_causal=True
            e["sdpa"] = {"branch": "call", "mask": True, "is_causal": False, "keys": e["case"]["q_len"], "gqa": "none",
                         "softcap_dropped": False}
        elif e["name"] == "softcap":  # 5.17.0 swallows the softcap and runs
            e["sdpa"] = {"branch": "error", "error": "`sdpa` attention does not support `softcap`"}
    with open(os.path.join(d3b, "manifest.json"), "w") as f:
        json.dump(m3, f, indent=1)
    rc, failing, text = run_check(d3b)
    want = {"no-mask", "softcap"}
    report(f"wrong SDPA records -> exit {rc} (want 1), differing {sorted(failing)} (want {sorted(want)})",
           rc == 1 and failing == want, text)

    # 3c: the same wrong records under a profile whose SDPA range leaves this release out: SDPA is not compared, so
    # the export agrees, and the summary says why
    d3c = os.path.join(base, "sdpa-out-of-range")
    shutil.rmtree(d3c, ignore_errors=True)
    shutil.copytree(d3b, d3c)
    m3["profile_sdpa_releases"] = ["0.0.1", "0.0.2"]
    with open(os.path.join(d3c, "manifest.json"), "w") as f:
        json.dump(m3, f, indent=1)
    rc, failing, text = run_check(d3c)
    report(f"wrong SDPA records outside the profile's SDPA range -> exit {rc} (want 0), differing {sorted(failing)} "
           "(want none), 'sdpa not compared' said", rc == 0 and not failing and "sdpa not compared" in text, text)

    # 4: bad input
    d4 = os.path.join(base, "bad-schema")
    shutil.rmtree(d4, ignore_errors=True)
    os.makedirs(d4)
    with open(os.path.join(d4, "manifest.json"), "w") as f:
        json.dump({"schema": "flashcheck.export/0", "cases": []}, f)
    rc_a, _, text_a = run_check(d4)
    d5 = os.path.join(base, "missing-tensors")
    shutil.rmtree(d5, ignore_errors=True)
    shutil.copytree(d1, d5)
    os.remove(os.path.join(d5, m["cases"][0]["tensors"]))
    rc_b, _, text_b = run_check(d5)
    rc_c, _, text_c = run_check(os.path.join(base, "no-such-dir"))
    report(f"bad input -> exits {rc_a}, {rc_b}, {rc_c} (want 2, 2, 2)", (rc_a, rc_b, rc_c) == (2, 2, 2),
           text_a + text_b + text_c)

    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    print(f"[selftest] {'all steps passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
