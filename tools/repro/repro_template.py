#!/usr/bin/env python3
# @@HEADER@@
#
# Needs only torch (and the kernel's own package, if it has one). The case's tensors are in the safetensors file
# beside this script, read here without the safetensors package. The kernel is called exactly as flashcheck's
# adapter calls it; its output (and LSE, and gradients for a backward case) is compared with an fp64 reference
# computed here in torch, under flash-attention's test rule:
#
#   max |kernel - ref64| <= 2 * max |baseline - ref64| + floor
#
# where the baseline is the same reference computed in the input dtype (flash-attention's attention_ref with
# upcast=False) and floor = 1e-6 * max |ref64| (so that an exact baseline does not demand an exact kernel). Only
# defined memory is compared: the sequences' rows (slack rows past the last sequence are the kernel's to leave), and
# the keys each sequence uses. A NaN or inf where the reference is finite always fails.
#
# Exit status: 1 when the bug reproduces (the check fails, or the kernel raises), 0 when it does not, 2 when this
# machine cannot run the case (no CUDA device, the package missing). A crash of this process is the bug as well.
# `--markdown` prints the environment and the observed values as Markdown, for the issue body (ISSUE.md).
import argparse
import json
import math
import os
import platform
import struct
import subprocess
import sys

try:
    import torch
except ImportError:
    print("this script needs torch, which this Python (%s) cannot import" % sys.executable)
    sys.exit(2)

SPEC = json.loads(r'''@@SPEC@@''')
HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
DTYPE = DTYPES[SPEC["dtype"]]
SCALE = SPEC["scale"]
SOFTCAP = SPEC["flash_args"]["softcap"]
LEFT, RIGHT = SPEC["mask_left"], SPEC["mask_right"]  # the window with causal folded in (right 0); -1: unbounded


def load_safetensors(path):
    """The tensors of a safetensors file: an 8-byte little-endian header length, a JSON header, the raw bytes."""
    kinds = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
             "I32": torch.int32, "I64": torch.int64}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        raw = bytearray(body[begin:end])
        flat = torch.frombuffer(raw, dtype=kinds[t["dtype"]]) if raw else torch.empty(0, dtype=kinds[t["dtype"]])
        out[name] = flat.reshape(t["shape"]).clone()
    return out


def environment():
    env = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
           "cuda (torch built with)": torch.version.cuda}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["compute capability"] = "%d.%d" % torch.cuda.get_device_capability()
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            env["driver"] = "unknown (no nvidia-smi)"
        if torch.backends.cudnn.is_available():
            env["cudnn"] = str(torch.backends.cudnn.version())
    for package in SPEC.get("packages", []):
        try:
            env[package] = __import__(package).__version__
        except Exception as e:  # noqa: BLE001 - any failure to import is reported as such
            env[package] = "not importable (%s)" % type(e).__name__
    return env


def device():
    """Where the case runs; exits 2 when this machine cannot run it (no CUDA device, the kernel's package missing)."""
    import importlib.util
    if SPEC["device"] == "cuda" and not torch.cuda.is_available():
        print("this case needs a CUDA device (the kernel %s runs on one); none is available" % SPEC["kernel"])
        sys.exit(2)
    for package in SPEC["packages"]:
        if importlib.util.find_spec(package) is None:
            print("this case needs the package %s (the kernel %s imports it), which this Python cannot import"
                  % (package, SPEC["kernel"]))
            sys.exit(2)
    return torch.device(SPEC["device"])


# ---- the fp64 reference and the dtype baseline -------------------------------------------------------------------

def visible(lq, lk, dev):
    """(lq, lk) bool: query i sees key j. The diagonal sits at lk - lq (bottom-right) or 0 (top-left)."""
    off = lk - lq if SPEC["alignment"] == "bottom_right" else 0
    i = torch.arange(lq, device=dev).unsqueeze(1)
    j = torch.arange(lk, device=dev).unsqueeze(0)
    ok = torch.ones(lq, lk, dtype=torch.bool, device=dev)
    if RIGHT >= 0:
        ok &= j <= i + off + RIGHT
    if LEFT >= 0:
        ok &= j >= i + off - LEFT
    return ok


