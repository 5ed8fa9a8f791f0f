"""tools/hf_crosscheck/gemma2_sdpa_softcap.py — a tiny random Gemma2 (attn_logit_softcapping 1.0, weights x8 so that the
logits reach the cap) run with the installed transformers: its default attention implementation, then the logits
under "eager" and "sdpa". Where SDPA drops the softcap (v4.53 - v5.20, fixture hf-S1) the two differ by O(1);
from v5.21.0 "sdpa" raises ValueError. Run: tools/hf_live/python.sh 5.17.0 tools/hf_crosscheck/gemma2_sdpa_softcap.py"""
import torch, transformers
from transformers import Gemma2Config, Gemma2ForCausalLM
torch.manual_seed(0)
cfg = Gemma2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, attn_logit_softcapping=1.0, final_logit_softcapping=None,
                   sliding_window=4096, query_pre_attn_scalar=16)
m = Gemma2ForCausalLM(cfg).eval()
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, torch.nn.Linear): mod.weight.mul_(8)
print("transformers", transformers.__version__, "default attn:", m.config._attn_implementation)
ids = torch.randint(0, 64, (1, 12))
outs = {}
for impl in ("eager", "sdpa"):
    m.config._attn_implementation = impl
    try:
        with torch.no_grad(): outs[impl] = m(ids).logits
    except Exception as e:
        outs[impl] = None; print(impl, "raises", type(e).__name__, str(e)[:90])
if all(v is not None for v in outs.values()):
    print("max |sdpa - eager| logits:", (outs["sdpa"] - outs["eager"]).abs().max().item(), " max |eager|:", outs["eager"].abs().max().item())
