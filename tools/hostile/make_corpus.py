#!/usr/bin/env python3
"""Builds the hostile-input corpus of issue 15: malformed variants of the project's own fixtures, and
hostile command lines, for tools/hostile/run_corpus.py to replay against `flashcheck`.

    python3 tools/hostile/make_corpus.py --out build/hostile [--seed 1] [--fixtures fixtures]

Writes OUT/files/<class>/<n>.json (plus safetensors files, FIFOs and symlinks next to them) and
OUT/manifest.json: one entry per file, {"path", "class", "refuse", "field", "scope"}. "refuse" is true when
the file is invalid and flashcheck must refuse it (exit 2); "field" is the JSON path the error should name,
"scope" the case it sits in (a message naming either counts as naming the problem). OUT/commands.json holds
the hostile command lines with what each must do. Deterministic for a seed; about 4,000 files, about 30 MB
on disk (a 5 GiB file among them is sparse).

The classes follow issue 15: truncations, wrong types, missing and unknown fields, extreme integers,
NaN/Infinity and out-of-range number literals, deep nesting, duplicate keys, non-UTF-8, huge strings,
`tensors` naming missing files, folders, /dev/zero, FIFOs, symlink loops and links out of the folder,
corrupted safetensors, sizes whose products overflow, expectations naming unknown kernels, and non-objects.
"""
import argparse
import copy
import json
import os
import random
import shutil
import struct

SCHEMA = "flashcheck.fixture/1"
I64 = 2**63
U64 = 2**64

# Valid ranges of integer fields (core/input_limits.h, core/kernel_case.cc, core/model_case.cc), by the last
# component of their JSON path. A value outside must be refused; one inside may still be refused by a rule
# between fields (or the memory limit), so it is "any".
KERNEL_RANGES = {
    "heads": (1, 65535), "kv_heads": (1, 65535), "head_dim": (1, 65535), "v_head_dim": (1, 65535),
    "window": (-1, 2**40), "page_size": (1, 2**32), "extra_pages": (0, 2**32), "table_seed": (0, U64 - 1),
    "seed": (0, U64 - 1), "block_table": (0, 2**31 - 1), "q_len": (0, 2**32 - 1), "k_len": (0, 2**32 - 1),
    "seqused_k": (0, 2**32 - 1), "leftpad_k": (0, 2**32 - 1), "cache_len": (0, 2**32 - 1), "new_len": (0, 2**32 - 1),
}
MODEL_RANGES = {
    "batch": (1, 4096), "q_len": (1, 65536), "past": (0, 65536), "heads": (1, 1024), "kv_heads": (1, 1024),
    "head_dim": (1, 512), "sliding_window": (1, 2**31), "query_length": (1, 65536), "static_cache_len": (1, 2**20),
    "attention_mask": (0, 2**31 - 1), "position_ids": (0, 2**31 - 1), "cu_seq_lens_q": (0, 2**31 - 1),
    "cu_seq_lens_k": (0, 2**31 - 1), "max_length_q": (0, 2**31 - 1), "max_length_k": (0, 2**31 - 1), "seed": (0, U64 - 1),
}
# Integers written as JSON text: some are not representable as int64 and become floats in the parser.
EXTREME_INTS = ["-1", "0", "2147483647", "4294967296", "9007199254740993", "9223372036854775807",
                "9223372036854775808", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
                "-9223372036854775809", "1e20", "99999999999999999999", "1.5", "-0.0", "1e308"]
BAD_LITERALS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "0x10", "+1", "01", "1.", ".5", "1e", "-", "1e+"]
REQUIRED_KERNEL = ["dtype", "heads", "head_dim", "seqs"]
REQUIRED_SEQ = ["q_len", "k_len"]
REQUIRED_MODEL = ["dtype", "q_len", "heads", "head_dim"]


def path_str(path):
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + p
    return out


def scope_of(path):
    """The case a path sits in: cases[i] or model_cases[i] (or "" at the top level)."""
    if len(path) >= 2 and path[0] in ("cases", "model_cases"):
        return path_str(path[:2])
    return ""


def leaves(node, path=()):
    """Every (path, value) of a parsed document, containers included."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, path + (i,))


def get(node, path):
    for p in path:
        node = node[p]
    return node


def put(node, path, value):
    get(node, path[:-1])[path[-1]] = value


def field_name(path):
    """The integer field a path is: its last string component ('window' for window[0])."""
    for p in reversed(path):
        if isinstance(p, str):
            return p
    return ""


def with_token(doc, path, token):
    """The document's text with the value at `path` replaced by raw JSON text `token`."""
    marker = "__HOSTILE_TOKEN__"
    d = copy.deepcopy(doc)
    put(d, path, marker)
    return json.dumps(d, indent=1).replace(json.dumps(marker), token, 1)