def attention_ref(q, k, v, upcast):
    """One sequence: q (lq, H, d), k (lk, Hk, d), v (lk, Hk, dv) -> out (lq, H, dv), lse (lq, H). upcast: in fp64;
    else in the inputs' dtype, as flash-attention's attention_ref(upcast=False). Rows without a visible key: 0."""
    if upcast:
        q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = torch.einsum("ihd,jhd->hij", q * SCALE, k) if not upcast else torch.einsum("ihd,jhd->hij", q, k) * SCALE
    if SOFTCAP > 0:  # flash-attention's attention_ref: scores / softcap, tanh, * softcap
        s = torch.tanh(s / SOFTCAP) * SOFTCAP
    ok = visible(q.shape[0], k.shape[0], q.device)
    s = s.masked_fill(~ok, float("-inf"))
    lse = torch.logsumexp(s.double() if upcast else s.float(), dim=-1)  # (H, lq)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row without keys: softmax of all -inf is NaN -> 0
    out = torch.einsum("hij,jhd->ihd", p.to(v.dtype), v)
    return out, lse.transpose(0, 1)


def reference(seq, upcast):
    """The reference (upcast) or the baseline of one sequence; gradients too for a backward case."""
    # fp64 leaves for the reference: gradients through an upcast would come back rounded to the inputs' dtype.
    leaves = [t.detach().to(torch.float64 if upcast else t.dtype).requires_grad_(SPEC["backward"])
              for t in (seq["q"], seq["k"], seq["v"])]
    out, lse = attention_ref(*leaves, upcast)
    r = {"out": out.detach(), "lse": lse.detach()}
    if SPEC["backward"]:
        go = seq["dout"].double() if upcast else seq["dout"]
        r["dq"], r["dk"], r["dv"] = torch.autograd.grad(out, leaves, go.to(out.dtype), allow_unused=True)
    return r


def sequences(t, dev):
    """Each sequence's rows of Q (and dO) and the keys it uses, from the packed tensors as the kernel gets them."""
    out = []
    for s in SPEC["seqs"]:
        q0, k0 = s["q_start"], s["k_start"]
        seq = {"q": t["q"][q0:q0 + s["lq"]].to(dev), "k": t["k"][k0 + s["p0"]:k0 + s["kv_end"]].to(dev),
               "v": t["v"][k0 + s["p0"]:k0 + s["kv_end"]].to(dev)}
        if SPEC["logical_kv"]:  # paged or appended keys: the sequence's keys in order, written beside them
            l0, lk = s["logical_start"], s["kv_end"] - s["p0"]
            seq["k"], seq["v"] = t["k_logical"][l0:l0 + lk].to(dev), t["v_logical"][l0:l0 + lk].to(dev)
        if SPEC["backward"]:
            seq["dout"] = t["dout"][q0:q0 + s["lq"]].to(dev)
        out.append(seq)
    return out


def empty_rows(lq, lk, dev):
    return ~visible(lq, lk, dev).any(dim=1)  # (lq,)


# ---- the kernel, called as flashcheck's adapter calls it ---------------------------------------------------------
# Returns, per sequence, its output rows (lq, H, dv), its LSE (lq, H) or None, and for a backward case dQ (lq, H, d)
# and dK/dV over the keys it uses (lk, Hk, d/dv).

# >>> sdpa-math-cpu cpu-flash sdpa-flash sdpa-efficient sdpa-cudnn sdpa-math-cuda
def explicit_mask(lq, lk, dev):
    """The adapter's mask where native is_causal (top-left) does not say it: 0 / -inf in the query dtype."""
    m = torch.full((lq, lk), float("-inf"), dtype=DTYPE, device=dev)
    return m.masked_fill(visible(lq, lk, dev), 0.0)


def attend(q, k, v):
    """One sequence, (1, L, heads, dim) in; (1, H, lq, dv) and the LSE (or None) out."""
    lq, lk = q.shape[1], k.shape[1]
    windowed = LEFT >= 0 or RIGHT >= 0
    plain_causal = SPEC["causal"] and LEFT < 0 and (SPEC["alignment"] == "top_left" or lq == lk)
    qh = q.permute(0, 2, 1, 3).contiguous()
    kh, vh = (with_strides(x.permute(0, 2, 1, 3), q.shape[2]) for x in (k, v))
    mask = explicit_mask(lq, lk, q.device) if windowed and not plain_causal else None
    return call_op(qh, kh, vh, mask, plain_causal)


