#!/usr/bin/env python3
"""tools/hf_crosscheck/crosscheck.py DIR [--verbose] [--only REGEX] [--show] [--sliding-cache model|full] —
cross-checks flashcheck's C++ emulation of Hugging Face transformers' attention (written by `flashcheck export
--out DIR`) against the real transformers 5.17.0 on CPU. run.sh (next to this file) sets it up; selftest.py tests it.

For every case of DIR/manifest.json (schema flashcheck.export/1), with the objects a model holds: a LlamaConfig
(sliding_window set when the case has one), the cache the layer finds (when use_cache or past > 0: a
DynamicCache holding the first P key/value columns, or a StaticCache of static_cache_len slots), and K/V as the
layer's own cache update returns them:
  eager  masking_utils.create_causal_mask (create_sliding_window_causal_mask with a sliding window) with
         _attn_implementation "eager", the case's attention_mask and position_ids (the first plane of 3D M-RoPE
         positions), then llama's eager_attention_forward (gemma2's, which caps the logits, for softcap cases) in
         eval mode, scaling = scale or head_dim**-0.5. Compared with `eager_out`: ok if every element is within
         1 ulp of the dtype (bitwise equality and the max ulp distance are reported).
  flash  the same mask builder with _attn_implementation "flash_attention_2" (masking_utils.flash_attention_mask;
         no flash-attn package needed), then integrations.flash_attention.flash_attention_forward (or
         modeling_flash_attention_utils._flash_attention_forward with the case's query_length when it differs
         from q_len, as a sequence-parallel patch calls it) with stand-in kernels installed in
         modeling_flash_attention_utils that record their call and return row markers. Compared with the C++
         `flash` record: branch, cu_seqlens_q/k, max_seqlen_q/k, causal, window_size, softcap, softmax_scale
         (within 4 double ulps) and `flash_rows` exactly; a transformers exception must meet branch "error" with
         a message contained in Python's "ExceptionType: message".
  sdpa   the same mask builder with _attn_implementation "sdpa" (masking_utils.sdpa_mask, which may skip the mask),
         then integrations.sdpa_attention.sdpa_attention_forward with the softcap kwarg a Gemma2 layer passes, with
         torch.nn.functional.scaled_dot_product_attention wrapped to record its call. Compared with the C++ `sdpa`
         record: whether a mask was passed, is_causal, the number of keys, how GQA reached SDPA (enable_gqa,
         repeat_kv, pack_gqa) exactly, and `sdpa_out` within 1 ulp (the C++ calls the same ATen op); a transformers
         exception must meet branch "error" with a message contained in it. Skipped for exports without `sdpa`.

--sliding-cache model builds sliding-window caches as Mistral/Gemma2 do (last W-1 past columns only).
A kernel call that would read outside its tensors (FlashAttention does not check) or that FlashAttention would
reject may be reported by the C++ as branch "error" with any message.
--show prints transformers' kernel call and flash rows for every case.
Exit status: 0 all cases agree, 1 some case differs, 2 bad input (missing files, wrong schema, tensors of the
wrong shape, transformers other than 5.17.0 unless --any-version).
"""
import argparse
import json
import math
import os
import re
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hf_live"))
import fa_kernels  # noqa: E402
import hfapi  # noqa: E402

SCHEMA = "flashcheck.export/1"
EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    pass


# ------------------------------------------------------------------------------------------------------------
# Input


