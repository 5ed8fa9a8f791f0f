"""The installed transformers, whatever its release (4.42 to 5.x), driven at one attention layer the way a model
drives it: the objects a model holds (a LlamaConfig, the DynamicCache or StaticCache holding the past), the 4D
or 2D mask its masking code builds for the attention implementation, K/V as the layer's own cache update returns
them, then the registered attention function (eager_attention_forward of models/llama/modeling_llama.py, or
gemma2's with softcap; integrations/flash_attention.py and integrations/sdpa_attention.py).

Nothing is keyed on a version number: every entry point is probed (does the module, function or parameter exist)
and called with what it accepts. A probe that finds nothing usable raises ApiBreak naming what is missing.
Shared by tools/hf_live/live.py (the live mode) and tools/hf_crosscheck/crosscheck.py (the profiles' check).

Layout: the export's tensors are q [B, Lq, Hq, D], k/v [B, Lk, Hkv, D] (Lk = static_cache_len or past + q_len),
attention_mask [B, past + q_len], position_ids [rows, Lq] or [3, rows, Lq]; see cli/cmd_export.cc.
"""
import copy
import importlib
import inspect
import os
import sys

SCHEMA = "flashcheck.export/1"


class ApiBreak(Exception):
    """The release lacks, or changed, an entry point the harness needs."""


class NotInRelease(ApiBreak):
    """The case uses a feature this release does not have (a bidirectional decoder layer before 5.x): the path is
    unsupported there, not broken."""


class BadInput(Exception):
    pass


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _accepts(fn, name):
    p = _params(fn)
    return name in p or any(v.kind == inspect.Parameter.VAR_KEYWORD for v in p.values())


def _has_param(fn, name):
    return name in _params(fn)


def call_with(fn, **kwargs):
    """Calls fn with the keyword arguments it names (all of them when it takes **kwargs)."""
    p = _params(fn)
    if any(v.kind == inspect.Parameter.VAR_KEYWORD for v in p.values()):
        return fn(**kwargs)
    return fn(**{k: v for k, v in kwargs.items() if k in p})


# ------------------------------------------------------------------------------------------------------------
# Cases


class Case:
    """One model case of an export directory, as tensors."""

    def __init__(self, torch, entry, root):
        from safetensors.torch import load_file

        self.name = entry["name"]
        self.entry = entry
        c = entry["case"]
        self.c = c
        self.dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[c["dtype"]]
        self.B, self.Lq, self.Hq, self.Hkv, self.D = (int(c["batch"]), int(c["q_len"]), int(c["heads"]),
                                                      int(c["kv_heads"]), int(c["head_dim"]))
        self.P = int(c.get("past") or 0)
        self.causal = bool(c.get("causal", True))
        self.W = c.get("sliding_window")
        self.softcap = c.get("softcap")
        self.scale = c.get("scale")
        self.scaling = float(self.scale) if self.scale is not None else self.D ** -0.5
        self.static_len = c.get("static_cache_len")
        self.use_cache = bool(c.get("use_cache", False)) or self.P > 0 or self.static_len is not None
        ql = c.get("query_length")
        self.query_length = int(ql) if ql is not None else self.Lq
        self.pos3d = bool(c.get("position_ids_3d", False))
        self.varlen_kwargs = c.get("varlen_kwargs")
        self.via_generate = bool(c.get("via_generate", False))
        self.Lk = int(self.static_len) if self.static_len is not None else self.P + self.Lq
        if min(self.B, self.Lq, self.Hq, self.Hkv, self.D) <= 0 or self.Hq % self.Hkv:
            raise BadInput(f"{self.name}: bad sizes batch {self.B}, q_len {self.Lq}, heads {self.Hq}/{self.Hkv}, "
                           f"head_dim {self.D}")
        try:
            t = load_file(os.path.join(root, entry["tensors"]))
        except Exception as e:  # noqa: BLE001 - any reader error is bad input
            raise BadInput(f"{self.name}: cannot read {entry['tensors']}: {e}")
        self.t = t

        def need(key, shape, dtype=None):
            if key not in t:
                raise BadInput(f"{self.name}: {entry['tensors']} has no tensor '{key}'")
            if list(t[key].shape) != list(shape):
                raise BadInput(f"{self.name}: tensor '{key}' has shape {list(t[key].shape)}, want {list(shape)}")
            if dtype is not None and t[key].dtype != dtype:
                raise BadInput(f"{self.name}: tensor '{key}' has dtype {t[key].dtype}, want {dtype}")
            return t[key]

        self.q = need("q", [self.B, self.Lq, self.Hq, self.D], self.dtype)
        self.k = need("k", [self.B, self.Lk, self.Hkv, self.D], self.dtype)
        self.v = need("v", [self.B, self.Lk, self.Hkv, self.D], self.dtype)
        self.eager_out = t.get("eager_out")
        if self.static_len is not None and self.static_len < self.P + self.Lq:
            raise BadInput(f"{self.name}: static_cache_len {self.static_len} < past + q_len")
        if c.get("attention_mask") is not None:
            self.mask2d = t["attention_mask"].to(torch.int64) if "attention_mask" in t else \
                torch.tensor(c["attention_mask"], dtype=torch.int64)
            if self.mask2d.dim() != 2 or self.mask2d.shape[0] != self.B:
                raise BadInput(f"{self.name}: attention_mask has shape {list(self.mask2d.shape)}, want [{self.B}, Lm]")
        else:
            self.mask2d = None
        if c.get("position_ids") is not None:
            if "position_ids" in t:
                self.pos_attn = t["position_ids"].to(torch.int64)
            else:
                p2 = torch.tensor(c["position_ids"], dtype=torch.int64)
                self.pos_attn = p2[None].expand(3, -1, -1).contiguous() if self.pos3d else p2
        else:
            self.pos_attn = None  # the model's default: cache_position.unsqueeze(0), built where needed
        self.pos_mask = self.pos_attn[0] if (self.pos_attn is not None and self.pos3d) else self.pos_attn

    def default_position_ids(self, torch):
        return torch.arange(self.P, self.P + self.Lq, dtype=torch.int64)[None]

    def model_position_ids(self, torch):
        """position_ids as the decoder layer forwards them: the caller's, else the model's default arange."""
        return self.pos_attn if self.pos_attn is not None else self.default_position_ids(torch)

    def with_inputs(self, q, k, v):
        """This case with other q, k, v tensors (the backward's leaves that require grad)."""
        other = copy.copy(self)
        other.q, other.k, other.v = q, k, v
        return other

    def training_shaped(self):
        """None when a training step could make this call (no past, no KV cache, not inside generate()), else
        why not: the backward is checked on those cases only."""
        if self.P > 0 or self.static_len is not None or self.use_cache:
            return "a KV cache or past is inference only: training runs the whole sequence without a cache"
        if self.via_generate:
            return "generate() is inference only"
        return None