def with_strides(x, heads):
    """(1, Hk, L, dim) K or V as the adapter presents it: contiguous; "expanded", one KV head broadcast over the query
    heads with stride 0 (as a model that expand()s its KV heads passes it); or "gapped", rows and heads padded."""
    if SPEC["kv_strides"] == "expanded":
        return x.contiguous().expand(1, heads, x.shape[2], x.shape[3])
    if SPEC["kv_strides"] == "gapped":
        big = torch.full((1, x.shape[1], x.shape[2] + 3, x.shape[3] + 8), float("nan"), dtype=x.dtype, device=x.device)
        view = big.narrow(2, 0, x.shape[2]).narrow(3, 0, x.shape[3])
        view.copy_(x)
        return view
    return x.contiguous()
# <<<

# >>> sdpa-math-cpu
def call_op(q, k, v, mask, is_causal):
    o, _ = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, mask, 0.0, is_causal, None, scale=SCALE,
                                                             enable_gqa=q.shape[1] != k.shape[1])
    return o, None
# <<<

# >>> cpu-flash
def call_op(q, k, v, mask, is_causal):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, attn_mask=mask,
                                                                      scale=SCALE)
# <<<

# >>> sdpa-flash sdpa-efficient sdpa-cudnn sdpa-math-cuda
def call_op(q, k, v, mask, is_causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
               "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-math-cuda": SDPBackend.MATH}[SPEC["kernel"]]
    if mask is not None:
        mask = mask.eq(0)  # the public SDPA takes a boolean mask (True = attend), as users pass it
    if SPEC["kernel"] == "sdpa-efficient" and q.shape[1] != k.shape[1]:  # no enable_gqa in this backend
        k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    with sdpa_kernel([backend]):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0,
                                                             is_causal=is_causal, scale=SCALE,
                                                             enable_gqa=q.shape[1] != k.shape[1])
    return o, None
# <<<

# >>> sdpa-math-cpu cpu-flash sdpa-flash sdpa-efficient sdpa-cudnn sdpa-math-cuda
def run_kernel(t, dev):
    """One call per sequence on its rows and its keys, as (1, L, heads, dim); gradients through autograd."""
    results = []
    for seq in sequences(t, dev):
        leaves = [seq[n].unsqueeze(0).detach().clone().requires_grad_(SPEC["backward"]) for n in ("q", "k", "v")]
        o, lse = attend(*leaves)
        r = {"out": o[0].permute(1, 0, 2).detach(), "lse": None if lse is None else lse[0].transpose(0, 1).detach()}
        if SPEC["backward"]:
            go = seq["dout"].unsqueeze(0).permute(0, 2, 1, 3)
            g = torch.autograd.grad(o, leaves, go, allow_unused=True)
            r["dq"], r["dk"], r["dv"] = (None if x is None else x[0].detach() for x in g)
        results.append(r)
    return results
# <<<

# >>> flash-fwd-varlen flash-fwd-dense flash-fwd-varlen-deterministic flash-fwd-dense-deterministic efficient-fwd-varlen efficient-fwd-dense cudnn-fwd py
def per_sequence(rows, lse_rows):
    """Packed (rows, H, ...) results and (rows, H) LSE -> one entry per sequence."""
    return [{"out": rows[s["q_start"]:s["q_start"] + s["lq"]],
             "lse": None if lse_rows is None else lse_rows[s["q_start"]:s["q_start"] + s["lq"]]} for s in SPEC["seqs"]]


def add_gradients(results, dq, dk, dv):
    for r, s in zip(results, SPEC["seqs"]):
        k0 = s["k_start"]
        r["dq"] = dq[s["q_start"]:s["q_start"] + s["lq"]]
        r["dk"] = dk[k0 + s["p0"]:k0 + s["kv_end"]]
        r["dv"] = dv[k0 + s["p0"]:k0 + s["kv_end"]]
    return results


def poison_allocator(rows, heads, dim):
    """The adapters fill a block of the output's size with NaN and free it just before the op: the caching allocator
    hands that block out next, so that a row the kernel never writes reads as NaN, not as zeros of a fresh process."""
    torch.full((rows, heads, dim), float("nan"), dtype=DTYPE, device="cuda")


def int32(values):
    return torch.tensor(values, dtype=torch.int32, device="cuda")


