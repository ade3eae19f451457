"""bench/device: the detached-pipeline scripts parse, and the poll refuses to
wait for a pipeline that is not on this machine (a fresh device machine)."""
from __future__ import annotations

import os
import subprocess
import tarfile

import pytest

HERE = os.path.join(os.path.dirname(__file__), "..", "bench", "device")


@pytest.mark.parametrize("script", ["fc32.sh", "poll.sh", "cache.sh", "engine.sh", "kinds.sh", "kernels.sh", "caps.sh", "products.sh", "steps.sh", "windows.sh", "refit.sh"])
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
    (run / "circuits").mkdir()            # kinds.sh's recorded circuits (GBs: session 17's
    (run / "circuits" / "a.r1cs").write_bytes(b"r")     # run.tgz came back too large)
    (run / "fc").mkdir()
    (run / "fc" / "proof.json").write_text("{}")
    cache = tmp_path / "jc"
    cache.mkdir()
    (cache / "jit_f-1-cache").write_bytes(b"x" * 100)
    env = {**os.environ, "RUN_DIR": str(run), "OUT": str(out), "JAXPROVE_CACHE": str(cache)}
    got = subprocess.run(["bash", os.path.join(HERE, "poll.sh"), "100"], env=env,
                         capture_output=True, text=True, timeout=20)
    assert got.returncode == 0 and "prove rc 0" in got.stdout and "DONE" in got.stdout
    assert "proof 1.0 s" in got.stdout and (out / "run.tgz").stat().st_size > 0
    with tarfile.open(out / "run.tgz") as t:
        names = t.getnames()
    assert "./fc/proof.json" in names and not any("circuits" in n for n in names)
    assert (out / "jc.tgz.00").stat().st_size > 0          # the cache, for the next session


def test_poll_packs_an_unfinished_run_only_when_asked(tmp_path):
    """The session's last poll (PACK=1) hands the compiles on even if the
    pipeline was cut off; an ordinary poll of an unfinished run does not."""
    run, cache = tmp_path / "run", tmp_path / "jc"
    run.mkdir()
    cache.mkdir()
    (run / "pipe.log").write_text("[00:00:00] proving\n")
    (cache / "jit_f-1-cache").write_bytes(b"x" * 100)
    for pack in ("", "1"):
        out = tmp_path / f"out{pack}"
        out.mkdir()
        env = {**os.environ, "RUN_DIR": str(run), "OUT": str(out), "JAXPROVE_CACHE": str(cache),
               "PACK": pack}
        got = subprocess.run(["bash", os.path.join(HERE, "poll.sh"), "0"], env=env,
                             capture_output=True, text=True, timeout=20)
        assert got.returncode == 0 and "DONE" not in got.stdout and "proving" in got.stdout
        assert (out / "jc.tgz.00").exists() == bool(pack)