def load_manifest(root):
    path = os.path.join(root, "manifest.json")
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: {e}")
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        raise BadInput(f"{path}: schema is {manifest.get('schema') if isinstance(manifest, dict) else None!r}, "
                       f"want {SCHEMA!r}")
    cases = manifest.get("cases")
    if not isinstance(cases, list):
        raise BadInput(f"{path}: 'cases' is not a list")
    for i, entry in enumerate(cases):
        where = f"{path}: cases[{i}]"
        if not isinstance(entry, dict):
            raise BadInput(f"{where} is not an object")
        for key in ("name", "case", "tensors", "flash"):
            if key not in entry:
                raise BadInput(f"{where} has no '{key}'")
        c = entry["case"]
        for key in ("dtype", "batch", "q_len", "heads", "kv_heads", "head_dim"):
            if key not in c:
                raise BadInput(f"{where} ({entry['name']}): case has no '{key}'")
        if c["dtype"] not in ("fp16", "bf16", "fp32"):
            raise BadInput(f"{where} ({entry['name']}): dtype {c['dtype']!r}")
        fl = entry["flash"]
        if not isinstance(fl, dict) or fl.get("branch") not in ("mask", "varlen_kwargs", "packed", "dense", "error"):
            raise BadInput(f"{where} ({entry['name']}): flash.branch is {fl.get('branch') if isinstance(fl, dict) else None!r}")
        if fl["branch"] == "error":
            if not isinstance(fl.get("error"), str):
                raise BadInput(f"{where} ({entry['name']}): flash.branch is error but flash.error is not a string")
        elif not isinstance(fl.get("call"), dict) or fl["call"].get("kind") not in ("varlen", "dense"):
            raise BadInput(f"{where} ({entry['name']}): flash.call missing or with a bad kind")
        tpath = os.path.join(root, entry["tensors"])
        if not os.path.isfile(tpath):
            raise BadInput(f"{where} ({entry['name']}): {tpath}: no such file")
    return cases


# ------------------------------------------------------------------------------------------------------------
# Helpers


def dtype_of(torch, name):
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[name]


def ordered_bits(torch, t):
    """Maps floats to integers whose differences are ulp distances (sign-magnitude -> two's complement)."""
    if t.dtype == torch.float32:
        bits, mag_mask = t.contiguous().view(torch.int32).to(torch.int64), 0x7FFFFFFF
    elif t.dtype in (torch.float16, torch.bfloat16):
        bits, mag_mask = t.contiguous().view(torch.int16).to(torch.int64), 0x7FFF
    else:
        raise ValueError(f"no ulp metric for {t.dtype}")
    mag = bits & mag_mask
    return torch.where(bits < 0, -mag, mag)


