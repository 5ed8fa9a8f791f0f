"""tools/hf_live/model_backward.py — the "model-backward" check of `live.py --backward`: one training step of a
tiny random LlamaForCausalLM (2 layers, hidden 64, 4 heads, 2 KV heads, bf16) through the release's flash-attention
path on a padding-free packed batch (the release's own DataCollatorWithFlattening: position_ids restarting per
document, no attention mask, the first label of each document -100), against the same documents run one at a time
through eager, no packing. loss.backward() of the summed token loss in both; the parameter gradients must agree.

The flash path runs on tools/hf_live/fa_kernels.py's differentiable reference kernel, found where the release
imports flash-attn (fa_kernels.install) under attn_implementation="flash_attention_2" given to the model's config,
the public way to ask for it.

The rule, per parameter tensor, in the integration rule's form:

    max|g_flash - g_exact| <= k * max|g_eager - g_exact| + floor_spacings * ulp_bf16(max|g_exact|)

g_exact: the same documents one at a time through eager in fp64 with the same (bf16-valued) weights; g_eager: that
in bf16, the model dtype; k and floor_spacings from the export's tolerance block. Both bf16 runs make the same kinds
of roundings (linear layers, norms, the loss in fp32), so eager's error is the yardstick; the floor is the dtype's
resolution at the tensor's largest gradient (not at |g| + 0.3 as for attention outputs: parameter gradients are not
O(1), and an absolute floor would wave small tensors through). Two variants: the collator's position_ids alone, and
with its cu_seq_lens / max_length kwargs (return_flash_attn_kwargs, where the release's collator has it).
"""
import math

DOCS = (7, 12, 1, 9, 5)  # document lengths; the 1-token document has no loss target but still occupies a segment
CONFIG = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256)
SEED = 20261203