def load_manifest(root):
    import json

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
    if not isinstance(manifest.get("cases"), list):
        raise BadInput(f"{path}: 'cases' is not a list")
    for i, entry in enumerate(manifest["cases"]):
        if not isinstance(entry, dict) or not all(k in entry for k in ("name", "case", "tensors")):
            raise BadInput(f"{path}: cases[{i}] lacks name, case or tensors")
    return manifest


# ------------------------------------------------------------------------------------------------------------
# The release


class Release:
    """Probes of one installed transformers. Construct after fa_kernels.install() (or with flash=False)."""

    sliding_cache = "full"
    last_flash_mask = None  # what run_flash passed, for the cross-check's branch label
    last_flash_kwargs = None
    last_sdpa_mask = None  # what run_sdpa passed to the attention function

    def __init__(self, flash=True):
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        import torch

        self.torch = torch
        # flash-attn's availability checks also want CUDA; the stand-in kernels run anywhere, so the checks are
        # answered before any module binds them.
        import transformers.utils as tu
        import transformers.utils.import_utils as iu

        self.flash_patched = []
        if flash:
            for mod in (iu, tu):
                for name in ("is_flash_attn_2_available", "is_flash_attn_greater_or_equal_2_10"):
                    if hasattr(mod, name):
                        setattr(mod, name, lambda *a, **k: True)
                        self.flash_patched.append(f"{mod.__name__}.{name}")
            for name in ("is_flash_attn_3_available", "is_flash_attn_4_available"):
                for mod in (iu, tu):
                    if hasattr(mod, name):
                        setattr(mod, name, lambda *a, **k: False)
        import transformers

        self.transformers = transformers
        self.version = transformers.__version__
        transformers.logging.set_verbosity_error()
        self.fau = importlib.import_module("transformers.modeling_flash_attention_utils")
        try:
            self.masking_utils = importlib.import_module("transformers.masking_utils")
        except ImportError:
            self.masking_utils = None  # before v4.53 every model built its own mask (_update_causal_mask)
        self.llama = importlib.import_module("transformers.models.llama.modeling_llama")
        self.gemma2 = importlib.import_module("transformers.models.gemma2.modeling_gemma2")
        self.attention_functions = None
        try:
            mu = importlib.import_module("transformers.modeling_utils")
            self.attention_functions = getattr(mu, "ALL_ATTENTION_FUNCTIONS", None)
        except ImportError:
            pass
        try:
            self.fai = importlib.import_module("transformers.integrations.flash_attention")
        except ImportError:
            self.fai = None
        try:
            self.sdpai = importlib.import_module("transformers.integrations.sdpa_attention")
        except ImportError:
            self.sdpai = None

    # --- what a model holds ------------------------------------------------------------------------------------

    def config(self, case, attn_implementation):
        cfg = self.transformers.LlamaConfig(
            vocab_size=16, hidden_size=case.Hq * case.D, intermediate_size=16, num_hidden_layers=1,
            num_attention_heads=case.Hq, num_key_value_heads=case.Hkv, head_dim=case.D, max_position_embeddings=4096)
        cfg._attn_implementation = attn_implementation
        cfg.is_causal = case.causal
        if case.W is not None:
            cfg.sliding_window = int(case.W)
        return cfg

    def make_cache(self, case):
        """(cache or None, k_new, v_new) with the first P columns stored; k/v in [B, H, L, D]. A sliding-window
        dynamic cache is a plain DynamicCache (the export's K/V hold the whole history) unless sliding_cache is
        "model": DynamicCache(config=config) as Mistral/Gemma2 build it."""
        torch, tr = self.torch, self.transformers
        k, v = case.k.transpose(1, 2), case.v.transpose(1, 2)
        if case.static_len is not None:
            cfg = tr.LlamaConfig(vocab_size=16, hidden_size=case.Hq * case.D, intermediate_size=16,
                                 num_hidden_layers=1, num_attention_heads=case.Hq, num_key_value_heads=case.Hkv,
                                 head_dim=case.D)
            cache, errors = None, []
            for kw in ({"config": cfg, "max_cache_len": int(case.static_len)},
                       {"config": cfg, "max_batch_size": case.B, "max_cache_len": int(case.static_len),
                        "device": "cpu", "dtype": case.dtype},
                       {"config": cfg, "batch_size": case.B, "max_cache_len": int(case.static_len), "device": "cpu",
                        "dtype": case.dtype}):
                try:
                    cache = tr.StaticCache(**kw)
                    # 5.x initializes its layers lazily; 4.x allocates now and must match the case
                    break
                except TypeError as e:
                    errors.append(str(e))
            if cache is None:
                raise ApiBreak(f"StaticCache: no known constructor fits ({'; '.join(errors)})")
        elif case.use_cache:
            if case.W is not None and self.sliding_cache == "model":
                cache = tr.DynamicCache(config=self.config(case, "eager"))
            else:
                cache = tr.DynamicCache()
        else:
            cache = None
        if cache is not None and case.P > 0:
            self.cache_update(cache, k[:, :, :case.P].contiguous(), v[:, :, :case.P].contiguous(), 0, case.P)
        return cache, k[:, :, case.P:case.P + case.Lq], v[:, :, case.P:case.P + case.Lq]

    def cache_update(self, cache, k, v, start, end):
        cache_position = self.torch.arange(start, end, dtype=self.torch.int64)
        return cache.update(k, v, 0, {"cache_position": cache_position})

    def layer_kv(self, case, cache, k_new, v_new):
        if cache is None:
            return k_new, v_new
        return self.cache_update(cache, k_new.contiguous(), v_new.contiguous(), case.P, case.P + case.Lq)

    def module(self, cfg, case, training=False):
        nn = self.torch.nn

        class AttentionStub(nn.Module):
            def __init__(self):
                super().__init__()
                self.config = cfg
                self.layer_idx = 0
                self.is_causal = case.causal
                self.head_dim = case.D
                self.num_key_value_groups = case.Hq // case.Hkv
                self.scaling = case.scaling
                self.attention_dropout = 0.0
                # get_target_dtype() looks at the first nn.Linear for fp32 queries: the weights have the case dtype
                self.o_proj = nn.Linear(1, 1, bias=False, dtype=case.dtype)

        m = AttentionStub()
        m.train(training)  # dropout stays 0.0: it is passed explicitly
        return m

    def _grad_mode(self, grad):
        """Autograd on for the backward (grad=True), off for the forward checks."""
        return self.torch.enable_grad() if grad else self.torch.no_grad()

    # --- masks --------------------------------------------------------------------------------------------------

    def build_mask(self, case, attn_implementation, cache):
        """The mask the model hands its attention function: masking_utils' create_(sliding_window_)causal_mask
        (v4.53+), else the model's own _update_causal_mask."""
        torch = self.torch
        cfg = self.config(case, attn_implementation)
        embeds = torch.zeros(case.B, case.Lq, 1, dtype=case.dtype)
        cache_position = torch.arange(case.P, case.P + case.Lq, dtype=torch.int64)
        mu = self.masking_utils
        if not case.causal and attn_implementation != "flash_attention_2" and not self._masks_read_is_causal():
            raise NotInRelease(f"transformers {self.version}'s masks are causal only (config.is_causal arrived in 5.x)")
        if mu is not None:
            name = "create_sliding_window_causal_mask" if case.W is not None else "create_causal_mask"
            fn = getattr(mu, name, None)
            if fn is None:
                raise ApiBreak(f"masking_utils.{name} is missing")
            # A model always passes position_ids (its default is cache_position.unsqueeze(0)): v4.53.3 - v4.57's
            # find_packed_sequence_indices then answers even for one sequence, which keeps SDPA's mask.
            pos = case.pos_mask if case.pos_mask is not None else case.default_position_ids(torch)
            kwargs = {"config": cfg, "attention_mask": case.mask2d, "past_key_values": cache, "position_ids": pos}
            kwargs["inputs_embeds" if _has_param(fn, "inputs_embeds") else "input_embeds"] = embeds
            if _has_param(fn, "cache_position"):
                kwargs["cache_position"] = cache_position
            if not _has_param(fn, "position_ids"):
                kwargs.pop("position_ids")  # v4.53: masks know no packed sequences
            return fn(**kwargs)
        return self._legacy_mask(case, cfg, embeds, cache_position, cache)

    def _masks_read_is_causal(self):
        if self.masking_utils is None:
            return False
        try:
            src = inspect.getsource(self.masking_utils)
        except (OSError, TypeError):
            return False
        return 'getattr(config, "is_causal"' in src or "config.is_causal" in src

    def _legacy_mask(self, case, cfg, embeds, cache_position, cache):
        tr = self.transformers
        model_cls = tr.MistralModel if case.W is not None else tr.LlamaModel
        if case.softcap is not None:
            model_cls = tr.Gemma2Model
        fn = getattr(model_cls, "_update_causal_mask", None)
        if fn is None:
            raise ApiBreak(f"neither masking_utils nor {model_cls.__name__}._update_causal_mask exist")
        stub = type("ModelStub", (), {})()
        stub.config = cfg
        stub.training = False
        stub.dtype = case.dtype
        stub.device = self.torch.device("cpu")
        for name in ("_prepare_4d_causal_attention_mask_with_cache_position", "_ignore_causal_mask_sdpa"):
            if hasattr(model_cls, name):
                setattr(stub, name, getattr(model_cls, name))
        return call_with(fn.__get__(stub), attention_mask=case.mask2d, input_tensor=embeds,
                         cache_position=cache_position, past_key_values=cache, output_attentions=False,
                         use_cache=cache is not None)

    # --- the three paths --------------------------------------------------------------------------------------

    def _attention_function(self, name):
        if self.attention_functions is not None:
            try:
                return self.attention_functions[name]
            except KeyError:
                pass
        return None

    def eager_fn(self, case):
        mod = self.gemma2 if case.softcap is not None else self.llama
        fn = getattr(mod, "eager_attention_forward", None)
        if fn is None:
            raise ApiBreak(f"{mod.__name__}.eager_attention_forward is missing (before v4.48 eager lived in the "
                           "attention class)")
        return fn

    def run_eager(self, case, grad=False):
        """(out [B, Lq, Hq, D], the 4D mask eager used, or None). grad: keep the autograd graph (a training step)."""
        cache, k_new, v_new = self.make_cache(case)
        mask = self.build_mask(case, "eager", cache)
        k, v = self.layer_kv(case, cache, k_new, v_new)
        module = self.module(self.config(case, "eager"), case, training=grad)
        kwargs = {"dropout": 0.0, "scaling": case.scaling}
        if case.softcap is not None:
            kwargs["softcap"] = float(case.softcap)
        if case.W is not None:
            kwargs["sliding_window"] = int(case.W)
        with self._grad_mode(grad):
            out, _ = self.eager_fn(case)(module, case.q.transpose(1, 2), k, v, mask, **kwargs)
        return out, mask

    def generate_kwargs(self, case, cache):
        """The cu_seq_lens/max_length kwargs that this release's generate() adds for flash attention
        (GenerationMixin.prepare_inputs_for_generation; v4.54-4.55 only), or {}."""
        torch, tr = self.torch, self.transformers
        cfg = self.config(case, "eager")
        model = tr.LlamaForCausalLM(cfg).eval()
        model.config._attn_implementation = "flash_attention_2"
        input_ids = torch.zeros(case.B, case.P + case.Lq, dtype=torch.int64)
        kwargs = {"past_key_values": cache, "use_cache": True, "position_ids": case.model_position_ids(torch)
                  .expand(case.B, -1) if case.pos_attn is None or case.pos_attn.shape[0] == 1 else case.pos_attn,
                  "cache_position": torch.arange(case.P, case.P + case.Lq)}
        if case.mask2d is not None:
            kwargs["attention_mask"] = case.mask2d
        inputs = model.prepare_inputs_for_generation(input_ids, **kwargs)
        return {k: inputs[k] for k in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
                if inputs.get(k) is not None}

    def flash_kwargs(self, case, cache):
        torch = self.torch
        kwargs = {"position_ids": case.model_position_ids(torch)}
        vk = case.varlen_kwargs
        if vk is not None:
            for name in ("cu_seq_lens_q", "cu_seq_lens_k"):
                if vk.get(name) is not None:
                    kwargs[name] = torch.tensor(vk[name], dtype=torch.int32)
            for name in ("max_length_q", "max_length_k"):
                if vk.get(name) is not None:
                    kwargs[name] = int(vk[name])
        elif case.via_generate:
            kwargs.update(self.generate_kwargs(case, cache))
        return kwargs

    def run_flash(self, case, grad=False):
        """The flash path's output [B, Lq, Hq, D] (whatever the release returns). grad: keep the autograd graph."""
        cache, k_new, v_new = self.make_cache(case)
        mask = self.build_mask(case, "flash_attention_2", cache)
        gen_cache = None
        if case.via_generate and case.varlen_kwargs is None:
            gen_cache, _, _ = self.make_cache(case)  # prepare_inputs_for_generation reads the cache before the step
        kwargs = self.flash_kwargs(case, gen_cache if gen_cache is not None else cache)
        self.last_flash_mask, self.last_flash_kwargs = mask, kwargs
        k, v = self.layer_kv(case, cache, k_new, v_new)
        cfg = self.config(case, "flash_attention_2")
        module = self.module(cfg, case, training=grad)
        q = case.q.transpose(1, 2)
        sliding = int(case.W) if case.W is not None else None
        softcap = float(case.softcap) if case.softcap is not None else None
        fn = self._attention_function("flash_attention_2")
        with self._grad_mode(grad):
            if fn is not None and case.query_length == case.Lq:
                out, _ = fn(module, q, k, v, mask, dropout=0.0, scaling=case.scaling, sliding_window=sliding,
                            softcap=softcap, **kwargs)
                return out
            # A sequence-parallel patch (or a release before integrations/flash_attention.py) calls the dispatch
            # itself, with the rest as the integration would pass it.
            fa = getattr(self.fau, "_flash_attention_forward", None)
            if fa is None:
                raise ApiBreak("modeling_flash_attention_utils._flash_attention_forward is missing")
            qf, kf, vf = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            top_left = getattr(self.fai, "_use_top_left_mask", False) if self.fai is not None else False
            args = dict(query_states=qf, key_states=kf, value_states=vf, attention_mask=mask,
                        query_length=case.query_length, is_causal=case.causal, dropout=0.0,
                        softmax_scale=case.scaling, sliding_window=sliding, softcap=softcap,
                        use_top_left_mask=top_left, target_dtype=None, attn_implementation="flash_attention_2",
                        implementation="flash_attention_2", layer_idx=0, **kwargs)
            return call_with(fa, **args)

    def run_sdpa(self, case, grad=False):
        torch = self.torch
        fn = self._attention_function("sdpa")
        if fn is None:
            raise ApiBreak("no 'sdpa' in ALL_ATTENTION_FUNCTIONS (integrations/sdpa_attention.py is v4.48+)")
        cache, k_new, v_new = self.make_cache(case)
        mask = self.build_mask(case, "sdpa", cache)
        k, v = self.layer_kv(case, cache, k_new, v_new)
        module = self.module(self.config(case, "sdpa"), case, training=grad)
        kwargs = {"dropout": 0.0, "scaling": case.scaling, "position_ids": case.model_position_ids(torch)}
        if case.W is not None:
            kwargs["sliding_window"] = int(case.W)
        if case.softcap is not None:
            kwargs["softcap"] = float(case.softcap)  # as Gemma2's attention passes it to every implementation
        self.last_sdpa_mask = mask
        with self._grad_mode(grad):
            out, _ = fn(module, case.q.transpose(1, 2), k, v, mask, **kwargs)
        return out


def add_path(path):
    if path and path not in sys.path:
        sys.path.insert(0, path)
