"""bench.ntt_msm's command line: bad budget flags and unknown MSM config variants are
refused by name before any work (the benchmarks themselves run on the GPU)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("flags", [["--hold-gib", "-1"], ["--msm-gib", "0"]])
def test_bad_budget_flags_are_refused(flags):
    r = subprocess.run([sys.executable, "-m", "bench.ntt_msm", "--budget", "10", *flags],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 2
    assert "--hold-gib must be at least 0 and --msm-gib above 0" in r.stderr


def test_g1_config_variants():
    """--g1-configs: each '+'-joined set of boolean MSMConfig fields (or
    field=value settings) on the default config; an unknown field or a bad
    value is refused by name before any work."""
    from bench import ntt_msm as B
    from ops import msm as M
    got = B.config_variants("xyzz, prefetch,xyzz+prefetch")
    assert [(c.xyzz, c.prefetch) for c in got] == [(True, False), (False, True), (True, True)]
    assert all(c.lanes == M.default_config().lanes for c in got)
    assert B.config_variants("") == []
    (off,) = B.config_variants("no_prefetch+xyzz")
    assert (off.prefetch, off.xyzz) == (False, True)
    with pytest.raises(ValueError, match="no_lanes"):
        B.config_variants("no_lanes")
    (w,) = B.config_variants("walk_registers=none+walk_block=128:4+window=18")
    assert (w.walk_registers, w.walk_block, w.window) == (None, (128, 4), 18)
    with pytest.raises(ValueError, match="walk_block"):
        B.config_variants("walk_block=48:1")                  # MSMConfig's own check
    with pytest.raises(ValueError, match="non-boolean"):
        B.config_variants("xyzz=1")
    r = subprocess.run([sys.executable, "-m", "bench.ntt_msm", "--g1", "10", "--g1-configs",
                        "xyzz+lanes"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 2 and "['lanes'] are not boolean MSMConfig fields" in r.stderr
    r = subprocess.run([sys.executable, "-m", "bench.ntt_msm", "--g1", "10", "--g1-block",
                        "48:1"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 2 and "LANES a power of two" in r.stderr
    r = subprocess.run([sys.executable, "-m", "bench.ntt_msm", "--g2", "10", "--shifts", "2,1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 2 and "--shifts: each factor must be at least 2" in r.stderr
    r = subprocess.run([sys.executable, "-m", "bench.ntt_msm", "--g2", "10", "--shifts", "2",
                        "--chunk-gib", "1"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 2 and "--shifts runs unchunked" in r.stderr


@pytest.mark.slow
def test_chunked_case(tmp_path):
    """--chunk-gib: the plain case runs through msm() in chunks (the record
    says how large) and its result is checked against the dot product."""
    import json
    from bench import ntt_msm as B
    from ops.curve import G1
    out = tmp_path / "r.jsonl"
    B.bench_msm(G1, [9], str(out), 5, windows=[7], chunk_gib=0.0015)
    (r,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert r["case"] == "msm_G1_c7_chunked" and r["window"] == 7
    assert r["checked"] is True and r["chunk"] < r["n"] == 512


def test_ntt_block_flag_checked():
    """--ntt-block: LANES:WARPS with LANES a power of two >= 32, refused by
    name otherwise before any work."""
    r = subprocess.run([sys.executable, "-m", "bench.ntt_msm", "--ntt", "10", "--ntt-block",
                        "48:1"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 2 and "--ntt-block 48:1" in r.stderr
