"""The integration property's judgement, for outputs computed in Python (tools/hf_live/live.py):

    max|path - exact| <= k * max|eager - exact| + floor        (on comparable query rows, in fp64)

`exact` is the attention under the keys the release's own eager mask allows, in fp64 from the same inputs;
`floor` is the larger of the dtype floor and the fp32 noise floor. Every constant comes from the "tolerance"
block that `flashcheck export` writes into manifest.json from core/tolerance.h (its kIntegration, kFloorOffset,
kFloorSpacings, kNoiseLambda, kUnitRoundoff32 and the dtypes' formats), and the formulas are those of
core/tolerance.h (spacing, max_floor, logit_sensitivity, sum_sensitivity, output_sensitivity) and
properties/integration.cc, written in the same order. A query row is comparable when its own column is valid in
the 2D mask and eager lets it see at least one key; unwritten rows (NaN: the stand-in kernel's poison), rows
zero-filled by the path and non-finite values fail outright.
"""
import math


class Tolerance:
    def __init__(self, block):
        try:
            self.k = float(block["k_integration"])
            self.floor_offset = float(block["floor_offset"])
            self.floor_spacings = float(block["floor_spacings"])
            self.noise_lambda = float(block["noise_lambda"])
            self.unit_roundoff = float(block["unit_roundoff32"])
            self.formats = {name: (int(f["mantissa_bits"]), int(f["min_normal_exp"]))
                            for name, f in block["formats"].items()}
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"manifest.json: tolerance block incomplete ({e!r})")


def allowed_keys(torch, mask, B, Lq, Lk):
    """[B, Lq, Lk] bool from the mask eager received: additive (0 = attend), boolean (True = attend) or None."""
    if mask is None:
        return torch.ones(B, Lq, Lk, dtype=torch.bool)
    m = mask
    if m.dim() == 4:
        m = m[:, 0]
    m = m[..., :Lk]
    ok = m if m.dtype == torch.bool else (m == 0)
    return ok.expand(B, Lq, Lk).clone()


def query_valid(torch, case):
    """[B, Lq]: whether each query's own column is valid in the 2D mask (a padding query is not compared)."""
    if case.mask2d is None:
        return torch.ones(case.B, case.Lq, dtype=torch.bool)
    cols = torch.arange(case.P, case.P + case.Lq)
    inside = cols < case.mask2d.shape[1]
    valid = torch.zeros(case.B, case.Lq, dtype=torch.bool)
    valid[:, inside] = case.mask2d[:, cols[inside]] != 0
    return valid


def exact_attention(torch, case, allowed, tol):
    """(out [B, Lq, Hq, D] fp64, noise [B, Lq, Hq, D]): the exact attention under `allowed` and each element's
    first-order fp32 rounding sensitivity in units of u (reference/host/exact_row.cc)."""
    rep = case.Hq // case.Hkv
    q = case.q.double()  # [B, Lq, H, D]
    k = case.k.double().repeat_interleave(rep, dim=2)
    v = case.v.double().repeat_interleave(rep, dim=2)
    dot = torch.einsum("bihd,bjhd->bhij", q, k)
    dot_abs = torch.einsum("bihd,bjhd->bhij", q.abs(), k.abs())
    s = case.scaling * dot
    if case.softcap is not None and case.softcap > 0:
        s = case.softcap * torch.tanh(s / case.softcap)
    ok = allowed[:, None]  # [B, 1, Lq, Lk]
    s = s.masked_fill(~ok, -math.inf)
    has = ok.any(-1, keepdim=True)
    m = torch.where(has, s.amax(-1, keepdim=True), torch.zeros_like(s[..., :1]))
    p = torch.exp(s - m)
    z = torch.where(has, p.sum(-1, keepdim=True), torch.ones_like(m))
    p = p / z
    out = torch.einsum("bhij,bjhd->bihd", p, v)
    a = torch.einsum("bhij,bjhd->bihd", p, v.abs())
    magnitude = (dot_abs * abs(case.scaling)).masked_fill(~ok, 0).amax(-1)  # [B, H, Lq]
    ds = math.sqrt(case.D) * magnitude
    n = ok.sum(-1).expand_as(magnitude).double()
    terms = torch.sqrt(n + 1)
    ds, terms = ds.permute(0, 2, 1)[..., None], terms.permute(0, 2, 1)[..., None]
    noise = ds * (a + out.abs()) + terms * a + out.abs()
    return out, noise