def sum_groups(x, kv_heads):
    """dK/dV of the repeated heads summed over each group in fp32: (rows, H, d) -> (rows, Hk, d)."""
    rows, heads, dim = x.shape
    return x.float().reshape(rows, kv_heads, heads // kv_heads, dim).sum(2).to(x.dtype)
# <<<

# >>> flash-fwd-varlen flash-fwd-dense flash-fwd-varlen-deterministic flash-fwd-dense-deterministic
def run_kernel(t, dev):
    a = SPEC["flash_args"]
    q, k, v = t["q"].to(dev), t["k"].to(dev), t["v"].to(dev)
    H, Hk, d, dv = SPEC["heads"], SPEC["kv_heads"], SPEC["head_dim"], SPEC["v_head_dim"]
    wl = a["window_left"] if a["window_left"] >= 0 else None
    wr = a["window_right"] if a["window_right"] >= 0 else None
    if SPEC["kernel"].endswith("-deterministic"):
        torch.use_deterministic_algorithms(True)
    if SPEC["kernel"].startswith("flash-fwd-varlen"):
        cq, ck = int32(a["cu_seqlens_q"]), int32(a["cu_seqlens_k"])
        used = int32(a["seqused_k"]) if a["seqused_k"] else None
        poison_allocator(SPEC["total_q"], H, dv)
        o, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
            q, k, v, cq, ck, a["max_seqlen_q"], a["max_seqlen_k"], 0.0, SPEC["causal"], False, scale=SCALE,
            window_size_left=wl, window_size_right=wr, seqused_k=used, alibi_slopes=None)
        results = per_sequence(o, lse.t() if lse.dim() == 2 else None)  # (H, total_q) in this version
        if SPEC["backward"]:
            o, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
                q, k, v, cq, ck, a["max_seqlen_q"], a["max_seqlen_k"], 0.0, SPEC["causal"], False, scale=SCALE,
                window_size_left=wl, window_size_right=wr, seqused_k=None, alibi_slopes=None)
            dq, dk, dv_ = torch.ops.aten._flash_attention_backward(
                t["dout"].to(dev), q, k, v, o, lse, cq, ck, a["max_seqlen_q"], a["max_seqlen_k"], 0.0, SPEC["causal"],
                rng, unused, scale=SCALE, window_size_left=wl, window_size_right=wr)
            add_gradients(results, dq, dk, dv_)
        return results
    B, Lq, Lk = len(SPEC["seqs"]), SPEC["seqs"][0]["lq"], SPEC["seqs"][0]["k_alloc"]
    qd, kd, vd = q.view(B, Lq, H, d), k.reshape(B, Lk, Hk, d), v.reshape(B, Lk, Hk, dv)
    poison_allocator(SPEC["total_q"], H, dv)
    o, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
        qd, kd, vd, None, None, Lq, Lk, 0.0, SPEC["causal"], False, scale=SCALE, window_size_left=wl,
        window_size_right=wr, seqused_k=None, alibi_slopes=None)
    results = per_sequence(o.reshape(-1, H, dv), lse.permute(0, 2, 1).reshape(-1, H))
    if SPEC["backward"]:
        dq, dk, dv_ = torch.ops.aten._flash_attention_backward(
            t["dout"].to(dev).view(B, Lq, H, dv), qd, kd, vd, o, lse, None, None, Lq, Lk, 0.0, SPEC["causal"], rng,
            unused, scale=SCALE, window_size_left=wl, window_size_right=wr)
        add_gradients(results, dq.reshape(-1, H, d), dk.reshape(-1, Hk, d), dv_.reshape(-1, Hk, dv))
    return results
# <<<

# >>> efficient-fwd-varlen efficient-fwd-dense
def efficient_lse(lse):
    """(1, H, padded total_q) packed, or (B, H, padded max_q) per sequence -> (total_q, H)."""
    if lse.shape[0] == 1 and lse.shape[2] >= SPEC["total_q"]:
        return lse[0, :, :SPEC["total_q"]].t()
    rows = [lse[b, :, :s["lq"]].t() for b, s in enumerate(SPEC["seqs"]) if s["lq"] > 0]
    return torch.cat(rows, 0) if rows else lse.new_empty(0, SPEC["heads"])


