#!/usr/bin/env python3
"""Sorts the findings of FlashInfer campaigns into the known LSE overrun of its FA3 kernel and the rest.

    python3 lab/flashinfer_lse_overrun_check.py out/visit/c-fi-default out/visit/c-fi-realistic

FlashInfer 0.7.4's sm90 prefill (fixtures/found/flashinfer-fa3-empty-tile-lse-overrun.json): a query tile of 128
rows without any key exits early and its 256 consumer threads write -inf to the LSE of the tile's rows and of the
128 rows after it. A finding is that fault when its worst LSE element is -inf where the reference is finite, on a
row r >= 128 whose preceding tile has no key: with bottom-right causal masking a row i sees no key when
i < q_len - k_len, so tile floor(r / 128) - 1 is empty when 128 * floor(r / 128) <= q_len - k_len. The work-item
count (heads x query tiles) is printed against the number of CTAs of FlashInfer's persistent schedule (--ctas,
the GPU's multiprocessors: 132 on an H200), above which an empty tile waits behind other work on its CTA.
Exit 1 when some finding is not the overrun: a new kind of discrepancy to look at.
"""
import argparse
import json
import os
import sys

TILE = 128  # FlashInfer's CTA_Q for head dim 128 and 256 (192 for head dim 64, not covered here)


def findings(directory):
    with open(os.path.join(directory, "journal.jsonl")) as journal:
        for line in journal:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a torn last line of a killed campaign
                continue
            yield from record.get("report", {}).get("findings", [])


def is_overrun(finding):
    lse = finding["verdict"].get("comparison", {}).get("lse", {})
    worst = lse.get("worst")
    if not worst or worst.get("out") != "-inf" or not isinstance(worst.get("truth"), (int, float)):
        return False
    seq = finding["case"]["seqs"][worst["b"]]
    empty_rows = seq["q_len"] - seq.get("seqused_k", seq["k_len"])
    row = worst["i"]
    return row >= TILE and TILE * (row // TILE) <= empty_rows


def work_items(case):
    return case["heads"] * sum(-(-s["q_len"] // TILE) for s in case["seqs"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("campaigns", nargs="+", help="campaign directories (each with a journal.jsonl)")
    p.add_argument("--ctas", type=int, default=132, help="CTAs of the persistent schedule (the GPU's SM count)")
    a = p.parse_args()
    overrun, other, above = 0, [], 0
    for directory in a.campaigns:
        for f in findings(directory):
            if is_overrun(f):
                overrun += 1
                above += work_items(f["case"]) > a.ctas
            else:
                other.append(f"{directory}: {f['summary']} -- {f['verdict']['reason'][:100]}")
    print(f"{overrun} findings are the FA3 LSE overrun ({above} of them with more than {a.ctas} work items); "
          f"{len(other)} are not")
    for line in other:
        print("  not the overrun:", line)
    return 1 if other else 0


if __name__ == "__main__":
    sys.exit(main())