class Corpus:
    def __init__(self, out, rng):
        self.out = out
        self.rng = rng
        self.entries = []
        self.count = {}

    def name(self, cls, ext=".json"):
        n = self.count.get(cls, 0)
        self.count[cls] = n + 1
        folder = os.path.join(self.out, "files", cls)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, f"{n:05d}{ext}")

    def add(self, cls, content, refuse, field=None, scope=None, path=None):
        """Writes one variant (bytes or str) and records what flashcheck must do with it."""
        path = path or self.name(cls)
        if content is not None:
            with open(path, "wb") as f:
                f.write(content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content)
        self.entries.append({"path": os.path.relpath(path, self.out), "class": cls, "refuse": refuse,
                             "field": field, "scope": scope})
        return path


def load_seeds(fixtures):
    seeds = []
    for root, _, files in os.walk(fixtures):
        for f in sorted(files):
            if f.endswith(".json") and "hostile" not in os.path.relpath(root, fixtures):
                with open(os.path.join(root, f)) as fh:
                    seeds.append((f, json.load(fh)))
    seeds.sort()
    # Shapes the project's fixtures do not all have: paging with an explicit table, a cache, seqused/leftpad.
    seeds.append(("synthetic-paged.json", {"schema": SCHEMA, "title": "paged", "cases": [{
        "dtype": "fp16", "heads": 4, "kv_heads": 2, "head_dim": 16, "window": [3, 0], "causal": True,
        "kv": {"storage": "paged", "page_size": 4, "extra_pages": 2, "block_table": [[3, 0], [1]]},
        "seqs": [{"q_len": 3, "k_len": 7}, {"q_len": 1, "k_len": 2}], "data": {"seed": 5, "dist": "uniform"}}]}))
    seeds.append(("synthetic-cache.json", {"schema": SCHEMA, "title": "cache", "cases": [{
        "dtype": "bf16", "heads": 2, "head_dim": 8, "v_head_dim": 16, "softcap": 30.0, "scale": 0.5,
        "kv": {"cache": True, "storage": "paged", "page_size": 3, "table_seed": 9},
        "seqs": [{"q_len": 2, "k_len": 6, "cache_len": 3, "new_len": 2, "leftpad_k": 1}],
        "expect": {"tiled-cpu": {"verdict": "pass", "why": "a plain case"}}}]}))
    seeds.append(("synthetic-seqused.json", {"schema": SCHEMA, "title": "seqused", "cases": [{
        "dtype": "fp32", "heads": 3, "head_dim": 5, "layout": "padded_bshd", "kv": {"strides": "gapped"},
        "seqs": [{"q_len": 2, "k_len": 6, "seqused_k": 4, "leftpad_k": 1}, {"q_len": 0, "k_len": 0}],
        "data": {"v_onehot": True, "poison": False, "q_scale": 2, "seed": 18446744073709551615}}]}))
    seeds.append(("synthetic-model.json", {"schema": SCHEMA, "title": "model", "property": "integration",
        "profiles": ["hf-main"], "model_cases": [{
            "dtype": "bf16", "batch": 2, "q_len": 3, "past": 2, "heads": 4, "kv_heads": 2, "head_dim": 16,
            "sliding_window": 4, "attention_mask": [[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]],
            "position_ids": [[1, 2, 3], [2, 3, 4]], "use_cache": True, "query_length": 3,
            "varlen_kwargs": {"cu_seq_lens_q": [0, 3, 6], "cu_seq_lens_k": [0, 5, 10], "max_length_q": 3, "max_length_k": 5},
            "data": {"seed": 3}}]}))
    return seeds


def text_of(doc):
    return json.dumps(doc, indent=1)


