"""bench.fit_windows: the MSM window model's weight is what the committed
session-35 records give, and bad input is refused by name."""
from __future__ import annotations

import glob
import json
import os

import pytest

from bench import fit_windows as F
from ops import msm as M

RESULTS = os.path.join(os.path.dirname(__file__), "..", "bench", "results")


def _records(pattern="h100_s35_msm*.jsonl"):
    out = []
    for p in sorted(glob.glob(os.path.join(RESULTS, pattern))):
        with open(p) as f:
            out += [json.loads(x) for x in f if x.startswith("{")]
    return out


def test_shipped_weight_is_the_fit_of_the_records():
    """The first session-35 records (before the bucket passes' copies went)
    fit 7.67; the later ones (the fused running sums left out) fit the
    shipped weight."""
    pts = F.points(_records())
    assert len(pts) == 20 and {c for *_, c, _ in pts} == {12, 13, 14, 15, 16, 17, 18, 20, 22}
    res = F.fit(pts)
    assert res["bucket_weight"] == pytest.approx(7.67, abs=0.01)
    assert res["max_error"] < 0.035
    # the chunked 2^27 records count their chunks (4 of 2^25), the 2^26 ones 2
    assert {(ln, ch) for ln, ch, *_ in pts if ln >= 26} == {(27, 4), (26, 2)}
    now = F.fit(F.points(_records("h100_s35b_msm*.jsonl"), exclude=("_running",)))
    assert now["bucket_weight"] == pytest.approx(M.BUCKET_WEIGHTS["G1"], abs=0.01)
    assert now["max_error"] < 0.03


def test_refusals(tmp_path):
    bad = dict(_records()[0], checked=False)
    with pytest.raises(ValueError, match="was not checked"):
        F.points([bad])
    with pytest.raises(ValueError, match="at least 3"):
        F.fit(F.points(_records()[:2]))
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(bad) + "\n")
    assert F.main([str(p)]) == 2
