"""bench.interp: the interpreter micro-benchmark runs, checks itself, and rejects bad input."""
from __future__ import annotations

import json

import pytest

from bench import interp
from ops import interpret


def test_records_and_self_check(capsys, tmp_path):
    out = tmp_path / "r.jsonl"
    interp.main(["--cases", "Fq.mul,Fq.add,G1.madd", "--log-n", "3", "--reps", "1", "--out", str(out)])
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["case"] for r in recs] == ["interp.Fq.mul", "interp.Fq.add", "interp.G1.madd"]
    for r in recs:
        assert r["log_n"] == 3 and r["median_s"] > 0 and r["compile_s"] > 0
        assert r["per_instruction_us"] == pytest.approx(r["median_s"] / r["instructions"] * 1e6)
    assert recs[0]["instructions"] == interp.CHAIN and recs[0]["checked"] is True
    assert recs[1]["checked"] is True
    assert recs[2]["checked"] is None and recs[2]["instructions"] > 30
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_chain_reference_is_independent():
    # the reference is plain modular arithmetic, so a wrong chain length or op would differ
    x, y = 3, 5
    assert interp._reference("Fq.add", x, y) == (x + interp.CHAIN * y) % interp.P
    assert interp._reference("Fq.mul", x, y) == x * pow(y, interp.CHAIN, interp.P) % interp.P


@pytest.mark.parametrize("argv, msg", [(["--cases", "Fq.div"], "unknown case"),
                                       (["--reps", "0"], "--reps")])
def test_bad_arguments(argv, msg):
    with pytest.raises(SystemExit, match=msg):
        interp.main(argv + ["--log-n", "3"])


def test_blocked_run_matches_python_ints(monkeypatch):
    # 8 lanes in blocks of 3: three passes of lax.map, the last one padded
    monkeypatch.setattr(interpret, "BLOCK", 3)
    for case in ("Fq.mul", "Fq.add"):
        assert interp.bench_case(case, 3, reps=1)["checked"] is True
