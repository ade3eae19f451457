"""bench.host_copy: every way of copying a chunk of host bases gives the chunk."""
import json

import numpy as np
import pytest

from bench import host_copy as H


def test_variants_copy_the_same_chunk():
    rng = np.random.default_rng(1)
    bases = rng.integers(0, 2**32, (2, H.FP_LIMBS, 64), dtype=np.uint32)
    fns = H.variants(bases)
    for lo, hi in ((0, 16), (16, 32), (48, 64), (16, 32)):      # the staging buffers alternate
        want = bases[..., lo:hi]
        for name, fn in fns.items():
            got = np.asarray(fn(lo, hi))
            assert got.shape == want.shape and np.array_equal(got, want), name


def test_run_writes_one_record_per_variant(tmp_path):
    out = tmp_path / "h.jsonl"
    recs = H.run(8, 5, reps=2, out=str(out), env={"device": "cpu"})
    names = [r["case"] for r in recs]
    assert names == ["host_copy." + n for n in
                     ("asarray", "gather_fresh", "staged", "rows", "contiguous")]
    assert all(r["min_s"] <= r["median_s"] <= r["max_s"] and r["reps"] == 2 for r in recs)
    assert [json.loads(x)["case"] for x in out.read_text().splitlines()] == names
    with pytest.raises(ValueError, match="log_chunk <= log_n"):
        H.run(4, 5)
