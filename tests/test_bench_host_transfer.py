"""bench.host_transfer: every copy primitive timed and recorded (a small
vector), and its check of ops.four_step's block copies can fail."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench import host_transfer as B
from ops import four_step as FS


def test_every_case_is_recorded(tmp_path):
    out = tmp_path / "h.jsonl"
    B.main(["--log-m", "8", "--reps", "1", "--workers", "2", "--out", str(out)])
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["case"] for r in recs] == [f"host_transfer.{c}" for c in B.CASES]
    for r in recs:
        assert r.get("skipped") or (r["gb_s"] > 0 and r["bytes"] in (2**8 * 32, 2**7 * 32)), r
    assert {r["cols"] for r in recs} == {8}                  # half of n2 = 16 columns


def test_a_wrong_block_write_is_caught(monkeypatch):
    def lossy(block, result, pool):
        block[...] = np.asarray(result)
        block[0, 0, 0] ^= 1
    monkeypatch.setattr(FS, "write_block", lossy)
    with pytest.raises(SystemExit, match="wrong elements"):
        B.main(["--log-m", "6", "--reps", "1", "--workers", "1",
                "--cases", "gather_cols,put_block.col,write_block.col"])


def test_bad_arguments_are_named():
    with pytest.raises(SystemExit, match="unknown case"):
        B.main(["--log-m", "6", "--cases", "memcpy,teleport"])
    with pytest.raises(SystemExit, match="--cols 99"):
        B.main(["--log-m", "6", "--cols", "99"])


def test_a_wrong_plane_put_is_caught(monkeypatch):
    from ops import transfer
    real = transfer.put_planes
    monkeypatch.setattr(transfer, "put_planes",
                        lambda x, pool, **kw: real(x, pool, **kw).at[0, 0].add(1))
    with pytest.raises(SystemExit, match="put_planes put the wrong elements"):
        B.main(["--log-m", "6", "--reps", "1", "--workers", "1", "--cases", "put_planes"])
