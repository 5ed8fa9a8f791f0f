#!/usr/bin/env python3
"""Draws the HTML report of a campaign merge: OUT/report.html from OUT/report.json (written by
`flashcheck merge`). One self-contained file: tables, and matplotlib plots embedded as PNG (base64), so it
opens without network access. Without matplotlib it still writes the tables, and says why in --note.

    campaign_report.py OUT [--note FILE]
"""
import argparse
import base64
import html
import io
import json
import math
import os
import sys


def esc(x):
    return html.escape(str(x))


def table(header, rows):
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return "\n".join(out) + "</table>"


def length_label(b):
    """Bucket b of a length (search/case_stats.h): 0 is 0, b >= 1 is [2^(b-1), 2^b - 1]."""
    if b == 0:
        return "0"
    lo, hi = 1 << (b - 1), (1 << b) - 1
    return str(lo) if lo == hi else f"{lo}-{hi}"


class Plots:
    def __init__(self, plt):
        self.plt = plt

    def png(self, fig, caption):
        """The figure inline, with its caption (what it shows and how to read it) under it and as its alt text."""
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        self.plt.close(fig)
        return (f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,' + base64.b64encode(buf.getvalue()).decode()
                + f'"><figcaption>{esc(caption)}</figcaption></figure>')

    def histograms(self, kernel, units):
        """err/bound of every compared case, one step line per property; the bound is at 1."""
        fig, ax = self.plt.subplots(figsize=(7, 3.2))
        notes = []
        for u in units:
            st = u["stats"]
            hist = {int(k): v for k, v in st["histogram"].items()}
            if hist:
                lo, hi = min(hist), max(hist)
                edges = [10 ** (b / 10) for b in range(lo, hi + 2)]
                counts = [hist.get(b, 0) for b in range(lo, hi + 1)]
                ax.stairs(counts, edges, label=u["property"])
            if st["exact"] or st["nonfinite"]:
                notes.append(f'{u["property"]}: {st["exact"]} exact, {st["nonfinite"]} non-finite')
        ax.set_xscale("log")
        ax.axvline(1.0, color="red", linestyle="--", linewidth=1)
        ax.set_xlabel("err / bound (the case fails past 1)")
        ax.set_ylabel("cases")
        ax.set_title(f"{kernel}: error over its tolerance" + ("\n" + "; ".join(notes) if notes else ""), fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        return self.png(fig, f"{kernel}: the err/bound of every compared case, one step line per property (1 is the tolerance bound: a case right of it fails)")

    def by_length(self, kernel, units):
        """Worst err/bound over (longest query, longest key), log2 buckets, all properties of the kernel."""
        cells = {}
        for u in units:
            for key, (n, worst) in u["stats"]["by_length"].items():
                q, k = (int(x) for x in key.split(","))
                c = cells.setdefault((q, k), [0, 0.0])
                c[0] += n
                c[1] = max(c[1], worst)
        if not cells:
            return ""
        qs = range(0, max(q for q, _ in cells) + 1)
        ks = range(0, max(k for _, k in cells) + 1)
        nan = float("nan")
        grid = [[cells[(q, k)][1] if (q, k) in cells else nan for k in ks] for q in qs]
        fig, ax = self.plt.subplots(figsize=(7, 4.5))
        im = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto")
        fig.colorbar(im, ax=ax, label="worst err / bound")
        ax.set_xticks(list(ks), [length_label(k) for k in ks], rotation=60, fontsize=7)
        ax.set_yticks(list(qs), [length_label(q) for q in qs], fontsize=7)
        ax.set_xlabel("longest key length (k_len)")
        ax.set_ylabel("longest query length (q_len)")
        ax.set_title(f"{kernel}: worst err/bound over lengths", fontsize=9)
        return self.png(fig, f"{kernel}: the worst err/bound over the cases of each (longest query, longest key) bucket, log2 lengths, every property")

    def by_feature(self, kernel, units):
        """Worst err/bound per coverage feature, all properties of the kernel."""
        feats = {}
        for u in units:
            for f, (n, worst) in u["stats"]["by_feature"].items():
                c = feats.setdefault(f, [0, 0.0])
                c[0] += n
                c[1] = max(c[1], worst)
        if not feats:
            return ""
        names = sorted(feats, key=lambda f: feats[f][1])
        fig, ax = self.plt.subplots(figsize=(7, 0.22 * len(names) + 1))
        ax.barh(names, [feats[f][1] for f in names])
        ax.axvline(1.0, color="red", linestyle="--", linewidth=1)
        ax.set_xlabel("worst err / bound")
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(f"{kernel}: worst err/bound per feature", fontsize=9)
        return self.png(fig, f"{kernel}: the worst err/bound of the cases with each coverage feature, every property (the dashed line is the bound)")

    def throughput(self, workers):
        """Each chunk's cases/s at the time it finished, one line per worker."""
        if not any(w["chunks"] for w in workers):
            return ""
        fig, ax = self.plt.subplots(figsize=(7, 3.2))
        for w in workers:
            pts = [(t, n / s) for t, n, s in w["chunks"] if s > 0]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=f'{w["dir"]}: {w["device"]} @ {w["host"]}')
        ax.set_xlabel("seconds since the first chunk started")
        ax.set_ylabel("cases/s (per chunk)")
        ax.set_title("throughput per worker", fontsize=9)
        ax.legend(fontsize=7)
        return self.png(fig, "cases/s of each chunk when it finished, one line per worker (campaign directory: device @ host), seconds since the first chunk")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--note", help="write here, in one line, why the report has no plots")
    a = ap.parse_args()
    with open(os.path.join(a.out, "report.json")) as f:
        r = json.load(f)

    plots, why = None, ""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        plots = Plots(plt)
    except ImportError as e:
        why = f"report.html has no plots: matplotlib is not installed for {sys.executable} ({e}); ci/setup.sh installs it"

    t = r["totals"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>flashcheck campaign</title><style>"
        "body{font-family:sans-serif;margin:2em;max-width:1100px} table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left} .fail{color:#b00;font-weight:bold}"
        ".ok{color:#070} img{margin:4px} code{font-size:12px} figure{margin:1em 0} figcaption{font-size:12px;color:#444;max-width:700px}</style></head><body>",
        f"<h1>flashcheck campaign: <span class='{'ok' if r['ok'] else 'fail'}'>{'PASS' if r['ok'] else 'FAIL'}</span></h1>",
        f"<p>{t['cases']} cases, {t['failures']} failing cases in {t['findings']} distinct findings, {t['crashes']} crashes.</p>",
    ]
    if why:
        parts.append(f"<p class='fail'>{esc(why)}</p>")
    for w in r["warnings"]:
        parts.append(f"<p class='fail'>warning: {esc(w)}</p>")
    parts.append("<h2>Campaign directories</h2>")
    parts.append(table(["directory", "shard", "seed", "budget", "chunks done", "sessions", "seconds"],
                       [[esc(c["dir"]), c["shard"], c["seed"],
                         f'{c["cases_budget"]} cases' if c["cases_budget"] else f'{c["seconds_budget"]:.0f} s',
                         f'{c["chunks_done"]}' + (f' of {c["chunks_planned"]}' if c["chunks_planned"] is not None else ""),
                         c["sessions"], f'{c["seconds_used"]:.0f}'] for c in r["campaigns"]]))
    parts.append("<h2>Kernels &times; properties</h2>")
    rows = []
    for u in r["units"]:
        if u["not_applicable"]:
            rows.append([esc(u["kernel"]), esc(u["property"]), "-", "-", "-", "-", "-", "n/a: " + esc(u["not_applicable"])])
            continue
        status = "<span class='ok'>ok</span>" if u["ok"] else "<span class='fail'>FAIL</span>"
        rows.append([esc(u["kernel"]), esc(u["property"]), u["cases"], u["failures"], len(u["findings"]), u["crashes"],
                     f'{u["worst_bound_use"]:.2f}', status +
                     (" (coverage missing: " + esc(" ".join(u["coverage_missing"])) + ")" if u["coverage_missing"] else "")])
    parts.append(table(["kernel", "property", "cases", "failing cases", "findings", "crashes", "worst err/bound", "status"], rows))

    findings = [(u, f) for u in r["units"] for f in u["findings"]]
    if findings:
        parts.append("<h2>Findings (one per signature, the smallest case kept)</h2>")
        parts.append(table(["kernel", "count", "verdict", "case", "reason", "replay"],
                           [[esc(u["kernel"]), f["count"], esc(f["verdict"]["verdict"]), f"<code>{esc(f['summary'])}</code>",
                             esc(f["verdict"]["reason"][:300]),
                             f"<code>flashcheck replay {esc(f['fixture'])} --kernel {esc(u['kernel'])}</code>" if f["fixture"] else ""]
                            for u, f in findings]))

    parts.append("<h2>Workers</h2>")
    parts.append(table(["directory", "host", "device", "cases", "busy seconds", "cases/s"],
                       [[esc(w["dir"]), esc(w["host"]), esc(w["device"]), w["cases"], f'{w["busy_seconds"]:.1f}',
                         f'{w["cases_per_second"]:.1f}'] for w in r["workers"]]))
    if plots:
        parts.append(plots.throughput(r["workers"]))
        kernels = []
        for u in r["units"]:
            if u["kernel"] not in kernels and not u["not_applicable"]:
                kernels.append(u["kernel"])
        for k in kernels:
            units = [u for u in r["units"] if u["kernel"] == k and not u["not_applicable"]]
            parts.append(f"<h2>{esc(k)}</h2>")
            parts.append(plots.histograms(k, units))
            parts.append(plots.by_length(k, units))
            parts.append(plots.by_feature(k, units))
    parts.append("</body></html>\n")
    with open(os.path.join(a.out, "report.html"), "w") as f:
        f.write("\n".join(parts))
    if why and a.note:
        with open(a.note, "w") as f:
            f.write(why + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
