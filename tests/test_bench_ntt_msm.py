"""bench.ntt_msm's command line: bad budget flags are refused by name
before any work (the benchmarks themselves run on the GPU)."""
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