def ulp_compare(torch, got, want):
    """Returns (bitwise_equal, max_ulp, flat index of the max, got value, want value). NaN == NaN counts as equal;
    NaN against a number is an infinite distance."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False, math.inf, None, None, None
    if got.numel() == 0:
        return True, 0, None, None, None
    g, w = ordered_bits(torch, got).flatten(), ordered_bits(torch, want).flatten()
    bitwise = bool(torch.equal(g, w))
    dist = (g - w).abs().to(torch.float64)
    gn, wn = torch.isnan(got.float()).flatten(), torch.isnan(want.float()).flatten()
    dist = torch.where(gn & wn, torch.zeros_like(dist), dist)
    dist = torch.where(gn ^ wn, torch.full_like(dist, math.inf), dist)
    idx = int(torch.argmax(dist))
    return bitwise, float(dist[idx]), idx, float(got.flatten()[idx]), float(want.flatten()[idx])


def unravel(idx, shape):
    out = []
    for s in reversed(shape):
        out.append(idx % s)
        idx //= s
    return list(reversed(out))


def as_int(x):
    if x is None:
        return None
    if hasattr(x, "item"):
        return int(x.item())
    return int(x)


def as_int_list(x):
    if x is None:
        return None
    if hasattr(x, "tolist"):
        return [int(v) for v in x.reshape(-1).tolist()]
    return [int(v) for v in x]


def floats_close(a, b, ulps=4):
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if a == b:
        return True
    return abs(a - b) <= ulps * math.ulp(max(abs(a), abs(b)))


# ------------------------------------------------------------------------------------------------------------
# One case: shared set-up


class Case(hfapi.Case):
    """A case of the export with the C++ plan it must match (hfapi.Case reads the tensors)."""

    def __init__(self, torch, entry, root):
        try:
            super().__init__(torch, entry, root)
        except hfapi.BadInput as e:
            raise BadInput(str(e))
        self.flash_expect = entry["flash"]
        if self.eager_out is None or list(self.eager_out.shape) != [self.B, self.Lq, self.Hq, self.D]:
            raise BadInput(f"{self.name}: tensor 'eager_out' is missing or has the wrong shape")
        if self.static_len is not None and (bool(self.k[:, self.P + self.Lq:].any()) or
                                            bool(self.v[:, self.P + self.Lq:].any())):
            raise BadInput(f"{self.name}: the unfilled static-cache slots of k/v are not zeros")


# ------------------------------------------------------------------------------------------------------------
# Eager


def check_eager(torch, release, case, verbose):
    try:
        out, _ = release.run_eager(case)
    except hfapi.NotInRelease as e:
        return None, f"eager n/a ({e})", ""
    except Exception as e:  # noqa: BLE001
        detail = traceback.format_exc() if verbose else ""
        return False, f"eager: transformers raised {type(e).__name__}: {e}", detail
    bitwise, max_ulp, idx, got, want = ulp_compare(torch, case.eager_out, out)
    if bitwise:
        return True, "eager ok (bitwise)", ""
    if max_ulp <= 1:
        return True, "eager ok (max 1 ulp)", ""
    detail = ""
    if idx is not None:
        b, i, h, d = unravel(idx, list(out.shape))
        detail = (f"    eager: largest difference at [b={b}, i={i}, h={h}, d={d}]: C++ {got!r}, transformers {want!r}\n"
                  f"    eager: {int((ordered_bits(torch, case.eager_out) != ordered_bits(torch, out)).sum())} of "
                  f"{out.numel()} elements differ")
        # the first differing element in row-major order as well
        diff = (ordered_bits(torch, case.eager_out) - ordered_bits(torch, out)).abs().flatten()
        first = int(torch.nonzero(diff > 1)[0]) if bool((diff > 1).any()) else None
        if first is not None:
            fb, fi, fh, fd = unravel(first, list(out.shape))
            detail += (f"\n    eager: first element beyond 1 ulp [b={fb}, i={fi}, h={fh}, d={fd}]: "
                       f"C++ {float(case.eager_out.flatten()[first])!r}, transformers {float(out.flatten()[first])!r}")
    what = "shape/dtype differ" if idx is None else f"max {max_ulp:g} ulp"
    return False, f"eager MISMATCH ({what})", detail


# ------------------------------------------------------------------------------------------------------------
# Flash dispatch with stand-in kernels

_UNSET = object()


class KernelFault(Exception):
    """A stand-in kernel rejects its inputs, as FlashAttention's own shape checks would."""


def kernel_fault(call):
    """Why a recorded varlen call would read outside its tensors (FlashAttention does not check: on a GPU that
    is an illegal memory access or garbage), or None."""
    if call["kind"] != "varlen":
        return None
    cu_q, cu_k = call["cu_seqlens_q"], call["cu_seqlens_k"]
    if len(cu_q) < 2:
        return "batch size must be postive (cu_seqlens has a single entry: FlashAttention's own check)"
    if len(cu_q) != len(cu_k):
        return f"cu_seqlens_q has {len(cu_q)} entries and cu_seqlens_k {len(cu_k)}"
    if min(cu_q[0], cu_k[0]) < 0 or any(b < a for a, b in zip(cu_q, cu_q[1:])) or \
            any(b < a for a, b in zip(cu_k, cu_k[1:])):
        return "cu_seqlens are negative or decrease"
    if cu_q[-1] > call["q_rows"] or cu_k[-1] > call["k_rows"]:
        return (f"cu_seqlens reach query row {cu_q[-1]} and key row {cu_k[-1]}, but the call has "
                f"{call['q_rows']} query and {call['k_rows']} key rows")
    return None


class Recorder:
    """Collects the stand-in kernels' calls (module-level functions below, named like flash-attn's so that a
    TypeError from a bad call reads as the real one would)."""

    active = None

    def __init__(self, torch):
        self.torch = torch
        self.calls = []