def gen_truncations(c, seeds):
    for _, doc in seeds:
        t = text_of(doc)
        for cut in sorted({0, 1, len(t) // 2, len(t) - 1} | {c.rng.randrange(len(t)) for _ in range(12)}):
            if 0 <= cut < len(t):
                c.add("truncated", t[:cut], True)


def gen_wrong_types(c, seeds):
    replacements = ["x", [], {}, True, None, 1.5, 7, [1, 2], {"a": 1}]
    for _, doc in seeds:
        paths = [p for p, _ in leaves(doc) if p]
        for path in c.rng.sample(paths, min(len(paths), 15)):
            old = get(doc, path)
            for new in c.rng.sample(replacements, 3):
                if type(new) is type(old) or (isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(new, bool) and not isinstance(old, bool)):
                    continue
                d = copy.deepcopy(doc)
                put(d, path, new)
                # null is "absent" for optional fields, so it may be valid; so may a number where the seed had
                # null (a scale); anything else of the wrong type is refused
                number = isinstance(new, (int, float)) and not isinstance(new, bool)
                refuse = None if new is None or (old is None and number) else True
                c.add("wrong-type", text_of(d), refuse, path_str(path), scope_of(path))


def gen_missing(c, seeds):
    for _, doc in seeds:
        d = copy.deepcopy(doc)
        del d["schema"]
        c.add("missing-field", text_of(d), True, "schema", "")
        for i, case in enumerate(doc.get("cases", [])):
            for k in REQUIRED_KERNEL:
                d = copy.deepcopy(doc)
                d["cases"][i].pop(k, None)
                c.add("missing-field", text_of(d), True, path_str(("cases", i, k)), path_str(("cases", i)))
            for j in range(min(2, len(case.get("seqs", [])))):
                for k in REQUIRED_SEQ:
                    d = copy.deepcopy(doc)
                    d["cases"][i]["seqs"][j].pop(k, None)
                    c.add("missing-field", text_of(d), True, path_str(("cases", i, "seqs", j, k)), path_str(("cases", i)))
        for i, case in enumerate(doc.get("model_cases", [])):
            for k in REQUIRED_MODEL:
                d = copy.deepcopy(doc)
                d["model_cases"][i].pop(k, None)
                c.add("missing-field", text_of(d), True, path_str(("model_cases", i, k)), path_str(("model_cases", i)))


def gen_unknown(c, seeds):
    for _, doc in seeds:
        objects = [p for p, v in leaves(doc) if isinstance(v, dict) and not (p and p[-1] in ("expect", "__metadata__"))]
        for path in c.rng.sample(objects, min(len(objects), 6)):
            d = copy.deepcopy(doc)
            key = c.rng.choice(["windw", "q_lenn", "Heads", "extra", "", "\u00e9t\u00e9"])
            get(d, path)[key] = 1
            c.add("unknown-field", text_of(d), True, path_str(path + (key,)), scope_of(path))


def int_paths(doc):
    for path, v in leaves(doc):
        if isinstance(v, int) and not isinstance(v, bool) and path:
            yield path


def in_range(doc, path, value):
    ranges = MODEL_RANGES if path and path[0] == "model_cases" else KERNEL_RANGES
    lo, hi = ranges.get(field_name(path), (None, None))
    if lo is None:  # a float field (a scale, softcap): any finite value may be valid
        return None
    try:
        v = float(value) if any(ch in value for ch in ".eE") else int(value)
    except ValueError:
        return False
    if isinstance(v, float):
        if v != int(v) or not (-I64 <= v < I64):
            return False
        v = int(v)
    if field_name(path) in ("seed", "table_seed"):
        return "." not in value and "e" not in value.lower() and lo <= v <= hi
    return lo <= v <= hi


def gen_extreme_ints(c, seeds):
    for _, doc in seeds:
        paths = list(int_paths(doc))
        for path in c.rng.sample(paths, min(len(paths), 8)):
            for value in c.rng.sample(EXTREME_INTS, 6):
                ok = in_range(doc, path, value)
                refuse = None if ok is None else not ok
                c.add("extreme-int", with_token(doc, path, value), refuse, path_str(path), scope_of(path))


def gen_bad_literals(c, seeds):
    for _, doc in seeds:
        numbers = [p for p, v in leaves(doc) if isinstance(v, (int, float)) and not isinstance(v, bool) and p]
        for path in c.rng.sample(numbers, min(len(numbers), 3)):
            for token in c.rng.sample(BAD_LITERALS, 3):
                # A literal past double's range is named by its field; a syntax error by its byte and the
                # path the parser was in.
                c.add("number-literal", with_token(doc, path, token), True, path_str(path) if "e4" in token else None,
                      scope_of(path) if "e4" in token else None)


def gen_deep(c, seeds):
    for _, doc in seeds[::3]:
        paths = [p for p, _ in leaves(doc) if p]
        for path in c.rng.sample(paths, min(len(paths), 2)):
            for n in (65, 1000, 20000):
                for token in ("[" * n + "]" * n, '{"a":' * n + "1" + "}" * n, "[" * n):
                    c.add("deep-nesting", with_token(doc, path, token), True, path_str(path), scope_of(path))
    for n in (65, 100000, 1000000):
        c.add("deep-nesting", "[" * n + "]" * n, True)
        c.add("deep-nesting", '{"schema":' * n, True)


def gen_duplicates(c, seeds):
    for _, doc in seeds:
        objects = [p for p, v in leaves(doc) if isinstance(v, dict) and v]
        for path in c.rng.sample(objects, min(len(objects), 5)):
            obj = get(doc, path)
            key = c.rng.choice(list(obj))
            marker = "__HOSTILE_DUP__"
            d = copy.deepcopy(doc)
            get(d, path)[marker] = 0
            token = json.dumps(key) + ": " + json.dumps(c.rng.choice([obj[key], 1, "x", None]))
            text = text_of(d).replace(json.dumps(marker) + ": 0", token, 1)
            c.add("duplicate-key", text, True, path_str(path + (key,)), scope_of(path))


def gen_non_utf8(c, seeds):
    bad = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xe2\x82"]
    for _, doc in seeds:
        strings = [p for p, v in leaves(doc) if isinstance(v, str) and p]
        for path in c.rng.sample(strings, min(len(strings), 4)):
            marker = "__HOSTILE_BYTES__"
            d = copy.deepcopy(doc)
            put(d, path, marker)
            raw = text_of(d).encode()
            for b in c.rng.sample(bad, 3):
                c.add("non-utf8", raw.replace(marker.encode(), b"a" + b + b"z", 1), True)
            c.add("non-utf8", raw.replace(marker.encode(), b"\\ud800", 1), True)       # a lone surrogate escape
            c.add("non-utf8", raw.replace(marker.encode(), b"tab\there", 1), True)      # a raw control character
        t = text_of(doc)
        c.add("non-utf8", t.encode("utf-16"), True)
        c.add("non-utf8", b"\xef\xbb\xbf" + t.encode(), False)  # a UTF-8 byte-order mark: nlohmann skips it


def gen_huge(c, seeds):
    doc = seeds[0][1]
    d = copy.deepcopy(doc)
    d["title"] = "x" * (2 << 20)
    c.add("huge-string", text_of(d), True, "title", "")
    d = copy.deepcopy(doc)
    d["description"] = "y" * ((1 << 20) + 1)
    c.add("huge-string", text_of(d), True, "description", "")
    d = copy.deepcopy(doc)
    d[("k" * ((1 << 20) + 1))] = 1
    c.add("huge-string", text_of(d), True, None, "")
    c.add("huge-string", text_of(doc) + " " * (17 << 20), True)  # a file past the 16 MiB limit
    # Large but legal: many strings just under the limit stay within the file limit and load.
    d = copy.deepcopy(doc)
    d["description"] = "z" * (1 << 19)
    c.add("huge-string", text_of(d), False)


def safetensors(tensors, metadata=None, header_override=None, pad=True):
    header, data, offset = {}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = header_override if header_override is not None else json.dumps(header).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def tensor_case():
    # fp32, one sequence of 2 queries over 3 keys, 1 head of dim 2: q (2,1,2), k and v (3,1,2).
    return {"dtype": "fp32", "heads": 1, "head_dim": 2, "seqs": [{"q_len": 2, "k_len": 3}], "data": {"seed": 1}}


def f32(n, value=0.25):
    return struct.pack("<%df" % n, *([value] * n))


def gen_tensors(c):
    base = {"schema": SCHEMA, "title": "captured", "cases": [tensor_case()]}
    good = {"cases.0.q": ("F32", [2, 1, 2], f32(4)), "cases.0.k": ("F32", [3, 1, 2], f32(6)),
            "cases.0.v": ("F32", [3, 1, 2], f32(6))}
    outside = os.path.join(c.out, "files", "outside.safetensors")
    os.makedirs(os.path.dirname(outside), exist_ok=True)
    with open(outside, "wb") as f:
        f.write(safetensors(good))

    def variant(name_in_doc, make, refuse=True, field="tensors"):
        """A fixture in a folder of its own naming `name_in_doc`; `make(folder)` creates the target."""
        path = c.name("tensors")
        folder = path[:-5] + ".d"
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, "f.json")
        d = copy.deepcopy(base)
        d["tensors"] = name_in_doc
        with open(target, "w") as f:
            f.write(text_of(d))
        if make:
            make(folder)
        c.add("tensors", None, refuse, field, "", path=target)

    def write(name, data):
        return lambda folder: open(os.path.join(folder, name), "wb").write(data)

    variant("t.safetensors", write("t.safetensors", safetensors(good)), refuse=False, field=None)
    variant("missing.safetensors", None)
    variant("dir.safetensors", lambda folder: os.makedirs(os.path.join(folder, "dir.safetensors")), field=None)
    variant("/dev/zero", None)
    variant("/etc/passwd", None)
    variant("../outside.safetensors", None)
    variant("sub/../t.safetensors", write("t.safetensors", safetensors(good)))
    variant("", None)
    variant("zero.safetensors", lambda folder: os.symlink("/dev/zero", os.path.join(folder, "zero.safetensors")))
    variant("null.safetensors", lambda folder: os.symlink("/dev/null", os.path.join(folder, "null.safetensors")))
    variant("fifo.safetensors", lambda folder: os.mkfifo(os.path.join(folder, "fifo.safetensors")), field=None)
    variant("loop.safetensors", lambda folder: os.symlink("loop.safetensors", os.path.join(folder, "loop.safetensors")))
    variant("out.safetensors", lambda folder: os.symlink(outside, os.path.join(folder, "out.safetensors")))
    variant("inside.safetensors", lambda folder: (write("t.safetensors", safetensors(good))(folder),
                                                  os.symlink("t.safetensors", os.path.join(folder, "inside.safetensors"))),
            refuse=False, field=None)

    def sparse(folder):  # 5 GiB of holes: a reader that trusts the size reads it all
        with open(os.path.join(folder, "big.safetensors"), "wb") as f:
            f.write(safetensors(good))
            f.truncate(5 << 30)
    variant("big.safetensors", sparse, field=None)

    # Corrupted files: each names its problem (the file, and the tensor or the header).
    corrupt = [
        b"", b"\x00" * 7, struct.pack("<Q", 0), struct.pack("<Q", 2**64 - 1) + b"{}", struct.pack("<Q", 2**40) + b"{}",
        struct.pack("<Q", 100) + b"{}", safetensors(good)[:-1], safetensors(good) + b"\x00" * 8,
        safetensors(good, header_override=b'{"cases.0.q": '),
        safetensors(good, header_override=b"[" * 100000),
        safetensors(good, header_override=b"[]"),
        safetensors(good, header_override=json.dumps({"cases.0.q": {"dtype": "F32", "shape": [2, 1, 2], "data_offsets": [0, 16]},
                                                      "cases.0.q ": 1}).encode()),
        safetensors(good, metadata={"format": 1}),
        safetensors(good, metadata={"format": "x" * ((1 << 20) + 1)}),
    ]
    def header_with(**changes):
        h = {"cases.0.q": {"dtype": "F32", "shape": [2, 1, 2], "data_offsets": [0, 16]},
             "cases.0.k": {"dtype": "F32", "shape": [3, 1, 2], "data_offsets": [16, 40]},
             "cases.0.v": {"dtype": "F32", "shape": [3, 1, 2], "data_offsets": [40, 64]}}
        for k, v in changes.items():
            h["cases.0." + k[0]][k[2:]] = v
        return json.dumps(h).encode()
    data = f32(16)
    for change in [dict(q_dtype="C64"), dict(q_dtype="I32"), dict(q_dtype=7), dict(q_shape=[-2, 1, 2]),
                   dict(q_shape=[2**62, 2**62, 4]), dict(q_shape=[18446744073709551615]), dict(q_shape=[2.5]),
                   dict(q_shape="2"), dict(q_data_offsets=[16, 0]), dict(q_data_offsets=[0, 2**63]),
                   dict(q_data_offsets=[0, 18446744073709551615]), dict(q_data_offsets=[0]), dict(q_data_offsets=[4, 20]),
                   dict(k_data_offsets=[8, 32]), dict(q_shape=[4, 1, 2], q_data_offsets=[0, 32]),
                   dict(q_shape=[1, 1, 2], q_data_offsets=[0, 8]), dict(q_extra=1)]:
        corrupt.append(struct.pack("<Q", len(header_with(**change))) + header_with(**change) + data)
    corrupt.append(safetensors({"cases.0.q": good["cases.0.q"], "cases.0.k": good["cases.0.k"]}))  # v missing
    corrupt.append(safetensors({k: ("F32", [1, 2, 2] if k == "cases.0.q" else s, r) for k, (_, s, r) in good.items()}))
    corrupt.append(safetensors({k: ("I32", s, r) for k, (_, s, r) in good.items()}))
    for blob in corrupt:
        variant("t.safetensors", write("t.safetensors", blob), field=None)
    for n in range(120):  # random byte flips of a valid file
        blob = bytearray(safetensors(good))
        for _ in range(c.rng.randrange(1, 4)):
            i = c.rng.randrange(len(blob))
            blob[i] = c.rng.randrange(256)
        path = c.name("tensors-flip")
        folder = path[:-5] + ".d"
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "t.safetensors"), "wb").write(bytes(blob))
        d = copy.deepcopy(base)
        d["tensors"] = "t.safetensors"
        target = os.path.join(folder, "f.json")
        open(target, "w").write(text_of(d))
        # A flip inside the float data leaves a valid file; anywhere else it must be refused.
        c.add("tensors-flip", None, None, None, "", path=target)


