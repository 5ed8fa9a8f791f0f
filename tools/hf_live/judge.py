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

The backward (judge_gradients) uses the same form per gradient of L = <dO, out> w.r.t. q, k and v:

    max|g_path - g_exact| <= k * max|g_eager - g_exact| + floor,   floor = max over elements of
                                                                   floor_spacings * spacing(max(terms, |g_exact|))

over every element (dO is zero on rows that are not comparable, so those rows' gradients are exact zeros),
NaN/Inf failing; each element's floor is the larger of that dtype floor and the fp32 noise floor
noise_lambda * u * sensitivity, as the forward's. `terms` is the root-sum-square of the element's terms as
core/compare_gradients.cc and reference/host/exact_row.cc take it (docs/TOLERANCE.md, "The gradient rule"): a
gradient is a sum whose terms can cancel, and a kernel rounds each term, so its error scales with them, not with the
sum. Not carried from the C++ gradient rule: its softcap extra floor (3e-4, not in the export's tolerance block).
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


def comparable_rows(torch, case, allowed):
    """[B, Lq]: the query rows judged: a valid query column that eager lets see at least one key."""
    return query_valid(torch, case) & allowed.any(-1)


def probabilities(torch, case, q, k, allowed):
    """(P [B, H, Lq, Lk], c, t): the softmax weights of the exact attention under `allowed` (0 on rows without a key)
    from fp64 q [B, Lq, H, D] and k repeated to H heads, differentiable; with a softcap t = tanh(logit / cap) and
    c = 1 - t^2 its derivative (else t = 0, c = 1), both detached."""
    s = case.scaling * torch.einsum("bihd,bjhd->bhij", q, k)
    c, t = torch.ones_like(s), torch.zeros_like(s)
    if case.softcap is not None and case.softcap > 0:
        t = torch.tanh(s / case.softcap)
        s = case.softcap * t
        t = t.detach()
        c = 1 - t * t
    ok = allowed[:, None]  # [B, 1, Lq, Lk]
    s = s.masked_fill(~ok, -math.inf)
    has = ok.any(-1, keepdim=True)
    # the softmax does not depend on m: detached, it adds nothing to the gradient and no rounding of its own
    m = torch.where(has, s.amax(-1, keepdim=True), torch.zeros_like(s[..., :1])).detach()
    p = torch.exp(s - m)
    z = torch.where(has, p.sum(-1, keepdim=True), torch.ones_like(m))
    return p / z, c, t


def exact_attention(torch, case, allowed, tol):
    """(out [B, Lq, Hq, D] fp64, noise [B, Lq, Hq, D]): the exact attention under `allowed` and each element's
    first-order fp32 rounding sensitivity in units of u (reference/host/exact_row.cc)."""
    rep = case.Hq // case.Hkv
    q = case.q.double()  # [B, Lq, H, D]
    k = case.k.double().repeat_interleave(rep, dim=2)
    v = case.v.double().repeat_interleave(rep, dim=2)
    dot_abs = torch.einsum("bihd,bjhd->bhij", q.abs(), k.abs())
    ok = allowed[:, None]  # [B, 1, Lq, Lk]
    p, _, _ = probabilities(torch, case, q, k, allowed)
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


# --- the backward ------------------------------------------------------------------------------------------------

GRADIENTS = ("dq", "dk", "dv")


def _group_sum(torch, x, hkv):
    """[B, L, Hq, D] -> [B, L, Hkv, D]: the sum over the query heads that share a KV head (repeat_interleave's
    gradient)."""
    b, n, hq, d = x.shape
    return x.view(b, n, hkv, hq // hkv, d).sum(3)


def exact_gradients(torch, case, allowed, dout):
    """({dq, dk, dv} fp64 exact gradients of <dO, out> under `allowed`, {dq, dk, dv} the root-sum-square magnitude
    of each element's terms, {dq, dk, dv} each element's first-order fp32 sensitivity in units of u), from the
    case's own q, k, v (in the dtype) and dO."""
    rep = case.Hq // case.Hkv
    with torch.enable_grad():
        q = case.q.detach().double().requires_grad_()
        k = case.k.detach().double().requires_grad_()
        v = case.v.detach().double().requires_grad_()
        kr, vr = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        p, c, t = probabilities(torch, case, q, kr, allowed)
        out = torch.einsum("bhij,bjhd->bihd", p, vr)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout.double())
    with torch.no_grad():
        terms, noise = _gradient_scales(torch, case, allowed, dout.double(), q.detach(), kr.detach(), vr.detach(),
                                        p.detach(), c, t, out.detach())
    return {"dq": dq, "dk": dk, "dv": dv}, terms, noise


def _gradient_scales(torch, case, allowed, do, q, k, v, p, c, t, out):
    """The floors' two scales per gradient element, as reference/host/exact_row.cc and gradients.cc compute them:
    the root-sum-square of its terms (tolerance::terms_magnitude) and its fp32 sensitivity in units of u
    (tolerance::gradient_sensitivity, dscore_sensitivity, output_sensitivity), vectorized over [B, H, Lq, Lk]."""
    ok = allowed[:, None].double()  # [B, 1, Lq, Lk]
    sc, d = abs(case.scaling), case.D
    root = math.sqrt
    # the forward: L_i = sqrt(D) max_j S_ij, n_i keys, a_x = sum_j P_ij |v_jx|, the output's own sensitivity
    logit = math.sqrt(d) * (sc * torch.einsum("bihd,bjhd->bhij", q.abs(), k.abs()) * ok).amax(-1)  # [B, H, Lq]
    n = ok.sum(-1).expand_as(logit)
    a = torch.einsum("bhij,bjhd->bihd", p, v.abs())
    L, N = logit.permute(0, 2, 1)[..., None], n.permute(0, 2, 1)[..., None]  # [B, Lq, H, 1]
    o_noise = L * (a + out.abs()) + torch.sqrt(N + 1) * a + out.abs()
    # dP_j = dO . v_j, D = dO . O, dS_j = P_j (dP_j - D) c_j, and their sensitivities
    dp = torch.einsum("bihd,bjhd->bhij", do, v)
    dp_sens = root(d + 1) * torch.einsum("bihd,bjhd->bhij", do.abs(), v.abs())
    delta = torch.einsum("bihd,bihd->bhi", do, out)[..., None]
    d_sens = (root(d + 1) * torch.einsum("bihd,bihd->bhi", do.abs(), out.abs())
              + torch.einsum("bihd,bihd->bhi", do.abs(), o_noise))[..., None]
    ds = p * (dp - delta) * c
    lg = logit[..., None]
    sigma = c * (2 * lg * p * (dp - delta).abs() + p * (dp_sens + d_sens))
    if case.softcap is not None and case.softcap > 0:
        sigma = sigma + ds.abs() * 2 * t.abs() * lg / case.softcap
    d_rss = torch.sqrt(torch.einsum("bihd,bihd->bhi", do * do, out * out))[..., None]
    ds_mag = ds.abs() + p * c * d_rss  # exact_row.cc's KeyGrad::ds_magnitude
    m = _group_sum(torch, (ok.expand_as(p)).sum(2)[..., None].permute(0, 2, 1, 3), case.Hkv)  # [B, Lk, Hkv, 1]
    sq = lambda x: x * x  # noqa: E731
    terms = {
        "dq": sc * torch.sqrt(torch.einsum("bhij,bjhd->bihd", sq(ds_mag), sq(k))),
        "dk": sc * torch.sqrt(_group_sum(torch, torch.einsum("bhij,bihd->bjhd", sq(ds_mag), sq(q)), case.Hkv)),
        "dv": torch.sqrt(_group_sum(torch, torch.einsum("bhij,bihd->bjhd", sq(p), sq(do)), case.Hkv)),
    }
    noise = {
        "dq": sc * (torch.sqrt(N + 1) * torch.einsum("bhij,bjhd->bihd", ds.abs(), k.abs())
                    + torch.einsum("bhij,bjhd->bihd", sigma, k.abs())),
        "dk": sc * (torch.sqrt(m + 1) * _group_sum(torch, torch.einsum("bhij,bihd->bjhd", ds.abs(), q.abs()), case.Hkv)
                    + _group_sum(torch, torch.einsum("bhij,bihd->bjhd", sigma, q.abs()), case.Hkv)),
        "dv": torch.sqrt(m + 1) * _group_sum(torch, torch.einsum("bhij,bihd->bjhd", p, do.abs()), case.Hkv)
        + _group_sum(torch, torch.einsum("bhij,bihd->bjhd", 2 * lg * p, do.abs()), case.Hkv),
    }
    return terms, noise


def _where(case, name, flat_index, shape):
    """'dk[b0, pos 3, kv head 1, d 5]' for a flat index into a [B, L, H, D] gradient."""
    idx, rest = [], int(flat_index)
    for n in reversed(shape):
        idx.append(rest % n)
        rest //= n
    d, h, i, b = idx
    head = "head" if name == "dq" else "kv head"
    return f"{name}[b{b}, pos {i}, {head} {h}, d {d}]"


def judge_gradient(torch, case, name, path_g, eager_g, exact_g, terms, noise, tol):
    """One gradient by the rule: {err, bound, base, floor, ratio, at, nonfinite, ok}."""
    x = exact_g
    g = torch.zeros_like(x) if path_g is None else path_g.detach().double()  # no gradient at all: it is 0
    e = torch.zeros_like(x) if eager_g is None else eager_g.detach().double()
    finite = torch.isfinite(g)
    err = torch.where(finite, (g - x).abs(), torch.full_like(x, math.inf))
    base = (e - x).abs()
    base = base[~torch.isnan(base)]
    base_max = float(base.max()) if base.numel() else 0.0
    sp = spacing(torch, torch.maximum(terms, x.abs()), tol, case.c["dtype"])
    floors = torch.maximum(tol.floor_spacings * sp, tol.noise_lambda * tol.unit_roundoff * noise)  # max_floor
    floor = float(floors.max()) if floors.numel() else 0.0
    worst = int(err.reshape(-1).argmax()) if err.numel() else 0
    err_max = float(err.reshape(-1)[worst]) if err.numel() else 0.0
    bound = tol.k * base_max + floor
    nonfinite = int((~finite).sum())
    return {"err": err_max, "bound": bound, "base": base_max, "floor": floor,
            "ratio": err_max / base_max if base_max > 0 else (0.0 if err_max == 0 else math.inf),
            "at": _where(case, name, worst, list(x.shape)), "nonfinite": nonfinite,
            "ok": nonfinite == 0 and err_max <= bound}


def _gradient_sentence(name, r, tol):
    cmp = "exceeds" if not r["ok"] else "within"
    return (f"{name}: max error {r['err']:.3g} against the exact gradient {cmp} {r['bound']:.3g} ({tol.k:g} x "
            f"eager's {r['base']:.3g} + floor {r['floor']:.3g}); ratio to eager's {r['ratio']:.3g}; worst at {r['at']}")


def judge_gradients(torch, case, path_grads, eager_grads, exact, terms, noise, tol):
    """The backward verdict of one path: a dict like judge()'s (verdict, reason, err, bound, base, floor of the
    gradient closest to or furthest past its bound) with each gradient's numbers under "gradients"."""
    per = {n: judge_gradient(torch, case, n, path_grads.get(n), eager_grads.get(n), exact[n], terms[n], noise[n], tol)
           for n in GRADIENTS}
    use = {n: (math.inf if not r["ok"] and r["bound"] <= 0 else r["err"] / r["bound"] if r["bound"] > 0 else 0.0)
           for n, r in per.items()}
    worst = max(GRADIENTS, key=lambda n: (per[n]["nonfinite"] > 0, use[n]))
    w = per[worst]
    res = {"err": w["err"], "bound": w["bound"], "base": w["base"], "floor": w["floor"], "ratio": w["ratio"],
           "worst": worst, "gradients": per, "detail": _gradient_sentence(worst, w, tol)}
    bad = [n for n in GRADIENTS if per[n]["nonfinite"]]
    if bad:
        n = bad[0]
        res["reason"] = f"{per[n]['nonfinite']} NaN/Inf element{'s' if per[n]['nonfinite'] > 1 else ''} in {n} " \
                        f"(first bad element counted as the worst: {per[n]['at']})"
    elif not w["ok"]:
        res["reason"] = _gradient_sentence(worst, w, tol)
    else:
        res["reason"] = ""
    res["verdict"] = "fail" if res["reason"] else "pass"
    return res