def _unset_window(w):
    return _UNSET if w is None or [int(x) for x in w] == [-1, -1] else w


def _unset_softcap(c):
    return _UNSET if c is None or not c else c


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                           causal=False, window_size=None, softcap=None):
    """Stand-in with flash-attn 2's signature: records the call; output row r holds r + 1 for the rows of
    [cu_seqlens_q[0], cu_seqlens_q[-1]) and -1 elsewhere (real FlashAttention leaves those rows unwritten)."""
    rec = Recorder.active
    torch = rec.torch
    window_size, softcap = _unset_window(window_size), _unset_softcap(softcap)
    if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise KernelFault(f"flash_attn_varlen_func: q, k, v must be (total, heads, head_dim), got q {list(q.shape)}, "
                          f"k {list(k.shape)}, v {list(v.shape)}")
    cu_q, cu_k = as_int_list(cu_seqlens_q), as_int_list(cu_seqlens_k)
    rec.calls.append({
        "kind": "varlen", "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k,
        "max_seqlen_q": as_int(max_seqlen_q), "max_seqlen_k": as_int(max_seqlen_k), "causal": bool(causal),
        "window_size": None if window_size is _UNSET else [int(x) for x in window_size],
        "softcap": None if softcap is _UNSET else softcap, "softmax_scale": softmax_scale,
        "q_rows": int(q.shape[0]), "k_rows": int(k.shape[0])})
    n = q.shape[0]
    out = torch.full((n, q.shape[1], q.shape[2]), -1.0, dtype=torch.float32)
    lo, hi = max(cu_q[0], 0), min(cu_q[-1], n)
    if hi > lo:
        out[lo:hi] = (torch.arange(lo, hi, dtype=torch.float32) + 1)[:, None, None]
    return out


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, window_size=None, softcap=None):
    """Stand-in with flash-attn 2's signature: records the call; out[b, i] = b * Lq + i + 1."""
    rec = Recorder.active
    torch = rec.torch
    window_size, softcap = _unset_window(window_size), _unset_softcap(softcap)
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise KernelFault(f"flash_attn_func: q, k, v must be (batch, seqlen, heads, head_dim), got q {list(q.shape)}, "
                          f"k {list(k.shape)}, v {list(v.shape)}")
    rec.calls.append({
        "kind": "dense", "causal": bool(causal),
        "window_size": None if window_size is _UNSET else [int(x) for x in window_size],
        "softcap": None if softcap is _UNSET else softcap, "softmax_scale": softmax_scale})
    B, L = q.shape[0], q.shape[1]
    marks = torch.arange(B * L, dtype=torch.float32).reshape(B, L) + 1
    return marks[:, :, None, None].expand(B, L, q.shape[2], q.shape[3]).contiguous()


def install_standins(torch, rec):
    """The recorders receive every call the release makes to flash-attn (fa_kernels' package routes them here)."""
    Recorder.active = rec
    fa_kernels.HOOKS["varlen"] = flash_attn_varlen_func
    fa_kernels.HOOKS["dense"] = flash_attn_func


def decode_rows(torch, out):
    """Final flash output -> origin of each row (see the module docstring of the export format)."""
    flat = out.reshape(-1, out.shape[-2], out.shape[-1]).float()
    col = flat[:, 0, 0]
    if not bool((flat == col[:, None, None]).all()):
        raise RuntimeError("stand-in markers are not constant across heads/dims (the dispatch mixed rows)")
    rows = []
    for x in col.tolist():
        if x >= 1:
            rows.append(int(round(x)) - 1)
        elif x == 0:
            rows.append(-1)
        elif x == -1:
            rows.append(-2)
        else:
            raise RuntimeError(f"unexpected marker {x}")
    return rows


