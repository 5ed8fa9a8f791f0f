"""The engine's fp64 attention reference and tolerance rule on torch tensors.

A kernel author replaces a copied ``attention_ref`` and its hand-written tolerance with::

    ref = flashcheck.attention_ref(q, k, v, causal=True)               # fp64 truth (and the dtype baseline)
    flashcheck.assert_close(out, q, k, v, causal=True, lse=lse)         # flash-attn's rule, with its evidence
    flashcheck.assert_gradients_close((dq, dk, dv), q, k, v, dout, causal=True)

Layouts are flash-attn's: dense ``(batch, seqlen, heads, dim)``, or packed ``(total, heads, dim)`` with
``cu_seqlens_q``/``cu_seqlens_k`` (int32, batch + 1 offsets). ``causal`` aligns the diagonal bottom-right as
flash-attn >= 2.1 does (``top_left=True``: SDPA's ``is_causal``); ``window_size=(left, right)`` with -1 unbounded;
``softcap`` as ``cap * tanh(s / cap)``; GQA when K/V have fewer heads. The arithmetic is the C++ reference's
(reference/host/attention.h, exact_row.h), the rule is core/compare.h's (docs/TOLERANCE.md): the same code that
judges every kernel in the harness.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence

from . import _native

_DTYPES = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}


class ToleranceError(AssertionError):
    """A comparison under the tolerance rule failed; ``verdict`` holds the evidence."""

    def __init__(self, verdict: "Verdict"):
        super().__init__(verdict.line)
        self.verdict = verdict


@dataclass
class Verdict:
    """One judgement under the rule: ``line`` is the harness's one-line description (both errors, their ratio, the
    bound and the worst element with its output, truth and baseline); ``details`` the full JSON verdict."""
    passed: bool
    line: str
    details: dict
    parts: Optional[dict] = None  # gradients: "dq", "dk", "dv" -> Verdict

    @staticmethod
    def of(d: dict) -> "Verdict":
        parts = {k: Verdict.of(v) for k, v in d["gradients"].items()} if "gradients" in d else None
        return Verdict(bool(d["passed"]), d["line"], json.loads(d["json"]), parts)

    @property
    def ratio(self) -> float:
        """max error over the baseline's max error (the JSON writes NaN and infinities as strings)."""
        return float((self.details.get("comparison") or {}).get("ratio", 0.0))

    def __bool__(self) -> bool:
        return self.passed


@dataclass
class Reference:
    """fp64 results in the inputs' layout (float64 tensors on the inputs' device): ``out``, ``lse`` (flash-attn's
    ``softmax_lse``: ``(batch, heads, seqlen_q)`` dense, ``(heads, total_q)`` packed; -inf on rows without keys), and
    with ``dout`` the gradients; ``baseline_*`` the low-precision baseline the rule scales from (the dtype's naive
    attention, flash-attn's ``out_pt``/``dq_pt``)."""
    out: "torch.Tensor"
    lse: "torch.Tensor"
    baseline_out: "torch.Tensor"
    dq: Optional["torch.Tensor"] = None
    dk: Optional["torch.Tensor"] = None
    dv: Optional["torch.Tensor"] = None
    baseline_dq: Optional["torch.Tensor"] = None
    baseline_dk: Optional["torch.Tensor"] = None
    baseline_dv: Optional["torch.Tensor"] = None


class _Case:
    """A case of the engine (the fixture format's case, fixtures/README.md) for tensors in flash-attn's layouts."""

    def __init__(self, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, causal, top_left, window_size, softcap,
                 softmax_scale, backward):
        import torch
        if q.dtype != k.dtype or q.dtype != v.dtype:
            raise ValueError(f"q, k and v must share a dtype: {q.dtype}, {k.dtype}, {v.dtype}")
        dtype = _DTYPES.get(str(q.dtype))
        if dtype is None:
            raise ValueError(f"dtype {q.dtype}: the reference takes float16, bfloat16 or float32 inputs")
        self.dense = cu_seqlens_q is None
        if self.dense:
            if cu_seqlens_k is not None or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
                raise ValueError("dense inputs are (batch, seqlen, heads, dim) without cu_seqlens; packed inputs are "
                                 "(total, heads, dim) with cu_seqlens_q and cu_seqlens_k")
            self.batch, self.lq, lk = q.shape[0], q.shape[1], k.shape[1]
            lens = [(self.lq, lk)] * self.batch
            flat = lambda t: t.reshape(t.shape[0] * t.shape[1], t.shape[2], t.shape[3])
            q, k, v = flat(q), flat(k), flat(v)
        else:
            if cu_seqlens_k is None or q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
                raise ValueError("packed inputs are (total, heads, dim) with both cu_seqlens_q and cu_seqlens_k")
            cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
            if len(cq) != len(ck) or len(cq) < 2:
                raise ValueError(f"cu_seqlens_q has {len(cq)} offsets and cu_seqlens_k {len(ck)}: both need batch + 1")
            if cq[0] != 0 or ck[0] != 0 or cq[-1] != q.shape[0] or ck[-1] != k.shape[0]:
                raise ValueError("cu_seqlens must start at 0 and end at the packed tensors' row counts "
                                 f"({q.shape[0]} query rows, {k.shape[0]} key rows)")
            lens = [(cq[i + 1] - cq[i], ck[i + 1] - ck[i]) for i in range(len(cq) - 1)]
        seqs = [{"q_len": int(a), "k_len": int(b)} for a, b in lens]
        if seqused_k is not None:
            for s, used in zip(seqs, seqused_k.tolist()):
                s["seqused_k"] = int(used)
        left, right = (int(x) for x in window_size)
        self.case = {"name": "python", "dtype": dtype, "heads": q.shape[1], "kv_heads": k.shape[1],
                     "head_dim": q.shape[2], "v_head_dim": v.shape[2], "causal": bool(causal),
                     "alignment": "top_left" if top_left else "bottom_right", "window": [left, right],
                     "softcap": float(softcap), "scale": softmax_scale, "layout": "varlen", "seqs": seqs}
        if backward:
            self.case["dout"] = {"dist": "normal", "scale": 1.0}
        self.json = json.dumps(self.case)
        self.device = q.device
        self.q, self.k, self.v = (_floats(t) for t in (q, k, v))

    def packed(self, t):
        """A tensor in the output's layout, packed as the engine takes it."""
        if t is None:
            return None
        return t.reshape(-1, t.shape[-2], t.shape[-1]) if self.dense else t

    def unpacked(self, a, like):
        import torch
        return torch.from_numpy(a).reshape(like.shape).to(self.device)

    def lse(self, a):
        import torch
        t = torch.from_numpy(a)  # (total_q, heads)
        if self.dense:
            return t.reshape(self.batch, self.lq, -1).permute(0, 2, 1).contiguous().to(self.device)
        return t.transpose(0, 1).contiguous().to(self.device)

    def lse_rows(self, lse):
        """flash-attn's softmax_lse back to the engine's (total_q, heads) rows."""
        if lse is None:
            return None
        if self.dense:
            return _doubles(lse.permute(0, 2, 1).reshape(-1, lse.shape[1]))
        return _doubles(lse.transpose(0, 1))


