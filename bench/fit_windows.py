"""Fit the MSM window cost model to measured records (``ops.msm.window_cost``).

The model: an MSM of n points per scalar vector in c-bit windows (W =
⌈256/c⌉ of them), run as ``chunks`` chunks, takes

    T = a·n·W + b·W·2^(c−1)·(chunks + 1) + k

(n·W entries sorted and added; W·2^(c−1) buckets per pass over the bucket
array, one pass per chunk and the final reduction; k the fixed cost).  The
bucket weight ``ops.msm`` uses is b/a: a bucket's cost per pass in entries.
Session 35 fitted 20 H100 records to a = 0.530 ns, b = 4.06 ns, k = 13 ms:
weight 7.67, every record within 3.4%.

Input: ``bench.ntt_msm`` JSONL records of plain G1 (or G2) MSMs — ``log_n``,
``window``, ``median_s``, ``checked`` and, for ``--chunk-gib`` records,
``chunk`` (absent or ≥ n: one chunk).  Records whose result was not checked
are refused.  The fit minimises the relative error (weights 1/T).

    python3 -m bench.fit_windows bench/results/h100_s35_msm*.jsonl
    python3 -m bench.fit_windows --case-prefix msm_G1_xyzz --exclude _running run/msm*.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def num_windows(c: int) -> int:
    return -(-256 // c)


def points(records, case_prefix: str = "msm_G1", exclude=()) -> list[tuple]:
    """(log_n, chunks, c, seconds) of each usable record: a plain MSM case
    (its name starts with ``case_prefix`` and contains none of ``exclude``),
    with its window; ValueError for a record whose result was not checked."""
    out = []
    for r in records:
        case = r.get("case", "")
        if not case.startswith(case_prefix) or any(x in case for x in exclude):
            continue
        if "_bits75" in case or "window" not in r:
            continue
        if r.get("checked") is not True:
            raise ValueError(f"fit_windows: record {case} at 2^{r.get('log_n')} was not "
                             f"checked (checked={r.get('checked')!r}); refusing to fit it")
        n = 1 << r["log_n"]
        chunk = r.get("chunk") or n
        out.append((r["log_n"], max(1, -(-n // chunk)), r["window"], r["median_s"]))
    return out


def fit(pts) -> dict:
    """Least squares of relative error: {a_ns, b_ns, k_ms, bucket_weight,
    errors: [(log_n, chunks, c, measured_s, predicted_s)], max_error}."""
    if len(pts) < 3:
        raise ValueError(f"fit_windows: {len(pts)} records; at least 3 (three parameters)")
    A = np.array([[(1 << ln) * num_windows(c), num_windows(c) * (1 << (c - 1)) * (ch + 1), 1.0]
                  for ln, ch, c, _ in pts], float)
    y = np.array([t for *_, t in pts], float)
    w = 1.0 / y
    coef, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
    pred = A @ coef
    errs = [(ln, ch, c, t, float(p)) for (ln, ch, c, t), p in zip(pts, pred)]
    return {"a_ns": coef[0] * 1e9, "b_ns": coef[1] * 1e9, "k_ms": coef[2] * 1e3,
            "bucket_weight": coef[1] / coef[0],
            "max_error": max(abs(p / t - 1) for *_, t, p in errs), "errors": errs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="bench.ntt_msm JSONL records")
    ap.add_argument("--case-prefix", default="msm_G1",
                    help="records whose case starts with this (default msm_G1)")
    ap.add_argument("--exclude", action="append", default=[],
                    help="skip cases containing this (repeatable), e.g. _running")
    a = ap.parse_args(argv)
    records = []
    for path in a.files:
        with open(path) as f:
            records += [json.loads(x) for x in f if x.startswith("{")]
    try:
        res = fit(points(records, a.case_prefix, a.exclude))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    for ln, ch, c, t, p in res["errors"]:
        print(f"2^{ln} chunks {ch} c{c}: {t * 1e3:9.2f} ms, model {p * 1e3:9.2f} "
              f"({(p / t - 1) * 100:+.1f}%)")
    print(json.dumps({k: round(v, 4) for k, v in res.items() if k != "errors"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
