"""bench/device: the detached-pipeline scripts parse, and the poll refuses to
wait for a pipeline that is not on this machine (a fresh device machine)."""
from __future__ import annotations

import os
import subprocess

import pytest

HERE = os.path.join(os.path.dirname(__file__), "..", "bench", "device")


@pytest.mark.parametrize("script", ["fc32.sh", "poll.sh"])
def test_scripts_parse(script):
    assert subprocess.run(["bash", "-n", os.path.join(HERE, script)]).returncode == 0


def test_poll_fails_at_once_without_a_run(tmp_path):
    env = {**os.environ, "RUN_DIR": str(tmp_path / "absent")}
    got = subprocess.run(["bash", os.path.join(HERE, "poll.sh"), "100"], env=env,
                         capture_output=True, text=True, timeout=20)
    assert got.returncode == 3 and "fresh machine" in got.stderr


def test_poll_reports_a_finished_run(tmp_path):
    run, out = tmp_path / "run", tmp_path / "out"
    run.mkdir()
    out.mkdir()
    (run / "pipe.log").write_text("[00:00:00] prove rc 0\n")
    (run / "prove.log").write_text("proof 1.0 s\n")
    (run / "done").write_text("")
    env = {**os.environ, "RUN_DIR": str(run), "OUT": str(out)}
    got = subprocess.run(["bash", os.path.join(HERE, "poll.sh"), "100"], env=env,
                         capture_output=True, text=True, timeout=20)
    assert got.returncode == 0 and "prove rc 0" in got.stdout and "DONE" in got.stdout
    assert "proof 1.0 s" in got.stdout and (out / "run.tgz").stat().st_size > 0