def gen_sizes(c):
    def case(**kw):
        k = {"dtype": "bf16", "heads": 2, "head_dim": 8, "seqs": [{"q_len": 1, "k_len": 1}]}
        k.update(kw)
        return {"schema": SCHEMA, "title": "size", "cases": [k]}
    big = [
        case(kv={"storage": "paged", "page_size": 2**33, "extra_pages": 2**33}),
        case(kv={"storage": "paged", "page_size": 2**32, "extra_pages": 2**32}),
        case(kv={"storage": "paged", "page_size": 1, "extra_pages": 2**32}),
        case(kv={"storage": "paged", "page_size": 1, "extra_pages": 2**30, "block_table": [[0]]}),

        case(heads=65535, kv_heads=65535, head_dim=65535),
        case(heads=65535, head_dim=65535, seqs=[{"q_len": 65535, "k_len": 65535}]),
        case(seqs=[{"q_len": 2**31, "k_len": 1}]),  # the old element limit: refused, not allocated
        case(head_dim=1, heads=1, seqs=[{"q_len": 2**30, "k_len": 2**30}]),
        case(seqs=[{"q_len": 100000, "k_len": 100000}] * 2000),
        case(seqs=[{"q_len": 1, "k_len": 1}] * ((1 << 20) + 1)),
        case(kv={"cache": True}, seqs=[{"q_len": 1, "k_len": 4294967295, "cache_len": 4294967295, "new_len": 4294967295}]),
        case(window=[2**62, 2**62]),
    ]
    for d in big:
        text = text_of(d)  # past the 16 MiB file limit, the file itself is what the message names
        c.add("size", text, True, None, "cases[0]" if len(text) < (16 << 20) else None)
    # Block-table rows longer than their sequences need are legal (the tail is never read): they load.
    for d in [case(kv={"storage": "paged", "page_size": 1, "block_table": [[0] * 200000]}),
              case(kv={"storage": "paged", "page_size": 1, "block_table": [[i for i in range(300000)]]})]:
        c.add("size", text_of(d), None, None, "cases[0]")
    model = {"dtype": "bf16", "q_len": 2, "heads": 2, "head_dim": 8}
    for extra in [dict(use_cache=True, static_cache_len=2**40), dict(use_cache=True, static_cache_len=2**62),
                  dict(batch=4096, q_len=65536, past=65536, heads=1024, kv_heads=1024, head_dim=512),
                  dict(position_ids=[[0, 2**63 - 1]]), dict(position_ids=[[0, 2**31]]),
                  dict(attention_mask=[[1] * 2] * 100000), dict(attention_mask=[[2**62, 1]]),
                  dict(varlen_kwargs={"cu_seq_lens_q": [0, 2**62], "cu_seq_lens_k": [0, 2], "max_length_q": 2, "max_length_k": 2}),
                  dict(varlen_kwargs={"cu_seq_lens_q": [0, 2], "cu_seq_lens_k": [0, 2], "max_length_q": 2**62, "max_length_k": 2}),
                  dict(sliding_window=2**62), dict(query_length=2**62), dict(softcap=1e308, scale=1e-308)]:
        m = dict(model)
        m.update(extra)
        legal = "softcap" in extra  # extreme but finite and positive: a legal (if pointless) case
        c.add("size", text_of({"schema": SCHEMA, "title": "model size", "property": "integration", "model_cases": [m]}),
              None if legal else True, None, "model_cases[0]")


