"""Plots of recorded results as dependency-free SVG.

Time vs size of NTT/MSM records, with goals and floors (log2 size on x,
log10 seconds on y):

    python -m bench.plot bench/results/ntt_msm_h200_*.jsonl --out bench/results/ntt_msm_h200.svg

Stage breakdown of whole proofs (``--stages``: any record with
``stages_median_s``, e.g. bench.groth16 and bench.filecoin), one stacked bar
per record (label: case, rows, "16 GB mode" for an out-of-core proof, "key
streamed" for another whose proving key stayed in host memory, commit), the goal as a tick:

    python -m bench.plot --stages bench/results/groth16_h200_*.jsonl --out bench/results/groth16_h200_stages.svg

``--cuzk`` adds cuzk's published per-partition stage times (``CUZK_BARS``) below
the records, and each record's witness time (``witness_s``) as a first stage,
since synthesis is most of cuzk's time:

    python -m bench.plot --stages --cuzk bench/results/filecoin_h200_run*.jsonl --out bench/results/filecoin_h200_stages.svg

Series: one per (case, commit) of the records; goals (issue 3) as crosses;
floors as dashed lines: NTT n/2·log2 n Fr products at the measured 27.7·10⁹/s,
MSM G1 16·n mixed additions at the measured 1.01·10⁹/s, MSM G2 at 0.241·10⁹/s.
"""
from __future__ import annotations

import argparse
import json
import math
import os

GOALS = {"ntt": {20: 0.5e-3, 24: 10e-3}, "msm_G1": {20: 20e-3, 22: 60e-3, 24: 110e-3},
         "msm_G2": {20: 60e-3}}
FLOORS = {"ntt": lambda k: (1 << k) / 2 * k / 27.7e9,
          "msm_G1": lambda k: 16 * (1 << k) / 1.01e9,
          "msm_G2": lambda k: 16 * (1 << k) / 0.241e9}
COLORS = {"ntt": "#1f77b4", "msm_G1": "#d62728", "msm_G2": "#2ca02c", "msm_G1_bits75": "#ff7f0e",
          "msm_G2_fused_split": "#9467bd", "msm_G1_budget": "#8c564b"}
W, H, PAD = 760, 480, 60


def load(paths):
    series = {}
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            if "median_s" not in r or "log_n" not in r or r["case"] not in COLORS:
                continue
            series.setdefault((r["case"], r["commit"]), {})[r["log_n"]] = r["median_s"]
    return series


def svg(series, xs=(16, 26), ys=(-5, 0)):
    def X(k):
        return PAD + (k - xs[0]) / (xs[1] - xs[0]) * (W - 2 * PAD)

    def Y(t):
        return H - PAD - (math.log10(t) - ys[0]) / (ys[1] - ys[0]) * (H - 2 * PAD)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="11"><rect width="{W}" height="{H}" fill="white"/>']
    for k in range(xs[0], xs[1] + 1, 2):
        out.append(f'<line x1="{X(k)}" y1="{PAD}" x2="{X(k)}" y2="{H - PAD}" stroke="#eee"/>'
                   f'<text x="{X(k)}" y="{H - PAD + 15}" text-anchor="middle">2^{k}</text>')
    for e in range(ys[0], ys[1] + 1):
        out.append(f'<line x1="{PAD}" y1="{Y(10 ** e)}" x2="{W - PAD}" y2="{Y(10 ** e)}" stroke="#eee"/>'
                   f'<text x="{PAD - 5}" y="{Y(10 ** e) + 4}" text-anchor="end">1e{e} s</text>')
    for case, f in FLOORS.items():
        pts = " ".join(f"{X(k)},{Y(f(k))}" for k in range(xs[0], xs[1] + 1))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{COLORS[case]}" '
                   f'stroke-dasharray="4 3" opacity="0.6"/>')
    for case, g in GOALS.items():
        for k, t in g.items():
            out.append(f'<text x="{X(k)}" y="{Y(t) + 4}" text-anchor="middle" fill="{COLORS[case]}" '
                       f'font-size="14">×</text>')
    legend = 0
    for (case, commit), pts in sorted(series.items()):
        ks = sorted(pts)
        line = " ".join(f"{X(k)},{Y(pts[k])}" for k in ks)
        out.append(f'<polyline points="{line}" fill="none" stroke="{COLORS[case]}" stroke-width="2"/>')
        out += [f'<circle cx="{X(k)}" cy="{Y(pts[k])}" r="3" fill="{COLORS[case]}"/>' for k in ks]
        out.append(f'<text x="{PAD + 10}" y="{PAD + 14 * legend}" fill="{COLORS[case]}">'
                   f'{case} @ {commit}</text>')
        legend += 1
    out.append(f'<text x="{W - PAD}" y="{PAD - 20}" text-anchor="end">solid: measured (median); '
               f'dashed: floor at measured kernel rates; ×: goal</text></svg>')
    return "\n".join(out)