def _floats(t):
    return t.detach().to("cpu").float().contiguous().numpy()


def _doubles(t):
    return t.detach().to("cpu").double().contiguous().numpy()


def attention_ref(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None, causal=False, top_left=False,
                  window_size: Sequence[int] = (-1, -1), softcap=0.0, softmax_scale=None, dout=None,
                  empty_row="zero") -> Reference:
    """Exact attention in fp64 (and, with ``dout``, its gradients) of the inputs' values, plus the low-precision
    baseline. ``empty_row`` is what a row that sees no key holds: "zero" (flash-attn), "nan" or "uniform"."""
    c = _Case(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, causal, top_left, window_size, softcap,
              softmax_scale, dout is not None)
    r = _native.reference(c.json, c.q, c.k, c.v, None if dout is None else _floats(c.packed(dout)), empty_row)
    out_like = q.new_empty(q.shape[:-1] + (v.shape[-1],), device="meta")
    ref = Reference(out=c.unpacked(r["out"], out_like), lse=c.lse(r["lse"]),
                    baseline_out=c.unpacked(r["baseline_out"], out_like))
    if dout is not None:
        for name, like in (("dq", q), ("dk", k), ("dv", v)):
            setattr(ref, name, c.unpacked(r[name], like))
            setattr(ref, "baseline_" + name, c.unpacked(r["baseline_" + name], like))
    return ref


def judge(out, q, k, v, *, lse=None, cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None, causal=False,
          top_left=False, window_size: Sequence[int] = (-1, -1), softcap=0.0, softmax_scale=None,
          empty_row="zero") -> Verdict:
    """The conformance verdict of a kernel's output (and LSE, flash-attn's softmax_lse layout) for these inputs:
    ``max|out - truth| <= k * max|baseline - truth| + floor`` with the mean and LSE checks; NaN fails."""
    c = _Case(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, causal, top_left, window_size, softcap,
              softmax_scale, False)
    return Verdict.of(_native.judge(c.json, c.q, c.k, c.v, _doubles(c.packed(out)), c.lse_rows(lse), empty_row))


def judge_gradients(grads, q, k, v, dout, *, cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None, causal=False,
                    top_left=False, window_size: Sequence[int] = (-1, -1), softcap=0.0, softmax_scale=None,
                    zero_unused_keys=False) -> Verdict:
    """The grad-conformance verdict of ``grads = (dq, dk, dv)`` for upstream gradient ``dout``; ``parts`` holds the
    verdict of each gradient."""
    dq, dk, dv = grads
    c = _Case(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, causal, top_left, window_size, softcap,
              softmax_scale, True)
    return Verdict.of(_native.judge_gradients(c.json, c.q, c.k, c.v, _floats(c.packed(dout)),
                                              _doubles(c.packed(dq)), _doubles(c.packed(dk)), _doubles(c.packed(dv)),
                                              zero_unused_keys))


def assert_close(out, q, k, v, **kwargs) -> Verdict:
    """``judge``, raising ToleranceError (an AssertionError) with the verdict line when the output fails the rule."""
    verdict = judge(out, q, k, v, **kwargs)
    if not verdict.passed:
        raise ToleranceError(verdict)
    return verdict


def assert_gradients_close(grads, q, k, v, dout, **kwargs) -> Verdict:
    """``judge_gradients``, raising ToleranceError when a gradient fails the rule."""
    verdict = judge_gradients(grads, q, k, v, dout, **kwargs)
    if not verdict.passed:
        raise ToleranceError(verdict)
    return verdict
