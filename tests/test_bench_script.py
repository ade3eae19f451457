"""scripts/bench.py: the suites' steps (commands, results files, limits), and
every step's arguments accepted by its benchmark's own argument parser (so a
suite cannot carry a flag its module no longer knows; the modules stop right
after parsing here)."""
import argparse
import importlib
import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench_script():
    spec = importlib.util.spec_from_file_location("bench_script",
                                                  os.path.join(ROOT, "scripts", "bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plan_names_commands_files_and_limits(bench_script):
    steps = bench_script.plan(["filecoin", "engine"], "h200_x", "/r", scale=0.5)
    names = [(s["suite"], s["step"]) for s in steps]
    assert names == [("filecoin", "2KiB"), ("filecoin", "8MiB_512MiB"),
                     ("filecoin", "32GiB_record"), ("filecoin", "16gb_512MiB"),
                     ("engine", "porep_shaped"),
                     ("engine", "budget16"), ("engine", "mixed")]
    by = {s["step"]: s for s in steps}
    sm = by["8MiB_512MiB"]
    assert sm["argv"][1:3] == ["-m", "bench.filecoin"] and sm["argv"][-2:] == ["--out",
                                                                             "/r/filecoin_h200_x.jsonl"]
    assert "/r/proofs/filecoin_h200_x" in sm["argv"] and sm["timeout_s"] == 1800
    assert by["budget16"]["argv"][-4:-2] == ["--budget-gb", "16"]
    assert by["mixed"]["out"] == "/r/engine_h200_x.jsonl"
    with pytest.raises(ValueError, match="unknown suite 'nope'"):
        bench_script.plan(["nope"], "t", "/r")
    assert set(bench_script.PLOTTED) <= set(bench_script.SUITES)


class _Parsed(Exception):
    pass


def test_every_step_parses_with_its_modules_parser(bench_script, monkeypatch):
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    steps = bench_script.plan(list(bench_script.SUITES), "t", "/tmp/r")
    for st in steps:
        module = st["argv"][2]
        monkeypatch.setattr(sys, "argv", [module] + st["argv"][3:])
        mod = importlib.import_module(module)
        with pytest.raises(_Parsed):
            mod.main()
    # and a bad flag would have failed: argparse exits on it
    monkeypatch.setattr(sys, "argv", ["bench.engine", "--case", "mixed", "--no-such-flag"])
    with pytest.raises(SystemExit):
        importlib.import_module("bench.engine").main()


def test_dry_run_prints_the_plan():
    got = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench.py"),
                          "--suites", "engine", "--tag", "t", "--dry_run"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert got.returncode == 0, got.stderr
    assert got.stdout.count("engine/") == 3 and "--case mixed" in got.stdout
