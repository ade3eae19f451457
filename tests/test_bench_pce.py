"""bench.pce end to end on a tiny synthetic R1CS: every layout's evaluation
is checked against Python ints in its record, and a bad layout is refused
by name (the full-size runs are on the GPU)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, JAX_PLATFORMS="cpu")


def test_layouts_are_timed_and_checked(tmp_path):
    out = tmp_path / "pce.jsonl"
    r = subprocess.run([sys.executable, "-m", "bench.pce", "--rows", "2000", "--layouts",
                        "ell,ell-fused,csr", "--reps", "5", "--samples", "8", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    evals = {x["layout"]: x for x in recs if x["case"] == "pce.evaluate"}
    assert set(evals) == {"ell", "ell-fused", "csr"}
    assert all(x["correct_vs_python"] is True and x["median_s"] > 0 for x in evals.values())
    # no GPU here: no fused kernel
    assert {k: x["form"] for k, x in evals.items()} == {
        "ell": "gather", "ell-fused": "gather", "csr": "gather"}
    assert evals["ell"]["extract_s"] == evals["ell-fused"]["extract_s"]   # one extraction
    assert evals["ell"]["chunk_entries"] == [0, 0, 0] and min(evals["csr"]["chunk_entries"]) > 0
    floors = [x["layout"] for x in recs if x["case"] == "gather_floor"]
    assert sorted(floors) == ["csr", "ell"]


def test_unknown_layout_is_refused():
    r = subprocess.run([sys.executable, "-m", "bench.pce", "--rows", "100", "--layouts",
                        "ell,dense"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=ENV)
    assert r.returncode == 2 and "--layouts" in r.stderr and "dense" in r.stderr