def gen_expect(c, seeds):
    kernel_docs = [d for _, d in seeds if d.get("cases")]
    for doc in kernel_docs[:12]:
        for name, spec, field in [("flash-fwd-varlenn", {"verdict": "fail"}, "expect.flash-fwd-varlenn"),
                                  ("", {"verdict": "fail"}, "expect"),
                                  ("tiled-cpu", {"verdict": "green"}, "expect.tiled-cpu.verdict"),
                                  ("tiled-cpu", {"verdict": "fail", "extra": 1}, "expect.tiled-cpu.extra"),
                                  ("tiled-cpu", "fail", "expect.tiled-cpu"),
                                  ("tiled-cpu\u0000", {"verdict": "fail"}, "expect.tiled-cpu")]:
            d = copy.deepcopy(doc)
            d["cases"][0]["expect"] = {name: spec}
            c.add("expect", text_of(d), True, "cases[0]." + field, "cases[0]")
        d = copy.deepcopy(doc)
        d["cases"][0]["expect"] = []
        c.add("expect", text_of(d), True, "cases[0].expect", "cases[0]")
        d = copy.deepcopy(doc)
        d["property"] = "no-such-property"
        c.add("expect", text_of(d), True, "property", "")
    model_docs = [d for _, d in seeds if d.get("model_cases")]
    for doc in model_docs[:6]:
        d = copy.deepcopy(doc)
        d["model_cases"][0]["expect"] = {"hf-9.99": {"verdict": "error"}}
        c.add("expect", text_of(d), True, "model_cases[0].expect.hf-9.99", "model_cases[0]")
        d = copy.deepcopy(doc)
        d["profiles"] = ["hf-main", 3]
        c.add("expect", text_of(d), True, "profiles[1]", "")