def _model(tr, torch, impl, dtype, state):
    """A LlamaForCausalLM with attention implementation `impl`, in `dtype`, holding `state`, in training mode."""
    cfg = tr.LlamaConfig(**CONFIG, attn_implementation=impl)
    model = tr.LlamaForCausalLM(cfg)
    if getattr(model.config, "_attn_implementation", impl) != impl:
        raise RuntimeError(f"the model took attention implementation {model.config._attn_implementation!r}, "
                           f"asked {impl!r}")
    model = model.to(dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    model.train()
    return model


def _weights(tr, torch):
    """The random initial weights, rounded to bf16 once so that every run holds the same values."""
    torch.manual_seed(SEED)
    model = tr.LlamaForCausalLM(tr.LlamaConfig(**CONFIG, attn_implementation="eager"))
    return {k: v.detach().to(torch.bfloat16) for k, v in model.state_dict().items()}


def _documents(torch):
    gen = torch.Generator().manual_seed(SEED)
    return [torch.randint(1, CONFIG["vocab_size"], (n,), generator=gen).tolist() for n in DOCS]


def _grads(model):
    return {n: (p.grad.detach().double() if p.grad is not None else None) for n, p in model.named_parameters()}


def _summed_loss(out, labels):
    """The mean token loss the model returns, times its token count: the sum, comparable between batchings."""
    n = int((labels[..., 1:] != -100).sum())
    return out.loss * n


def eager_per_document(tr, torch, state, docs, dtype):
    model = _model(tr, torch, "eager", dtype, state)
    for doc in docs:
        if len(doc) < 2:
            continue  # no target: nothing to learn from a 1-token document
        ids = torch.tensor([doc])
        _summed_loss(model(input_ids=ids, labels=ids), ids).backward()
    return _grads(model)


def collate(tr, torch, docs, flash_kwargs):
    """The packed batch as the release's DataCollatorWithFlattening builds it (by hand before it existed)."""
    cls = getattr(tr, "DataCollatorWithFlattening", None)
    if cls is None:
        raise RuntimeError("this release has no DataCollatorWithFlattening")
    kwargs = {"return_position_ids": True}
    if flash_kwargs:
        kwargs["return_flash_attn_kwargs"] = True
    batch = cls(**kwargs)([{"input_ids": d} for d in docs], return_tensors="pt")
    if "attention_mask" in batch:
        raise RuntimeError("the collator returned an attention mask for a padding-free batch")
    return dict(batch)


def flash_packed(tr, torch, fa, state, batch):
    model = _model(tr, torch, "flash_attention_2", torch.bfloat16, state)
    before = dict(fa.CALLS)
    _summed_loss(model(**batch), batch["labels"]).backward()
    calls = {k: fa.CALLS[k] - before[k] for k in fa.CALLS}
    return _grads(model), calls


def _ulp_bf16(x):
    """The bf16 spacing at |x| (7 stored mantissa bits)."""
    if x <= 0 or not math.isfinite(x):
        return 0.0
    return math.ldexp(1.0, math.frexp(x)[1] - 1 - 7)


def judge_parameters(flash, eager, exact, tol):
    """{name: {err, base, bound, floor, ratio, ok}} per parameter tensor, and the worst by err / bound."""
    per = {}
    for name, x in exact.items():
        if x is None:
            continue
        f, e = flash.get(name), eager.get(name)
        f = f if f is not None else x.new_zeros(x.shape)  # a parameter the flash step left without a gradient
        e = e if e is not None else x.new_zeros(x.shape)
        err = float((f - x).abs().nan_to_num(nan=math.inf).max())
        base = float((e - x).abs().max())
        floor = tol.floor_spacings * _ulp_bf16(float(x.abs().max()))
        bound = tol.k * base + floor
        per[name] = {"err": err, "base": base, "floor": floor, "bound": bound,
                     "ratio": err / base if base > 0 else (0.0 if err == 0 else math.inf), "ok": err <= bound}
    worst = max(per, key=lambda n: per[n]["err"] / per[n]["bound"] if per[n]["bound"] > 0 else math.inf)
    return per, worst


def run_variant(tr, torch, fa, tol, state, docs, exact, eager, flash_kwargs):
    batch = collate(tr, torch, docs, flash_kwargs)
    flash, calls = flash_packed(tr, torch, fa, state, batch)
    per, worst = judge_parameters(flash, eager, exact, tol)
    w = per[worst]
    res = {"variant": "collator cu_seq_lens kwargs" if flash_kwargs else "collator position_ids",
           "kernel_calls": calls, "worst": worst, "err": w["err"], "bound": w["bound"], "base": w["base"],
           "floor": w["floor"], "ratio": w["ratio"], "parameters": per}
    bad = [n for n in per if not per[n]["ok"]]
    if calls.get("varlen", 0) == 0:
        res["reason"] = f"the packed batch never reached flash_attn_varlen_func (calls {calls})"
    elif bad:
        res["reason"] = (f"{len(bad)} parameter gradient{'s' if len(bad) > 1 else ''} off; worst {worst}: max error "
                         f"{w['err']:.3g} against the fp64 per-document eager gradient exceeds {w['bound']:.3g} "
                         f"({tol.k:g} x bf16 eager's {w['base']:.3g} + floor {w['floor']:.3g}), ratio {w['ratio']:.3g}")
    else:
        res["reason"] = ""
    res["verdict"] = "fail" if res["reason"] else "pass"
    return res


def check(release, fa, tol):
    """The model-backward result: verdict, class, reason, the worst variant's numbers and every variant's."""
    torch, tr = release.torch, release.transformers
    if fa.BACKEND["name"] != "reference":
        return {"verdict": "unsupported", "class": "unsupported",
                "reason": "the backward is checked on the reference kernel only"}
    try:
        with torch.enable_grad():
            state = _weights(tr, torch)
            docs = _documents(torch)
            exact = eager_per_document(tr, torch, state, docs, torch.float64)
            eager = eager_per_document(tr, torch, state, docs, torch.bfloat16)
            variants = [run_variant(tr, torch, fa, tol, state, docs, exact, eager, False)]
            if "return_flash_attn_kwargs" in _init_params(getattr(tr, "DataCollatorWithFlattening", None)):
                variants.append(run_variant(tr, torch, fa, tol, state, docs, exact, eager, True))
    except Exception as e:  # noqa: BLE001 - reported, never fatal to the case results
        import traceback

        return {"verdict": "error", "class": "raises", "reason": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc(limit=-6)}
    failing = [v for v in variants if v["verdict"] != "pass"]
    worst = failing[0] if failing else max(variants, key=lambda v: v["err"] / v["bound"] if v["bound"] else 0.0)
    res = {k: worst[k] for k in ("verdict", "reason", "err", "bound", "base", "floor", "ratio")}
    res["class"] = "wrong-gradient" if failing else None
    res["detail"] = (f"{len(variants)} variant{'s' if len(variants) > 1 else ''}, documents {list(DOCS)}; worst "
                     f"{worst['variant']}: {worst['worst']} max error {worst['err']:.3g}, bound {worst['bound']:.3g}")
    res["variants"] = variants
    if res["class"] is None:
        del res["class"]
    return res


def _init_params(cls):
    import inspect

    if cls is None:
        return {}
    try:
        return inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
