"""flash-attn's parametrized grid, for those who want it beside the fuzzing: the shapes of FlashAttention-2's
`test_flash_attn_output` (tests/test_flash_attn.py: batch 4, 9 query heads as MHA, GQA 3:1 or MQA, the listed head
dims and (seqlen_q, seqlen_k) pairs, causal, local windows, fp16 and bf16) as fixture-format cases, and
``check_case`` to judge one case on a kernel by the engine's rule::

    @pytest.mark.parametrize("case", flashcheck.grid.fa_grid(head_dims=[64, 128]))
    def test_grid(case):
        flashcheck.grid.check_case(my_attention, case)

A case outside the kernel's contract raises ``Unsupported`` (a skip under pytest, not a pass).
"""
from __future__ import annotations

import json
import random
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Sequence, Tuple

from . import _engine
from .check import CheckError, kernel_spec

FA_SEQLENS: Tuple[Tuple[int, int], ...] = ((113, 203), (128, 217), (113, 211), (108, 256), (256, 512), (512, 256),
                                           (1024, 1024), (1023, 1024), (1024, 1023), (2048, 2048))
FA_HEAD_DIMS: Tuple[int, ...] = (32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256)


class Unsupported(CheckError):
    """The case is outside the kernel's contract: not a pass (the pytest plugin reports it as a skip)."""


def fa_grid(seqlens: Iterable[Tuple[int, int]] = FA_SEQLENS, head_dims: Iterable[int] = FA_HEAD_DIMS,
            causal: Sequence[bool] = (False, True), local: Sequence[bool] = (False, True),
            mha_types: Sequence[str] = ("mha", "gqa", "mqa"), dtypes: Sequence[str] = ("fp16", "bf16"),
            softcap: Sequence[float] = (0.0,), batch: int = 4, heads: int = 9, backward: bool = False):
    """The grid as pytest params of fixture-format cases (fixtures/README.md), each with a readable id. A local case
    draws its window from a generator seeded by the case's shape, as flash-attn's tests seed theirs."""
    import pytest
    params = []
    for (lq, lk) in seqlens:
        for d in head_dims:
            for is_causal in causal:
                for is_local in local:
                    for mha in mha_types:
                        for dt in dtypes:
                            for cap in softcap:
                                name = (f"L{lq}x{lk}-d{d}-{mha}-{dt}{'-causal' if is_causal else ''}"
                                        f"{'-local' if is_local else ''}{f'-softcap{cap:g}' if cap else ''}")
                                window = [-1, -1]
                                if is_local:
                                    draw = random.Random(name)
                                    window = [draw.randrange(lk), 0 if is_causal else draw.randrange(lk)]
                                # flash-attn: nheads_k = nheads for MHA, 1 for MQA, 3 for GQA
                                kv_heads = {"mha": heads, "mqa": 1, "gqa": 3}[mha]
                                case = {"name": name, "dtype": dt, "heads": heads, "kv_heads": kv_heads,
                                        "head_dim": d, "v_head_dim": d, "causal": is_causal,
                                        "window": window, "softcap": cap, "layout": "varlen",
                                        "seqs": [{"q_len": lq, "k_len": lk}] * batch, "data": {"seed": 0}}
                                if backward:
                                    case["dout"] = {"dist": "normal", "scale": 1.0}
                                params.append(pytest.param(case, id=name))
    return params


def check_case(fn, case: dict, property: Optional[str] = None, out=None, timeout: float = 600) -> str:
    """Judges one fixture-format case on `fn` (a py: kernel function or a kernel name) with `property` (default
    conformance, grad-conformance for a case with a dout recipe). Returns the verdict line; raises AssertionError
    with the verdict line, the case's fixture file and the replay command when it fails, Unsupported when the case
    is outside the kernel's contract, CheckError when it cannot run."""
    __tracebackhide__ = True
    # Without `out`, a folder of its own that is kept only for a failure (its message names the fixture in it).
    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="flashcheck-case-"))
    folder.mkdir(parents=True, exist_ok=True)
    keep = out is not None
    spec, extra = kernel_spec(fn, folder=folder / "kernels")
    prop = property or ("grad-conformance" if "dout" in case else "conformance")
    fixture = folder / f"{case.get('name', 'case')}.json"
    fixture.write_text(json.dumps({"schema": "flashcheck.fixture/1", "property": prop, "cases": [case]}, indent=1))
    try:
        done = _engine.run(["replay", fixture, "--kernel", spec, "--json", "--verbose", "--timeout", timeout],
                           extra_paths=extra)
        keep = keep or done.returncode != 0
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    if done.returncode not in (0, 1):
        raise CheckError(f"flashcheck replay {fixture} exited {done.returncode}: {done.stderr.strip()}")
    records = json.loads(done.stdout)["records"]
    if not records:
        raise CheckError(f"flashcheck replay {fixture}: no record")
    r = records[0]
    if r["outcome"] == "unsupported":
        raise Unsupported(f"{spec}: {r.get('reason', '')}")
    if r["verdict"] != "pass":
        raise AssertionError(f"{prop}: {r.get('line') or r['verdict']}\n  fixture: {fixture}\n"
                             f"  reproduce: flashcheck replay {shlex.quote(str(fixture))} --kernel {shlex.quote(spec)}")
    return r.get("line", "pass")