def spacing(torch, truth, tol, dtype_name):
    mantissa_bits, min_normal_exp = tol.formats[dtype_name]
    _, e = torch.frexp(truth.abs() + tol.floor_offset)
    lead = torch.clamp(e - 1, min=min_normal_exp)
    return torch.ldexp(torch.ones_like(truth), (lead - mantissa_bits).to(torch.float64))


def judge(torch, case, path_out, eager_out, eager_mask, tol):
    """A dict: verdict (pass | fail | error), reason, and the numbers (err, bound, base, floor, rows)."""
    want = [case.B, case.Lq, case.Hq, case.D]
    if path_out is None or list(path_out.shape) != want:
        got = None if path_out is None else list(path_out.shape)
        return {"verdict": "error", "reason": f"the path returns shape {got} for a {want} query: the model's reshape "
                                              "fails"}
    allowed = allowed_keys(torch, eager_mask, case.B, case.Lq, case.Lk)
    comparable = query_valid(torch, case) & allowed.any(-1)
    exact, noise = exact_attention(torch, case, allowed, tol)
    out = path_out.double()
    eager = eager_out.double()
    unwritten, zeroed, first_bad = 0, 0, None
    compare = comparable.clone()
    for b in range(case.B):
        for i in range(case.Lq):
            if not comparable[b, i]:
                continue
            row = out[b, i]
            if bool(torch.isnan(row).all()):
                unwritten += 1
            elif bool((row == 0).all()) and not bool((exact[b, i] == 0).all()):
                zeroed += 1
            else:
                continue
            compare[b, i] = False
            first_bad = first_bad or (b, i)
    sel = compare[..., None, None].expand_as(out)
    res = {"rows_compared": int(compare.sum()), "rows_skipped": int((~comparable).sum()), "rows_unwritten": unwritten,
           "rows_zeroed": zeroed}
    if bool(sel.any()):
        x, f, e, nz = exact[sel], out[sel], eager[sel], noise[sel]
        err = (f - x).abs()
        nonfinite = int((~torch.isfinite(f)).sum())
        base = (e - x).abs()
        base = base[~torch.isnan(base)]
        base_max = float(base.max()) if base.numel() else 0.0
        sp = spacing(torch, x, tol, case.c["dtype"])
        floor = float(torch.maximum(tol.floor_spacings * sp, tol.noise_lambda * tol.unit_roundoff * nz).max())
        err_max = float(torch.where(torch.isfinite(err), err, torch.full_like(err, math.inf)).max())
        eager_path = float((f - e).abs().nan_to_num(nan=math.inf).max())
    else:
        nonfinite, base_max, floor, err_max, eager_path = 0, 0.0, 0.0, 0.0, 0.0
    bound = tol.k * base_max + floor
    res.update({"err": err_max, "bound": bound, "base": base_max, "floor": floor, "path_vs_eager": eager_path})
    at = (lambda r: f"(b{r[0]}, i{r[1]})")
    if unwritten:
        reason = f"{unwritten} comparable row{'s' if unwritten > 1 else ''} never written by the path (undefined " \
                 f"output; first {at(first_bad)})"
    elif zeroed:
        reason = f"{zeroed} comparable row{'s' if zeroed > 1 else ''} zero-filled by the path (first {at(first_bad)})"
    elif nonfinite:
        reason = f"{nonfinite} NaN/Inf output element{'s' if nonfinite > 1 else ''} on comparable rows"
    elif not err_max <= bound:
        reason = f"max error {err_max:.3g} against the exact attention exceeds {bound:.3g} ({tol.k:g} x eager's " \
                 f"{base_max:.3g} + floor)"
    else:
        reason = ""
    res["verdict"] = "fail" if reason else "pass"
    res["reason"] = reason
    return res