STAGE_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf"]


# cuzk's published stage times of one partition (research/cuzk.md, "Numbers"): a 32GiB PoRep
# partition on an RTX 5070 Ti with a 96-core host (witness and SpMV: Phase 5, one circuit's
# single-threaded share; the rest: Phase 9), and WinningPoSt (H1).  cuzk overlaps its CPU
# and GPU stages across partitions, so a bar is a sum of stage times, not a latency.
CUZK_BARS = [
    ("cuzk porep 32GiB partition (RTX 5070 Ti)",
     {"witness": 26.5, "spmv": 3.2, "prep_msm (CPU)": 1.9, "ntt + msm_h": 0.69,
      "batch_add": 0.65, "tail msm": 0.083, "b_g2_msm (CPU)": 0.48}, None),
    ("cuzk winning-post (H1)",
     {"queue": 0.088, "srs load": 0.087, "witness": 0.052, "gpu": 0.666}, None),
]


def load_stages(paths, witness: bool = False):
    """[(label, {stage: seconds}, goal or None)] of records with stages
    (``total`` left out: it is the bar's height); ``witness``: the record's
    ``witness_s`` as a first stage."""
    bars = []
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            st = r.get("stages_median_s")
            if not st:
                continue
            rows = r.get("rows")
            size = " ".join(x for x in (r.get("size"), f"{rows:,} rows" if rows else None) if x)
            mode = (", 16 GB mode" if r.get("out_of_core_bytes")
                    else ", key streamed" if r.get("keys_in_host_memory") else "")
            label = f"{r['case']} {size}{mode} @ {r.get('commit', '?')[:7]}"
            stages = {"witness": r["witness_s"]} if witness and "witness_s" in r else {}
            stages.update((k, v) for k, v in st.items() if k != "total")
            bars.append((label, stages, r.get("goal_s")))
    return bars


def stacked_svg(bars):
    """One horizontal stacked bar per record, seconds on a linear x axis."""
    stages = []
    for _, st, _ in bars:
        stages += [k for k in st if k not in stages]
    color = {k: STAGE_COLORS[i % len(STAGE_COLORS)] for i, k in enumerate(stages)}
    top = max([sum(st.values()) for _, st, _ in bars] + [g or 0 for _, _, g in bars]) * 1.05
    left, bar_h, gap = 330, 22, 12
    height = PAD + len(bars) * (bar_h + gap) + 70 + 16 * ((len(stages) - 1) // 5)
    X = lambda t: left + t / top * (W + 200 - left - PAD)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W + 200}" height="{height}" '
           f'font-family="sans-serif" font-size="11"><rect width="{W + 200}" height="{height}" fill="white"/>']
    for i, (label, st, goal) in enumerate(bars):
        y = PAD + i * (bar_h + gap)
        out.append(f'<text x="{left - 6}" y="{y + bar_h / 2 + 4}" text-anchor="end">{label}</text>')
        x = 0.0
        for k in stages:
            if k in st:
                out.append(f'<rect x="{X(x)}" y="{y}" width="{X(x + st[k]) - X(x)}" height="{bar_h}" '
                           f'fill="{color[k]}"><title>{k}: {st[k] * 1e3:.1f} ms</title></rect>')
                x += st[k]
        out.append(f'<text x="{X(x) + 4}" y="{y + bar_h / 2 + 4}">{x:.3f} s</text>')
        if goal:
            out.append(f'<line x1="{X(goal)}" y1="{y - 3}" x2="{X(goal)}" y2="{y + bar_h + 3}" '
                       f'stroke="black" stroke-width="2"/>')
    y = PAD + len(bars) * (bar_h + gap) + 10
    per_row = 5                                     # legend entries per line
    for j, k in enumerate(stages):
        lx, ly = left - 200 + 150 * (j % per_row), y + 16 * (j // per_row)
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{color[k]}"/>'
                   f'<text x="{lx + 14}" y="{ly + 9}">{k}</text>')
    y += 16 * ((len(stages) - 1) // per_row)
    out.append(f'<text x="{left}" y="{y + 32}">median seconds per stage; black tick: goal</text></svg>')
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stages", action="store_true", help="stacked stage bars of whole proofs")
    ap.add_argument("--cuzk", action="store_true",
                    help="with --stages: add the witness stage and cuzk's published bars")
    a = ap.parse_args()
    if a.cuzk and not a.stages:
        ap.error("--cuzk needs --stages")
    if a.stages:
        text = stacked_svg(load_stages(a.files, witness=a.cuzk) + (CUZK_BARS if a.cuzk else []))
    else:
        text = svg(load(a.files))
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