def run_kernel(t, dev):
    a = SPEC["flash_args"]
    H, Hk, d, dv = SPEC["heads"], SPEC["kv_heads"], SPEC["head_dim"], SPEC["v_head_dim"]
    q, k, v = t["q"].to(dev), t["k"].to(dev), t["v"].to(dev)
    if Hk != H:  # the op takes equal head counts: the adapter repeats the KV heads
        k, v = k.repeat_interleave(H // Hk, 1), v.repeat_interleave(H // Hk, 1)
    mask_type = 0 if not SPEC["causal"] else 1 if SPEC["alignment"] == "top_left" else 2
    window = a["window_left"] + 1 if SPEC["causal"] and a["window_left"] >= 0 else None
    if SPEC["kernel"] == "efficient-fwd-varlen":
        cq, ck = int32(a["cu_seqlens_q"]), int32(a["cu_seqlens_k"])
        seqlen_k = int32(a["seqused_k"]) if a["seqused_k"] else None
        poison_allocator(SPEC["total_q"], H, dv)
        o, lse, seed, offset, _, _ = torch.ops.aten._efficient_attention_forward(
            q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), None, cq, ck, a["max_seqlen_q"], a["max_seqlen_k"], 0.0,
            mask_type, True, scale=SCALE, seqlen_k=seqlen_k, window_size=window)
        results = per_sequence(o[0], efficient_lse(lse))
        if SPEC["backward"]:
            o, lse, seed, offset, _, _ = torch.ops.aten._efficient_attention_forward(
                q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), None, cq, ck, a["max_seqlen_q"], a["max_seqlen_k"],
                0.0, mask_type, True, scale=SCALE, seqlen_k=None, window_size=window)
            g = torch.ops.aten._efficient_attention_backward(
                t["dout"].to(dev).unsqueeze(0), q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), None, o, cq, ck,
                a["max_seqlen_q"], a["max_seqlen_k"], lse, 0.0, seed, offset, mask_type, False, scale=SCALE,
                num_splits_key=None, window_size=window)
            add_gradients(results, g[0][0], sum_groups(g[1][0], Hk), sum_groups(g[2][0], Hk))
        return results
    B, Lq, Lk = len(SPEC["seqs"]), SPEC["seqs"][0]["lq"], SPEC["seqs"][0]["k_alloc"]
    qd, kd, vd = q.view(B, Lq, H, d), k.reshape(B, Lk, H, d), v.reshape(B, Lk, H, dv)
    seqlen_k = int32(a["seqused_k"]) if a["seqused_k"] else None
    poison_allocator(SPEC["total_q"], H, dv)
    o, lse, seed, offset, _, _ = torch.ops.aten._efficient_attention_forward(
        qd, kd, vd, None, None, None, Lq, Lk, 0.0, mask_type, True, scale=SCALE, seqlen_k=seqlen_k, window_size=window)
    results = per_sequence(o.reshape(-1, H, dv), lse[:, :, :Lq].permute(0, 2, 1).reshape(-1, H))
    if SPEC["backward"]:
        o, lse, seed, offset, _, _ = torch.ops.aten._efficient_attention_forward(
            qd, kd, vd, None, None, None, Lq, Lk, 0.0, mask_type, True, scale=SCALE, seqlen_k=None, window_size=window)
        g = torch.ops.aten._efficient_attention_backward(
            t["dout"].to(dev).view(B, Lq, H, dv), qd, kd, vd, None, o, None, None, Lq, Lk, lse, 0.0, seed, offset,
            mask_type, False, scale=SCALE, num_splits_key=None, window_size=window)
        add_gradients(results, g[0].reshape(-1, H, d), sum_groups(g[1].reshape(-1, H, d), Hk),
                      sum_groups(g[2].reshape(-1, H, dv), Hk))
    return results
# <<<