def _cache(env, *args, cwd=None):
    return subprocess.run(["bash", os.path.join(HERE, "cache.sh"), *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_cache_round_trip_keeps_the_newest_within_the_limit(tmp_path):
    """pack -> parts of at most 15 MB, newest entries first up to CACHE_MB;
    unpack on the next machine restores them byte for byte."""
    src, out, dst = tmp_path / "src", tmp_path / "out", tmp_path / "dst"
    src.mkdir()
    out.mkdir()
    blobs = {f"jit_p{i}-{i}-cache": os.urandom(400_000) for i in range(6)}
    for i, (name, data) in enumerate(blobs.items()):
        (src / name).write_bytes(data)
        os.utime(src / name, (1_000_000 + i, 1_000_000 + i))       # p5 is the newest
    env = {**os.environ, "OUT": str(out), "JAXPROVE_CACHE": str(src), "CACHE_MB": "1"}
    got = _cache(env, "pack")
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in out.iterdir()) == ["jc.tgz.00"]
    env = {**os.environ, "JAXPROVE_CACHE": str(dst), "CACHE_IN": str(out)}
    got = _cache(env, "unpack")
    assert got.returncode == 0 and "2 entries" in got.stdout, got.stdout + got.stderr
    assert sorted(p.name for p in dst.iterdir()) == ["jit_p4-4-cache", "jit_p5-5-cache"]
    for p in dst.iterdir():
        assert p.read_bytes() == blobs[p.name]


def test_cache_unpack_without_parts_and_bad_verb(tmp_path):
    env = {**os.environ, "JAXPROVE_CACHE": str(tmp_path / "c"), "CACHE_IN": str(tmp_path / "no")}
    got = _cache(env, "unpack")
    assert got.returncode == 0 and "nothing carried" in got.stdout
    assert _cache(env, "frobnicate").returncode == 2


def test_kinds_warm_phase_then_timed_alone(tmp_path):
    """kinds.sh with WARM_P=2: every case first with one timed proof
    (records to warm.jsonl), then each alone with five (small.jsonl), both
    through the recorded-circuit directory; a bad argument is named.  A
    stand-in python3 on PATH logs its arguments instead of proving."""
    bin_, run = tmp_path / "bin", tmp_path / "run"
    bin_.mkdir()
    fake = bin_ / "python3"
    fake.write_text('#!/bin/bash\necho "pool $XLA_PYTHON_CLIENT_MEM_FRACTION $*" >> "$R/calls"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "RUN_DIR": str(run),
           "JAXPROVE_CACHE": str(tmp_path / "jc"), "WARM_P": "2"}
    (tmp_path / "jc").mkdir()
    got = subprocess.run(["bash", os.path.join(HERE, "kinds.sh"), "porep:8MiB", "bogus",
                          "snap:512MiB"], env=env, capture_output=True, text=True, timeout=30)
    assert got.returncode == 0, got.stderr
    calls = (run / "calls").read_text().splitlines()
    assert len(calls) == 4
    warm, timed = calls[:2], calls[2:]
    assert sorted("--kinds porep" in c for c in warm) == [False, True]
    assert all("--reps 1 " in c and f"--out {run}/warm.jsonl" in c for c in warm)
    # the warm phase shares the GPU at JAX's default pool; a timed case has 95% of it alone
    assert all(c.startswith("pool 0.75 ") for c in warm)
    assert all(c.startswith("pool 0.95 ") for c in timed)
    assert ["--kinds porep --sizes 8MiB" in timed[0], "--kinds snap --sizes 512MiB" in timed[1]] == [True, True]
    assert all("--reps 5 " in c and f"--out {run}/small.jsonl" in c for c in timed)
    assert all(f"--circuit-dir {run}/circuits" in c for c in calls)
    log = (run / "pipe.log").read_text()
    assert "not kind:size: bogus" in log and "porep:8MiB timed rc 0" in log
    assert "snap:512MiB warm rc 0" in log


@pytest.mark.parametrize("kind_args, no_autotune", [("", False),
                                                    ("--budget-gb 16 --out-of-core-gb 13 --pinned-key", True)])
def test_engine_kind_step_takes_kind_args(tmp_path, kind_args, no_autotune):
    """engine.sh's `kind` step passes $KIND_ARGS to bench.engine, and in the 16 GB mode
    (an out-of-core budget) runs it without XLA's autotuning, as the `ooc` step."""
    bin_dir, run = tmp_path / "bin", tmp_path / "run"
    bin_dir.mkdir()
    fake = bin_dir / "python3"                       # records its arguments and environment
    fake.write_text('#!/bin/bash\necho "args: $*"\necho "xla: ${XLA_FLAGS:-}"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RUN_DIR": str(run),
           "STEPS": "kind", "KIND_ARGS": kind_args, "JAXPROVE_CACHE": str(tmp_path / "jc"),
           "CACHE_IN": str(tmp_path / "none")}
    got = subprocess.run(["bash", os.path.join(HERE, "engine.sh")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    log = (run / "kind.log").read_text()
    assert "--case kind --kind porep --size 32GiB --proofs 5" in log
    assert log.split("args: ")[1].split("\n")[0].endswith(kind_args or "/tmp/fc32")
    assert ("--xla_gpu_autotune_level=0" in log) == no_autotune
    assert "kind rc 0" in (run / "pipe.log").read_text() and (run / "done").exists()


def test_probe_put_reports_every_case():
    """bench/device/probe_put.py runs on the CPU at a small size and prints one JSON
    line per case, with a rate for each put."""
    import json
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    got = subprocess.run([sys.executable, os.path.join(HERE, "probe_put.py"), "12", "8"],
                         env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    rows = [json.loads(l) for l in got.stdout.splitlines() if l.startswith("{")]
    assert [r["case"] for r in rows] == ["pin", "pageable_each", "pinned_each",
                                         "pinned_in_flight", "raw_pinned_pieces",
                                         "pinned_view_planes", "pinned_array_whole"]
    assert all(r["GB_s"] > 0 for r in rows[1:]) and rows[0]["n"] == 1 << 12
