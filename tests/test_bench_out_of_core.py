"""bench.out_of_core: the out-of-core h timed in each sweep form, every
result checked against the in-core h (a small domain, a budget forcing many
blocks per sweep)."""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from bench import out_of_core as B
from ops import four_step as FS
from ops import transfer


# one size and budget for both tests: their programs compile once
ARGS = ["--log-m", "8", "--budget-gib", str(FS.step_bytes(4, 4, 3, 1, 8, 4) / 2**30),
        "--reps", "1"]


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_every_case_is_checked_and_recorded(tmp_path):
    out = tmp_path / "o.jsonl"
    B.main(ARGS + ["--out", str(out)])
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["case"] for r in recs] == ["out_of_core.h_in_core", "out_of_core.h_host.serial",
                                         "out_of_core.h_host.plain_fetch",
                                         "out_of_core.h_host.pipelined",
                                         "out_of_core.h_resident"]
    assert all(r["checked"] and r["median_s"] > 0 and r["log_m"] == 8 for r in recs)
    assert all(r["host_traffic_gb_s"] > 0 for r in recs[1:4])
    assert FS.sweep is not B.serial_sweep                  # the baselines were put back
    assert not isinstance(transfer.start_fetch, functools.partial)


def test_a_wrong_sweep_is_caught(monkeypatch):
    """The check can fail: a sweep that drops its last block's write."""
    real = B.serial_sweep

    def lossy(program, ins, outs, count, chunk):
        real(program, ins, outs, count - chunk, chunk)
    monkeypatch.setattr(B, "serial_sweep", lossy)
    with pytest.raises(SystemExit, match="differs"):
        B.main(ARGS + ["--cases", "h_host.pipelined,h_host.serial"])
    assert np.all(B.random_vectors(4, 1)[0][-1] < 2**28)


def test_h_memory_programs_update_their_vector_in_place():
    """bench/device/h_memory.py: every program of the device-resident h
    aliases its donated vector's limb planes (output = alias: no second copy
    of t or h), its temporaries below one vector."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).parent.parent / "bench" / "device" / "h_memory.py"
    spec = importlib.util.spec_from_file_location("h_memory", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    log_m = 12
    vector = 32 << log_m
    ch, out = mod.analyse(log_m, 2 * vector + (vector >> 1))
    assert set(ch) == {"col", "row", "quotient", "check"} and min(ch.values()) >= 1
    assert set(out) == {"quotient", "step col", "step row", "rows_to_cols"}
    for name, (arg, o, alias, temp) in out.items():
        # output: the 8 limb planes (aliased) and the tuple's table of their 8 pointers
        assert alias == vector <= o <= vector + 64 and arg >= vector and temp < vector, (
            name, out[name])
