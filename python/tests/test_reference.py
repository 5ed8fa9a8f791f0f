"""flashcheck.attention_ref and the rule against a naive fp64 attention written here with torch ops (and torch's
autograd for the gradients): values the package does not produce."""
import math

import pytest
import torch

import flashcheck


def naive(q, k, v, causal=False, window=(-1, -1), softcap=0.0, top_left=False):
    """Dense (batch, seqlen, heads, dim) attention in float64."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
    s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(q.shape[-1])
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    lq, lk = q.shape[1], k.shape[1]
    i, j = torch.arange(lq).unsqueeze(1), torch.arange(lk).unsqueeze(0)
    diag = i if top_left else i + lk - lq
    right = 0 if causal else window[1]
    ok = torch.ones(lq, lk, dtype=torch.bool)
    if right >= 0:
        ok &= j <= diag + right
    if window[0] >= 0:
        ok &= j >= diag - window[0]
    s = s.masked_fill(~ok, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
    return torch.einsum("bhij,bjhd->bihd", p, v), lse


def inputs(dtype=torch.bfloat16, b=2, lq=5, lk=9, h=4, hk=2, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda *s: torch.randn(*s, generator=g).to(dtype)
    return make(b, lq, h, d), make(b, lk, hk, d), make(b, lk, hk, d), make(b, lq, h, d)


@pytest.mark.parametrize("mask", [dict(), dict(causal=True), dict(causal=True, top_left=True),
                                  dict(window=(2, 1)), dict(softcap=5.0), dict(causal=True, softcap=2.0)])
def test_attention_ref_is_exact_attention(mask):
    q, k, v, do = inputs()
    args = dict(mask)
    window = args.pop("window", (-1, -1))
    ref = flashcheck.attention_ref(q, k, v, window_size=window, dout=do, **args)
    out, lse = naive(q, k, v, window=window, **args)
    torch.testing.assert_close(ref.out, out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ref.lse, lse, rtol=1e-12, atol=1e-12)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    grads = torch.autograd.grad(naive(*leaves, window=window, **args)[0], leaves, do.double())
    for name, want in zip(("dq", "dk", "dv"), grads):
        torch.testing.assert_close(getattr(ref, name), want, rtol=1e-10, atol=1e-10, msg=name)


def test_packed_sequences_match_their_dense_runs():
    q, k, v, _ = inputs(b=1, lq=7, lk=7)
    q2, k2, v2, _ = inputs(b=1, lq=3, lk=11, seed=1)
    cu_q = torch.tensor([0, 7, 10], dtype=torch.int32)
    cu_k = torch.tensor([0, 7, 18], dtype=torch.int32)
    ref = flashcheck.attention_ref(torch.cat([q[0], q2[0]]), torch.cat([k[0], k2[0]]), torch.cat([v[0], v2[0]]),
                                   cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
    torch.testing.assert_close(ref.out[:7], naive(q, k, v, causal=True)[0][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ref.out[7:], naive(q2, k2, v2, causal=True)[0][0], rtol=1e-12, atol=1e-12)
    assert ref.lse.shape == (4, 10)


def test_rows_without_keys_are_zero_with_lse_minus_infinity():
    q, k, v, _ = inputs(lq=6, lk=3)  # bottom-right causal: the first three rows see no key
    ref = flashcheck.attention_ref(q, k, v, causal=True)
    assert torch.all(ref.out[:, :3] == 0)
    assert torch.all(ref.lse[:, :, :3] == float("-inf"))


def test_an_output_in_the_dtype_passes_and_says_why():
    q, k, v, _ = inputs()
    out, lse = naive(q, k, v, causal=True)
    verdict = flashcheck.assert_close(out.to(q.dtype), q, k, v, causal=True, lse=lse)
    assert verdict.passed and verdict.line.startswith("pass") and 0 < verdict.ratio <= 2
    for evidence in ("err ", "base ", "ratio ", "bound ", "worst (b"):
        assert evidence in verdict.line


@pytest.mark.parametrize("defect", ["top_left", "nan", "lse_shift", "one_element"])
def test_planted_defects_fail_with_their_evidence(defect):
    q, k, v, _ = inputs()
    out, lse = naive(q, k, v, causal=True, top_left=defect == "top_left")
    out = out.to(q.dtype)
    if defect == "nan":
        out[1, 2, 3, 4] = float("nan")
    if defect == "lse_shift":
        lse = lse + 0.25  # the bf16 baseline's LSE errs by about 1e-2
    if defect == "one_element":
        out[0, 4, 1, 7] += 0.25
    with pytest.raises(flashcheck.ToleranceError) as caught:
        flashcheck.assert_close(out, q, k, v, causal=True, lse=lse)
    verdict = caught.value.verdict
    assert not verdict.passed and verdict.line.startswith("fail")
    if defect != "lse_shift":  # the shifted LSE fails on its own check, the output's ratio stays near 1
        assert verdict.ratio > 2
    if defect == "one_element":
        assert "worst (b0,h1,i4,d7)" in verdict.line
    if defect == "lse_shift":
        assert "lse" in verdict.line.lower()


def test_gradients_in_the_dtype_pass_and_a_scaled_dk_fails_on_dk_alone():
    q, k, v, do = inputs()
    ref = flashcheck.attention_ref(q, k, v, causal=True, dout=do)
    grads = [g.to(q.dtype) for g in (ref.dq, ref.dk, ref.dv)]
    assert flashcheck.assert_gradients_close(grads, q, k, v, do, causal=True).passed
    grads[1] = grads[1] * 1.05
    verdict = flashcheck.judge_gradients(grads, q, k, v, do, causal=True)
    assert not verdict.passed and verdict.line.startswith("fail")
    assert not verdict.parts["dk"].passed
    assert verdict.parts["dq"].passed and verdict.parts["dv"].passed


def test_bad_inputs_are_refused_with_the_field_and_reason():
    q, k, v, _ = inputs(h=3, hk=2)
    with pytest.raises(ValueError, match="kv_heads"):
        flashcheck.attention_ref(q, k, v)
    q, k, v, _ = inputs()
    with pytest.raises(ValueError, match="share a dtype"):
        flashcheck.attention_ref(q.half(), k, v)
    with pytest.raises(ValueError, match="cu_seqlens"):
        flashcheck.attention_ref(q[0], k[0], v[0], cu_seqlens_q=torch.tensor([0, 4], dtype=torch.int32),
                                 cu_seqlens_k=torch.tensor([0, 9], dtype=torch.int32))