def run_flash(torch, release, case):
    """Returns ('ok', branch, call, rows, fault or None), ('error', message, traceback) when transformers
    raises, or ('fault', message, traceback) when a stand-in kernel rejects its inputs."""
    rec = Recorder(torch)
    install_standins(torch, rec)
    try:
        out = release.run_flash(case)
    except KernelFault as e:
        return ("fault", str(e), traceback.format_exc())
    except Exception as e:  # noqa: BLE001
        return ("error", f"{type(e).__name__}: {e}", traceback.format_exc())
    mask, kw = release.last_flash_mask, release.last_flash_kwargs or {}
    vk = {k: kw.get(k) for k in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")}
    if len(rec.calls) != 1:
        return ("error", f"harness: {len(rec.calls)} kernel calls recorded", "")
    call = rec.calls[0]
    if call["kind"] == "dense":
        branch = "dense"
    elif mask is not None:
        branch = "mask"
    elif all(v is not None for v in vk.values()):
        branch = "varlen_kwargs"
    else:
        branch = "packed"
    try:
        rows = decode_rows(torch, out)
    except Exception as e:  # noqa: BLE001
        return ("error", f"harness: cannot decode the flash output {list(out.shape)}: {e}", traceback.format_exc())
    return ("ok", branch, call, rows, kernel_fault(call))


def first_list_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    return min(len(a), len(b)), None, None


def check_flash(torch, release, case, verbose, show=False):
    exp = case.flash_expect
    res = run_flash(torch, release, case)
    if show:
        if res[0] in ("error", "fault"):
            print(f"    transformers: {res[0]} {res[1]!r}")
        else:
            print(f"    transformers: branch {res[1]}, call {json.dumps(res[2])}\n    transformers: flash_rows {res[3]}"
                  + (f"\n    transformers: kernel fault: {res[4]}" if res[4] else ""))
    if res[0] == "fault":
        # transformers made a call that FlashAttention itself rejects: the C++ must report an error (any message)
        if exp["branch"] == "error":
            return True, "flash ok (error: the kernel rejects the call)", ""
        return False, f"flash MISMATCH (C++ branch {exp['branch']}, the kernel rejects transformers' call)", (
            f"    flash: {res[1]}")
    if res[0] == "error":
        _, msg, tb = res
        if exp["branch"] != "error":
            return False, f"flash MISMATCH (C++ branch {exp['branch']}, transformers raised {msg})", (
                tb.rstrip() if verbose else "")
        want = exp.get("error", "")
        if want and (want == msg or want in msg):
            return True, "flash ok (error)", ""
        return False, "flash MISMATCH (error message)", f"    flash: C++ error {want!r}\n    flash: transformers {msg!r}"
    _, branch, call, rows, fault = res
    if exp["branch"] == "error" and fault:
        # FlashAttention does not check bounds: the C++ may report the call as the fault it is
        return True, "flash ok (error: the call reads outside its tensors)", ""
    if exp["branch"] == "error":
        return False, f"flash MISMATCH (C++ error, transformers ran branch {branch})", (
            f"    flash: C++ error {exp.get('error')!r}\n    flash: transformers call {json.dumps(call)}")
    diffs, details = [], []
    if exp["branch"] != branch:
        diffs.append("branch")
        details.append(f"    flash: branch C++ {exp['branch']!r}, transformers {branch!r}")
    ec = exp.get("call") or {}
    if ec.get("kind") != call["kind"]:
        diffs.append("kind")
        details.append(f"    flash: call.kind C++ {ec.get('kind')!r}, transformers {call['kind']!r}")
    if call["kind"] == "varlen" and ec.get("kind") == "varlen":
        for key in ("cu_seqlens_q", "cu_seqlens_k"):
            got = [int(x) for x in ec.get(key) or []] if ec.get(key) is not None else None
            if got != call[key]:
                diffs.append(key)
                details.append(f"    flash: {key} C++ {got}, transformers {call[key]}")
        for key in ("max_seqlen_q", "max_seqlen_k"):
            got = as_int(ec.get(key)) if ec.get(key) is not None else None
            if got != call[key]:
                diffs.append(key)
                details.append(f"    flash: {key} C++ {got}, transformers {call[key]}")
    if bool(ec.get("causal")) != call["causal"]:
        diffs.append("causal")
        details.append(f"    flash: causal C++ {ec.get('causal')}, transformers {call['causal']}")
    ews = ec.get("window_size")
    ews = [int(x) for x in ews] if ews is not None else None
    if ews != call["window_size"]:
        diffs.append("window_size")
        details.append(f"    flash: window_size C++ {ews}, transformers {call['window_size']}")
    if not floats_close(ec.get("softcap"), call["softcap"]):
        diffs.append("softcap")
        details.append(f"    flash: softcap C++ {ec.get('softcap')!r}, transformers {call['softcap']!r}")
    if not floats_close(ec.get("softmax_scale"), call["softmax_scale"]):
        diffs.append("softmax_scale")
        details.append(f"    flash: softmax_scale C++ {ec.get('softmax_scale')!r}, transformers {call['softmax_scale']!r}")
    if "flash_rows" not in case.t:
        diffs.append("flash_rows")
        details.append("    flash: the tensors file has no 'flash_rows'")
    else:
        want_rows = [int(x) for x in case.t["flash_rows"].reshape(-1).tolist()]
        if want_rows != rows:
            diffs.append("flash_rows")
            i, x, y = first_list_diff(want_rows, rows)
            if x is None:
                details.append(f"    flash: flash_rows length C++ {len(want_rows)}, transformers {len(rows)}")
            else:
                details.append(f"    flash: flash_rows first difference at row {i}: C++ {x}, transformers {y}")
            details.append(f"    flash: flash_rows C++          {want_rows}\n    flash: flash_rows transformers {rows}")
    if diffs:
        shown = {k: v for k, v in call.items() if k not in ("q_rows", "k_rows")}
        details.append(f"    flash: C++ call          {json.dumps(ec)}\n    flash: transformers call {json.dumps(shown)}")
        return False, f"flash MISMATCH ({branch}: {', '.join(diffs)})", "\n".join(details)
    return True, f"flash ok ({branch})", ""


# ------------------------------------------------------------------------------------------------------------
# SDPA: the real sdpa_attention_forward, its call to torch's SDPA recorded


class SdpaRecorder:
    """Wraps torch.nn.functional.scaled_dot_product_attention (sdpa_attention_forward looks it up at call time):
    records each call's mask, is_causal, key length, enable_gqa and head counts, then runs the real op."""

    def __init__(self, torch):
        self.torch = torch
        self.real = torch.nn.functional.scaled_dot_product_attention
        self.calls = []

    def __enter__(self):
        real, calls = self.real, self.calls

        def recording(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
                      **kw):
            calls.append({"mask": attn_mask is not None, "is_causal": bool(is_causal), "keys": int(key.shape[-2]),
                          "enable_gqa": bool(enable_gqa), "q_heads": int(query.shape[1]), "k_heads": int(key.shape[1]),
                          "q_rows": int(query.shape[2])})
            return real(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                        enable_gqa=enable_gqa, **kw)

        self.torch.nn.functional.scaled_dot_product_attention = recording
        return self

    def __exit__(self, *exc):
        self.torch.nn.functional.scaled_dot_product_attention = self.real
        return False


def sdpa_gqa_kind(case, call):
    """How GQA reached SDPA in a recorded call, named as the C++ plan names it."""
    if case.Hq == case.Hkv:
        return "none"
    if call["enable_gqa"]:
        return "enable_gqa"
    if call["q_heads"] == case.Hkv and call["q_rows"] == case.Hq // case.Hkv:
        return "pack_gqa"
    return "repeat_kv" if call["k_heads"] == case.Hq else f"unknown (q heads {call['q_heads']}, k heads {call['k_heads']})"


def check_sdpa(torch, release, case, verbose):
    exp = case.entry.get("sdpa")
    if exp is None:
        return True, "sdpa n/a (export without sdpa)", ""
    try:
        with SdpaRecorder(torch) as rec:
            out = release.run_sdpa(case)
    except hfapi.NotInRelease as e:
        return True, f"sdpa n/a ({e})", ""
    except hfapi.ApiBreak as e:
        return False, f"sdpa: the harness cannot drive this release ({e})", ""
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {e}"
        if exp.get("branch") == "error" and exp.get("error") and exp["error"] in msg:
            return True, "sdpa ok (error)", ""
        detail = traceback.format_exc().rstrip() if verbose else f"    sdpa: C++ {json.dumps(exp)}"
        return False, f"sdpa MISMATCH (transformers raised {msg})", detail
    if exp.get("branch") == "error":
        return False, "sdpa MISMATCH (C++ error, transformers ran)", f"    sdpa: C++ error {exp.get('error')!r}"
    if len(rec.calls) != 1:
        return False, f"sdpa MISMATCH ({len(rec.calls)} SDPA calls recorded)", ""
    call = rec.calls[0]
    got = {"mask": call["mask"], "is_causal": call["is_causal"], "keys": call["keys"], "gqa": sdpa_gqa_kind(case, call)}
    diffs = [k for k in got if exp.get(k) != got[k]]
    details = [f"    sdpa: {k} C++ {exp.get(k)!r}, transformers {got[k]!r}" for k in diffs]
    want = case.t.get("sdpa_out")
    if want is None:
        diffs.append("sdpa_out")
        details.append("    sdpa: the tensors file has no 'sdpa_out'")
    else:
        out = out.to(want.dtype).contiguous()
        # Rows that see no key are NaN or 0 depending on the CPU kernel; neither path compares them.
        bitwise, max_ulp, idx, g, w = ulp_compare(torch, want, out)
        if not bitwise and max_ulp > 1:
            diffs.append("sdpa_out")
            where = "" if idx is None else f" at {unravel(idx, list(out.shape))}: C++ {g!r}, transformers {w!r}"
            details.append(f"    sdpa: sdpa_out max {max_ulp:g} ulp{where}")
    if diffs:
        return False, f"sdpa MISMATCH ({', '.join(diffs)})", "\n".join(details)
    how = "mask" if call["mask"] else ("is_causal" if call["is_causal"] else "no mask")
    return True, f"sdpa ok ({how}{'' if bitwise else ', 1 ulp'})", ""


# ------------------------------------------------------------------------------------------------------------


def manifest_releases(root, key="profile_releases"):
    """The export profile's [first, last] release (key "profile_sdpa_releases": those whose SDPA path it models), or
    None (an export without one, or a profile of no release)."""
    try:
        with open(os.path.join(root, "manifest.json")) as f:
            r = json.load(f).get(key)
    except (OSError, ValueError):
        return None
    return r if isinstance(r, list) and len(r) == 2 and all(r) else None


def version_in(v, rng):
    def parts(x):
        out = []
        for p in str(x).split("."):
            m = re.match(r"\d+", p)
            if not m:
                break
            out.append(int(m.group()))
        return out

    return parts(rng[0]) <= parts(v) <= parts(rng[1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="directory written by `flashcheck export --out DIR`")
    ap.add_argument("--verbose", "-v", action="store_true", help="details of every mismatch")
    ap.add_argument("--only", metavar="REGEX", help="only cases whose name matches REGEX")
    ap.add_argument("--sliding-cache", choices=("full", "model"), default="full",
                    help="dynamic cache of sliding-window cases: 'full' (default) a DynamicCache holding the whole "
                         "history, as the export's K/V are; 'model' DynamicCache(config=config) as Mistral/Gemma2 "
                         "build it, which keeps only the last W-1 past columns (K/V, mask length, window test)")
    ap.add_argument("--show", action="store_true", help="print transformers' kernel call and flash rows for every case")
    ap.add_argument("--quiet", "-q", action="store_true",
                    help="print only the cases that differ (with details) and the summary")
    ap.add_argument("--no-sdpa", dest="sdpa", action="store_false",
                    help="compare eager and the flash dispatch only (not the SDPA path)")
    ap.add_argument("--any-version", action="store_true",
                    help="run even if the installed transformers is outside the release range of the export's profile")
    args = ap.parse_args(argv)

    try:
        cases = load_manifest(args.dir)
    except BadInput as e:
        print(f"hf_crosscheck: bad input: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        import torch

        fa_kernels.install("reference")
        release = hfapi.Release(flash=True)
        release.sliding_cache = args.sliding_cache
        transformers = release.transformers
    except ImportError as e:
        print(f"hf_crosscheck: {e} (tools/hf_live/install_release.sh VERSION installs a release; run.sh uses it)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    rng = manifest_releases(args.dir)
    if rng and not args.any_version and not version_in(transformers.__version__, rng):
        print(f"hf_crosscheck: transformers is {transformers.__version__}, the export's profile models {rng[0]} - {rng[1]}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    transformers.logging.set_verbosity_error()
    # A profile's SDPA switches model part of its range (SDPA changed inside it); elsewhere only eager and flash hold.
    sdpa_rng = manifest_releases(args.dir, "profile_sdpa_releases")
    sdpa_skipped = ""
    if args.sdpa and sdpa_rng and not args.any_version and not version_in(transformers.__version__, sdpa_rng):
        args.sdpa = False
        sdpa_skipped = f"; sdpa not compared (the profile models SDPA on {sdpa_rng[0]} - {sdpa_rng[1]})"

    n_ok = n_bad = n_input = n_na = 0
    eager_fail = flash_fail = sdpa_fail = 0
    branches, sdpa_kinds = {}, {}
    for entry in cases:
        name = entry["name"]
        if args.only and not re.search(args.only, name):
            continue
        try:
            case = Case(torch, entry, args.dir)
        except BadInput as e:
            print(f"BAD   {name}: {e}")
            n_input += 1
            continue
        e_ok, e_msg, e_detail = check_eager(torch, release, case, args.verbose)
        f_ok, f_msg, f_detail = check_flash(torch, release, case, args.verbose, args.show)
        s_ok, s_msg, s_detail = check_sdpa(torch, release, case, args.verbose) if args.sdpa else (True, "", "")
        if e_ok is None:  # the release has no such eager layer: only the flash plan is compared
            n_na += 1
            e_ok = True
        status = "ok  " if e_ok and f_ok and s_ok else "FAIL"
        m = re.search(r"\((\w+)", f_msg)
        branch = m.group(1) if m else "?"
        branches[branch] = branches.get(branch, 0) + 1
        if s_msg:
            sdpa_kinds[s_msg] = sdpa_kinds.get(s_msg, 0) + 1 if s_ok else sdpa_kinds.get(s_msg, 0)
        if not args.quiet or status == "FAIL":
            print(f"{status}  {name}: {e_msg}; {f_msg}" + (f"; {s_msg}" if s_msg else ""))
        if args.verbose or (args.quiet and status == "FAIL"):
            for d in (e_detail, f_detail, s_detail):
                if d:
                    print(d)
        sdpa_fail += not s_ok
        if e_ok and f_ok and s_ok:
            n_ok += 1
        else:
            n_bad += 1
        eager_fail += not e_ok
        flash_fail += not f_ok
    total = n_ok + n_bad + n_input
    sdpa_summary = ""
    if args.sdpa:
        sdpa_summary = f"; sdpa agrees on {sum(sdpa_kinds.values())} (" + ", ".join(
            f"{k.removeprefix('sdpa ')} {v}" for k, v in sorted(sdpa_kinds.items()) if v) + ")"
    print(f"hf_crosscheck: {total} cases, {n_ok} agree, {n_bad} differ (eager {eager_fail}, flash {flash_fail}, "
          f"sdpa {sdpa_fail}), {n_input} bad input, {n_na} without eager in this release; flash branches " +
          ", ".join(f"{k} {v}" for k, v in sorted(branches.items())) + sdpa_summary + sdpa_skipped +
          f"; transformers {transformers.__version__}, torch {torch.__version__}")
    if n_input:
        return EXIT_BAD_INPUT
    return EXIT_MISMATCH if n_bad else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