def gen_not_objects(c):
    for text in ["", " ", "\n\t", "[]", "1", "null", "true", '"fixture"', "{}", '{"schema": "flashcheck.fixture/1"}',
                 '{"schema": "flashcheck.fixture/1", "cases": []}', '{"schema": "flashcheck.fixture/2", "cases": []}',
                 '{"schema": "flashcheck.fixture/1", "cases": {}}', '{"schema": "flashcheck.fixture/1", "cases": [1]}',
                 '{"schema": "flashcheck.fixture/1", "cases": [[]]}', "{", "}", "/* c */ {}", "{} {}", "\x00{}"]:
        c.add("not-an-object", text, True)
    for n in range(40):
        c.add("not-an-object", bytes(c.rng.randrange(256) for _ in range(c.rng.randrange(1, 300))), True)


def gen_special_paths(c):
    folder = os.path.join(c.out, "files", "special")
    os.makedirs(folder, exist_ok=True)
    fifo = os.path.join(folder, "fifo.json")
    os.mkfifo(fifo)
    c.add("special-file", None, True, None, "", path=fifo)
    for name, target in [("zero.json", "/dev/zero"), ("null.json", "/dev/null"), ("loop.json", "loop.json"),
                         ("dangling.json", "no-such-file.json")]:
        p = os.path.join(folder, name)
        os.symlink(target, p)
        c.add("special-file", None, True, None, "", path=p)
    os.makedirs(os.path.join(folder, "dir.json"))
    sub = os.path.join(folder, "walk")  # a folder walk meets a link loop and a FIFO named *.json
    os.makedirs(sub)
    os.symlink(".", os.path.join(sub, "self"))
    os.mkfifo(os.path.join(sub, "pipe.json"))
    c.entries.append({"path": os.path.relpath(sub, c.out), "class": "special-file", "refuse": True, "field": None, "scope": ""})


