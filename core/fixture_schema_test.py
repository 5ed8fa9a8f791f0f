"""Every committed fixture matches the published JSON Schema (docs/fixture.schema.json), and fixtures the schema
rejects are rejected by flashcheck's own reader too (exit 2), so the schema and the reader say the same thing.

    python3 core/fixture_schema_test.py FLASHCHECK WORKDIR     (ctest fixtures.match_the_json_schema)
"""
import copy
import glob
import json
import os
import subprocess
import sys

import jsonschema

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
flashcheck, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
schema = json.load(open(os.path.join(root, "docs", "fixture.schema.json")))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
failed = []

files = sorted(glob.glob(os.path.join(root, "fixtures", "**", "*.json"), recursive=True))
for path in files:
    errors = list(validator.iter_errors(json.load(open(path))))
    if errors:
        failed.append(f"{os.path.relpath(path, root)}: {errors[0].json_path}: {errors[0].message[:200]}")

# Wrong on purpose, one defect each: the schema must reject it, and so must `flashcheck replay`.
good = {"schema": "flashcheck.fixture/1", "title": "t",
        "cases": [{"dtype": "fp32", "heads": 2, "kv_heads": 1, "head_dim": 8, "seqs": [{"q_len": 2, "k_len": 3}],
                   "window": [1, 0], "expect": {"tiled-cpu": {"verdict": "pass"}}}]}
def defect(edit):
    f = copy.deepcopy(good)
    edit(f)
    return f
bad = {
    "unknown-top-field": defect(lambda f: f.update(titel="x")),
    "unknown-case-field": defect(lambda f: f["cases"][0].update(casual=True)),
    "missing-dtype": defect(lambda f: f["cases"][0].pop("dtype")),
    "dtype-fp8": defect(lambda f: f["cases"][0].update(dtype="fp8")),
    "window-of-three": defect(lambda f: f["cases"][0].update(window=[1, 0, 2])),
    "negative-length": defect(lambda f: f["cases"][0]["seqs"][0].update(q_len=-1)),
    "verdict-maybe": defect(lambda f: f["cases"][0]["expect"]["tiled-cpu"].update(verdict="maybe")),
    "wrong-schema": defect(lambda f: f.update(schema="flashcheck.fixture/2")),
    "no-cases": defect(lambda f: f.pop("cases")),
}
for name, fixture in [("good", good)] + sorted(bad.items()):
    path = os.path.join(work, name + ".json")
    json.dump(fixture, open(path, "w"))
    schema_ok = validator.is_valid(fixture)
    rc = subprocess.run([flashcheck, "replay", path, "--kernel", "tiled-cpu"], capture_output=True).returncode
    want_ok = name == "good"
    if schema_ok != want_ok:
        failed.append(f"{name}: the schema {'accepts' if schema_ok else 'rejects'} it")
    if (rc != 2) != want_ok:
        failed.append(f"{name}: flashcheck replay exits {rc}")

if failed:
    print("\n".join(failed))
    sys.exit(1)
print(f"{len(files)} fixtures match docs/fixture.schema.json; {len(bad)} wrong ones are rejected by it and by replay")