# >>> cudnn-fwd
def run_kernel(t, dev):
    H, Hk, d, dv = SPEC["heads"], SPEC["kv_heads"], SPEC["head_dim"], SPEC["v_head_dim"]
    B, Lq, Lk = len(SPEC["seqs"]), SPEC["seqs"][0]["lq"], SPEC["seqs"][0]["k_alloc"]
    q = t["q"].to(dev).view(B, Lq, H, d).transpose(1, 2)
    k = t["k"].to(dev).reshape(B, Lk, Hk, d).transpose(1, 2)
    v = t["v"].to(dev).reshape(B, Lk, Hk, dv).transpose(1, 2)
    poison_allocator(SPEC["total_q"], H, dv)
    r = torch.ops.aten._cudnn_attention_forward(q, k, v, None, None, None, Lq, Lk, True, 0.0, SPEC["causal"], False,
                                                scale=SCALE)
    results = per_sequence(r[0].transpose(1, 2).reshape(-1, H, dv), r[1].reshape(B, H, Lq).permute(0, 2, 1).reshape(-1, H))
    if SPEC["backward"]:
        if Hk != H:  # the backward takes equal head counts: the adapter repeats the KV heads and sums their gradients
            k, v = k.repeat_interleave(H // Hk, 1), v.repeat_interleave(H // Hk, 1)
        f = torch.ops.aten._cudnn_attention_forward(q, k, v, None, None, None, Lq, Lk, True, 0.0, SPEC["causal"],
                                                    False, scale=SCALE)
        dout = torch.empty_like(f[0])  # cuDNN takes dO in the output's layout
        dout.copy_(t["dout"].to(dev).view(B, Lq, H, dv).transpose(1, 2))
        dq, dk, dv_ = torch.ops.aten._cudnn_attention_backward(dout, q, k, v, f[0], f[1], f[6], f[7], None, None, None,
                                                               Lq, Lk, 0.0, SPEC["causal"], scale=SCALE)
        add_gradients(results, dq.transpose(1, 2).reshape(-1, H, d),
                      sum_groups(dk.transpose(1, 2).reshape(-1, H, d), Hk),
                      sum_groups(dv_.transpose(1, 2).reshape(-1, H, dv), Hk))
    return results
# <<<


# >>> py
# The adapter flashcheck runs this kernel through: its module and the modules it imports from its own package, as
# they were when this script was written. They are loaded under their own names, so the adapter runs unchanged.
ADAPTER_SOURCES = {
@@ADAPTER@@
}


def load_adapter():
    """The adapter's function, from ADAPTER_SOURCES (dependencies first)."""
    import types
    for name, source in ADAPTER_SOURCES.items():
        parts = name.split(".")
        for i in range(1, len(parts)):  # the packages above it: empty namespaces, so that relative imports resolve
            package = ".".join(parts[:i])
            if package not in sys.modules or not hasattr(sys.modules[package], "__path__"):
                sys.modules[package] = types.ModuleType(package)
                sys.modules[package].__path__ = []
        module = types.ModuleType(name)
        module.__package__ = ".".join(parts[:-1])
        module.__file__ = "<%s, in %s>" % (name, os.path.basename(__file__))
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    return getattr(sys.modules[SPEC["adapter"]["module"]], SPEC["adapter"]["function"])


def guarded(guards, name, shape, dtype, dev):
    """A NaN-filled tensor inside margins (a row and 64 elements on each side) holding a canary bit pattern, as
    flashcheck's bridge hands the kernel its outputs: a write past either end lands in a margin (check_guards)."""
    n = math.prod(shape)
    row = n // max(shape[0], 1) if len(shape) > 1 else 1
    two = torch.empty((), dtype=dtype).element_size() == 2
    pattern, margin = (0x7DAD if two else 0x7FADBEEF), row + 64
    whole = torch.full((n + 2 * margin,), pattern, dtype=torch.int16 if two else torch.int32, device=dev)
    inner = whole.narrow(0, margin, n).view(dtype).view(shape)
    inner.fill_(float("nan"))
    guards.append((name, whole, margin, n, pattern))
    return inner


def check_guards(guards, dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()
    damage = []
    for name, whole, margin, n, pattern in guards:
        before = int(whole[:margin].ne(pattern).sum())
        after = int(whole[margin + n:].ne(pattern).sum())
        if before or after:
            damage.append("%s: %d of %d canary elements before it and %d of %d after it" % (name, before, margin,
                                                                                             after, margin))
    if damage:
        raise RuntimeError("the kernel wrote outside the buffers it was given (out-of-bounds writes): " +
                           "; ".join(damage))


def bridge_args(spec, t, dev):
    """The namespace flashcheck's Python bridge passes as `args`: int32 index tensors (None where the case has none)
    and the scalars."""
    import types
    a = spec["flash_args"]
    B = a["batch"]

    def ints(values, shape):
        return torch.tensor(values, dtype=torch.int32, device=dev).view(shape) if values else None

    return types.SimpleNamespace(
        k_new=t["k_new"].to(dev) if "k_new" in t else None, v_new=t["v_new"].to(dev) if "v_new" in t else None,
        cu_seqlens_q=ints(a["cu_seqlens_q"], (B + 1,)), cu_seqlens_k=ints(a["cu_seqlens_k"], (B + 1,)),
        seqused_k=ints(a["seqused_k"], (B,)), leftpad_k=ints(a["leftpad_k"], (B,)),
        cache_seqlens=ints(a["cache_seqlens"], (B,)), cu_seqlens_k_new=ints(a["cu_seqlens_k_new"], (B + 1,)),
        block_table=ints(a["block_table"], (B, a["max_blocks"])), batch=B, max_seqlen_q=a["max_seqlen_q"],
        max_seqlen_k=a["max_seqlen_k"], page_size=a["page_size"], softmax_scale=spec["scale"], softcap=a["softcap"],
        causal=a["causal"], top_left=a["top_left"], window_left=a["window_left"], window_right=a["window_right"])


def forward_call(fn, spec, t, dev):
    """fn(q, k, v, out, lse, args) writes out (total_q, H, dv) and lse (total_q, H) in place, as the bridge calls it."""
    dtype, H, dv = DTYPES[spec["dtype"]], spec["heads"], spec["v_head_dim"]
    q, k, v = t["q"].to(dev), t["k"].to(dev), t["v"].to(dev)
    args = bridge_args(spec, t, dev)
    guards = []
    out = guarded(guards, "out", (spec["total_q"], H, dv), dtype, dev)
    lse = guarded(guards, "lse", (spec["total_q"], H), torch.float32, dev) if SPEC["adapter"]["returns_lse"] else None
    fn(q, k, v, out, lse, args)
    check_guards(guards, dev)
    return q, k, v, args, out, lse


def run_prelude(fn, t, dev):
    """The fixture's earlier cases, forward, unjudged: flashcheck replays a fixture's cases in order in one process,
    and an adapter (or the library under it) may keep state from one call to the next."""
    for i, spec in enumerate(SPEC["prelude"]):
        prefix = "prelude%d." % i
        try:
            forward_call(fn, spec, {n[len(prefix):]: x for n, x in t.items() if n.startswith(prefix)}, dev)
            print("  ran earlier case %s of the fixture first" % spec["case"])
        except Exception as e:  # noqa: BLE001 - an earlier case's failure is not this case's verdict
            print("  ran earlier case %s of the fixture first: it raised %s" % (spec["case"], type(e).__name__))


def run_kernel(t, dev):
    """The forward as the bridge calls it; a backward case then takes the gradients as the bridge does: through
    autograd of the forward (fn.backward == "autograd"), or from fn.backward(dout, q, k, v, out, lse, dq, dk, dv,
    args) writing them."""
    fn = load_adapter()
    run_prelude(fn, t, dev)
    q, k, v, args, out, lse = forward_call(fn, SPEC, t, dev)
    results = per_sequence(out, lse)
    if not SPEC["backward"]:
        return results
    backward = getattr(fn, "backward", None)
    if backward is None:
        raise RuntimeError("%s has no backward (no `backward` attribute)" % SPEC["kernel"])
    H, dv = SPEC["heads"], SPEC["v_head_dim"]
    dout = t["dout"].to(dev)
    if backward == "autograd":
        leaves = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
        o = torch.zeros(SPEC["q_rows"], H, dv, dtype=DTYPE, device=dev)
        l = torch.zeros(SPEC["q_rows"], H, dtype=torch.float32, device=dev) if lse is not None else None
        with torch.enable_grad():
            fn(*leaves, o, l, args)
            grads = (torch.autograd.grad(o, leaves, dout, allow_unused=True) if o.requires_grad
                     else (None, None, None))
        dq, dk, dv_ = (torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads))
    else:
        # The forward's out and LSE over every Q row (rows past the sequences' stay NaN), NaN-filled gradients.
        o = torch.full((SPEC["q_rows"], H, dv), float("nan"), dtype=DTYPE, device=dev)
        o[:SPEC["total_q"]] = out
        l = None
        if lse is not None:
            l = torch.full((SPEC["q_rows"], H), float("nan"), dtype=torch.float32, device=dev)
            l[:SPEC["total_q"]] = lse
        guards = []
        dq, dk, dv_ = (guarded(guards, n, tuple(x.shape), DTYPE, dev) for n, x in (("dq", q), ("dk", k), ("dv", v)))
        backward(dout, q, k, v, o, l, dq, dk, dv_, args)
        check_guards(guards, dev)
    return add_gradients(results, dq, dk, dv_)
# <<<


# ---- the rule --------------------------------------------------------------------------------------------------

def worst(kernel, ref, base):
    """(kernel error, baseline error, flat index of the worst element), NaN/inf in the kernel counted as infinite."""
    k64, r64, b64 = kernel.double(), ref.double(), base.double()
    err = (k64 - r64).abs()
    err = torch.where(torch.isfinite(k64) | ~torch.isfinite(r64), err, torch.full_like(err, math.inf))
    err = torch.nan_to_num(err, nan=math.inf, posinf=math.inf)
    if err.numel() == 0:
        return 0.0, 0.0, None
    i = int(torch.argmax(err))
    return float(err.reshape(-1)[i]), float((b64 - r64).abs().nan_to_num(nan=math.inf, posinf=math.inf).max()), i


def judge(results, refs, bases, dev):
    """Every quantity of every sequence under the rule; the lines to print, and whether one failed."""
    lines, failed = [], False
    names = ["out", "lse"] + (["dq", "dk", "dv"] if SPEC["backward"] else [])
    for name in names:
        ks, rs, bs, parts = [], [], [], []  # parts: (sequence, shape, first flat index)
        for b, (r, ref, base, s) in enumerate(zip(results, refs, bases, SPEC["seqs"])):
            if r.get(name) is None:
                continue
            kv = r[name].detach().to(dev)
            # A gradient autograd leaves unused (no query sees the key) is zero.
            rv = torch.zeros_like(kv, dtype=torch.float64) if ref[name] is None else ref[name].to(dev)
            bv = torch.zeros_like(kv) if base[name] is None else base[name].to(dev)
            if name == "lse":  # rows without keys have no LSE to compare
                keep = ~empty_rows(s["lq"], s["kv_end"] - s["p0"], dev)
                kv, rv, bv = kv[keep], rv[keep], bv[keep]
            if kv.shape != rv.shape:
                lines.append("%s of sequence %d has shape %s, expected %s" % (name, b, tuple(kv.shape), tuple(rv.shape)))
                failed = True
                continue
            parts.append((b, tuple(kv.shape), sum(x.numel() for x in ks)))
            ks.append(kv.reshape(-1))
            rs.append(rv.reshape(-1))
            bs.append(bv.reshape(-1))
        if not ks:
            continue
        kernel, ref, base = torch.cat(ks), torch.cat(rs), torch.cat(bs)
        err, base_err, i = worst(kernel, ref, base)
        floor = 1e-6 * float(ref.double().abs().nan_to_num(0.0).max()) if ref.numel() else 0.0
        bound = 2 * base_err + floor
        ok = err <= bound
        failed |= not ok
        at = ""
        if i is not None:
            b, shape, first = [p for p in parts if p[2] <= i][-1]
            idx = [int(x) for x in torch.unravel_index(torch.tensor(i - first), shape)] if shape else []
            at = " at sequence %d %s: kernel %r, reference %r" % (b, tuple(idx), float(kernel[i]), float(ref[i]))
        ratio = err / base_err if base_err > 0 else (math.inf if err > 0 else 0.0)
        lines.append("%-4s %s  max error %.3g, baseline %.3g (ratio %.3g), bound %.3g%s" % (
            name, "ok  " if ok else "FAIL", err, base_err, ratio, bound, at))
    return lines, failed


def main():
    parser = argparse.ArgumentParser(description=SPEC["title"])
    parser.add_argument("--markdown", action="store_true", help="print the environment and observations as Markdown")
    args = parser.parse_args()
    print("%s\n  case %s (%s) of %s on %s" % (SPEC["title"], SPEC["case"], SPEC["summary"], SPEC["fixture"],
                                              SPEC["kernel"]))
    env = environment()
    dev = device()
    t = load_safetensors(os.path.join(HERE, SPEC["tensors"]))
    seqs = sequences(t, dev)
    refs = [reference(s, upcast=True) for s in seqs]
    bases = [reference(s, upcast=False) for s in seqs]
    lines, failed, raised = [], False, None
    try:
        results = run_kernel(t, dev)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        lines, failed = judge(results, refs, bases, dev)
    except Exception as e:  # noqa: BLE001 - the kernel raising is a finding, reported with its message
        raised = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        failed = True
    verdict = ("REPRODUCED: the kernel raised " + raised) if raised else (
        "REPRODUCED: the kernel's answer is outside the rule" if failed else "not reproduced: within the rule")
    expected = SPEC["expected"]
    if args.markdown:
        print("\n### Environment\n")
        for key, value in env.items():
            print("- %s: %s" % (key, value))
        print("\n### Observed\n\n```\n%s\n```" % "\n".join(lines + [verdict]))
        print("\nflashcheck expected: %s%s" % (expected["verdict"], (" (\"%s\")" % expected["reason_contains"])
                                                 if expected.get("reason_contains") else ""))
    else:
        for key, value in env.items():
            print("  %s: %s" % (key, value))
        for line in lines:
            print("  " + line)
        print(verdict)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
