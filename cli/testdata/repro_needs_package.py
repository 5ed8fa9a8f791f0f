"""A Python kernel for `flashcheck repro`'s test (cli/repro_python_test.sh) whose package is missing: its script must
exit 2 (this machine cannot run the case), not 1 (reproduced)."""
CONTRACT = {"summary": "needs a package no machine has (repro's test kernel)", "device": "cpu",
            "features": {"bottom_right": "native", "window": "native", "softcap": "native", "gqa": "native",
                         "varlen": "native"},
            "dtypes": ["fp32"], "max_head_dim": 256,
            "empty_row": "zero", "returns_lse": False, "deterministic": True}


def attention(q, k, v, out, lse, args):
    import flashcheck_no_such_attention_package
    flashcheck_no_such_attention_package.attention(q, k, v, out)
