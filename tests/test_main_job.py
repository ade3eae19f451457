"""The README's main job (``scripts/prove.py``) end to end in a subprocess:
a real proof on the built-in circuit, verified, its 192-byte encoding written
atomically.  Slow on the CPU (setup and the first proof compile for minutes)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_main_job_proves_and_verifies(tmp_path):
    out = tmp_path / "proof.bin"
    r = subprocess.run([sys.executable, "scripts/prove.py", "--circuit", "cubic", "--cubes", "8",
                        "--batch", "2", "--seed", "3", "--out", str(out), "--nocache"],
                       cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "OK: every proof verified" in r.stdout
    assert out.stat().st_size == 2 * 192
    assert [p.name for p in tmp_path.iterdir()] == ["proof.bin"]          # no temporaries left