def commands(out):
    """Hostile command lines: argv (after the executable) and what must happen. {CORPUS} is the corpus folder."""
    x = lambda *a, **k: dict(argv=list(a), **k)
    usage = dict(expect="usage")
    out_file = "{CORPUS}/files/not-a-folder"
    return [
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "99999999999999999999", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "-1", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "1e3", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--time", "nan", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--time", "inf", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--time", "-1", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--time", "1e308", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--timeout", "0", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--timeout", "nan", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--timeout", "-5", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--seed", "-1", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--seed", "18446744073709551616", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--max-len", "0", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--max-len", "99999999999", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--max-heads", "-4", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--max-batch", "1000000", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--work-budget", "nan", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--shrink-seconds", "inf", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--shrink-attempts", "-1", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "3", "--max-size", "0", **usage),
        x("fuzz", "--kernel", "no-such-kernel", "--cases", "3", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--property", "no-such-property", "--cases", "3", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--property", "integration", "--profile", "hf-0", "--cases", "3", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "2", "--out", "/dev/null", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "2", "--out", "/dev/null/sub", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "2", "--out", out_file, **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "2", "--out", out_file + "/sub", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "2", "--out", "/proc/version", **usage),
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "2", "--out", "", **usage),
        # A tiny --timeout makes every case time out: the run still ends after 5 cases, with at most 5 fixtures.
        x("fuzz", "--kernel", "tiled-cpu", "--cases", "5", "--timeout", "0.000001", "--out", "{CORPUS}/out/tiny-timeout",
          expect="finding", max_fixtures=5, out="{CORPUS}/out/tiny-timeout"),
        x("fuzz", "--kernel", "mutant-top-left-causal", "--cases", "20", "--out", "{CORPUS}/out/rerun", expect="finding"),
        x("fuzz", "--kernel", "mutant-top-left-causal", "--cases", "20", "--out", "{CORPUS}/out/rerun", expect="finding",
          keeps="{CORPUS}/out/rerun"),
        x("bench", "--kernel", "tiled-cpu", "--cases", "-1", **usage),
        x("bench", "--kernel", "tiled-cpu", "--cases", "100000000", **usage),
        x("bench", "--kernel", "tiled-cpu", "--cases", "0", **usage),
        x("bench", "--kernel", "tiled-cpu", "--cases", "10", "--warmup", "-5", **usage),
        x("bench", "--kernel", "tiled-cpu", "--cases", "10", "--seed", "-3", **usage),
        x("bench", "--kernel", "tiled-cpu", "--cases", "10", "--mix", "evil", **usage),
        x("mutants", "--budget", "-1", **usage),
        x("mutants", "--budget", "0", **usage),
        x("mutants", "--budget", "99999999999999999999", **usage),
        x("mutants", "--mutant", "tiled-cpu", **usage),
        x("export", "--generated", "1000000000", "--out", "{CORPUS}/out/export-big", **usage),
        x("export", "--generated", "-1", "--out", "{CORPUS}/out/export-neg", **usage),
        x("export", "--out", "/dev/null", "--generated", "2", **usage),
        x("export", "--out", out_file, "--generated", "2", **usage),
        x("export", "--out", "{CORPUS}/out/user-files", "--generated", "2", "--fixtures", "{CORPUS}/files/special/fifo.json", **usage),
        x("export", "--out", "{CORPUS}/out/user-files", "--generated", "2", "--fixtures", "/dev/zero", **usage),
        x("export", "--out", "{CORPUS}/out/user-files", "--generated", "2", "--fixtures", "{FIXTURES}", **usage),
        x("export", "--out", "{CORPUS}/out/export-twice", "--generated", "2", "--fixtures", "{FIXTURES}", expect="ok"),
        x("export", "--out", "{CORPUS}/out/export-twice", "--generated", "1", "--fixtures", "{FIXTURES}", expect="ok"),
        x("export", "--profile", "hf-9", "--out", "{CORPUS}/out/export-p", **usage),
        x("gate", "--out", "/dev/null", "--fixtures", "{FIXTURES}", "--cases", "1", **usage),
        x("gate", "--out", out_file, "--fixtures", "{FIXTURES}", "--cases", "1", **usage),
        x("gate", "--fixtures", "/dev/zero", "--out", "{CORPUS}/out/gate", **usage),
        x("gate", "--fixtures", "{CORPUS}/files/special/walk", "--out", "{CORPUS}/out/gate", **usage),
        x("gate", "--cases", "-3", "--fixtures", "{FIXTURES}", "--out", "{CORPUS}/out/gate", **usage),
        x("gate", "--seed", "-3", "--fixtures", "{FIXTURES}", "--out", "{CORPUS}/out/gate", **usage),
        x("replay", "/dev/zero", **usage),
        x("replay", "/dev/null", **usage),
        x("replay", "/", "--kernel", "no-such", **usage),
        x("replay", "{CORPUS}/files/special/fifo.json", **usage),
        x("replay", "{CORPUS}/no/such/file.json", **usage),
        x("replay", "{FIXTURES}/issues/flash-attention-466.json", "--timeout", "-1", **usage),
        x("replay", "{FIXTURES}/issues/flash-attention-466.json", "--timeout", "nan", **usage),
        x("replay", "{FIXTURES}/issues/flash-attention-466.json", "--kernel", "", **usage),
        x("replay", **usage),
        x("no-such-command", **usage),
        x(**usage),
        x("list", "--json", expect="ok"),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(__file__), "..", "..", "fixtures"))
    a = ap.parse_args()
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    c = Corpus(a.out, random.Random(a.seed))
    seeds = load_seeds(a.fixtures)
    gen_truncations(c, seeds)
    gen_wrong_types(c, seeds)
    gen_missing(c, seeds)
    gen_unknown(c, seeds)
    gen_extreme_ints(c, seeds)
    gen_bad_literals(c, seeds)
    gen_deep(c, seeds)
    gen_duplicates(c, seeds)
    gen_non_utf8(c, seeds)
    gen_huge(c, seeds)
    gen_tensors(c)
    gen_sizes(c)
    gen_expect(c, seeds)
    gen_not_objects(c)
    gen_special_paths(c)
    open(os.path.join(a.out, "files", "not-a-folder"), "w").write("a file\n")
    os.makedirs(os.path.join(a.out, "out", "user-files"))
    open(os.path.join(a.out, "out", "user-files", "manifest.json"), "w").write('{"mine": true}\n')
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(c.entries, f, indent=0)
    with open(os.path.join(a.out, "commands.json"), "w") as f:
        json.dump(commands(a.out), f, indent=1)
    by_class = {}
    for e in c.entries:
        by_class[e["class"]] = by_class.get(e["class"], 0) + 1
    print(f"{len(c.entries)} files in {a.out}: " + ", ".join(f"{k} {v}" for k, v in sorted(by_class.items())))


if __name__ == "__main__":
    main()
