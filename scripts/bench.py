"""Run benchmark suites into ``bench/results/`` (one file per suite and tag).

Each suite is a fixed list of steps, each step one ``python3 -m bench.<module>
...`` command run in its own process with a wall-clock limit, so a step that
runs out of time (a first compile on a fresh GPU machine takes minutes) costs
only itself: every benchmark writes its JSON records as it goes, and the next
step still runs.  The records of suite S go to ``--results_dir/S_<tag>.jsonl``;
the exact commands, their exit status and seconds to ``S_<tag>.commands.txt``
beside it; the NTT/MSM suite's records are also plotted (``bench.plot``,
SVG).  A step's records carry the commit (``JAXPROVE_COMMIT`` or git).

    python3 scripts/bench.py --suites ntt_msm,groth16 --tag h200_run8
    python3 scripts/bench.py --suites smoke --tag cpu              # seconds on a CPU
    python3 scripts/bench.py --suites all --tag h200 --dry_run     # print the plan

Suites (issues 3-7; sizes are the issues' and do not fit a CPU):
  ntt_msm   NTT 2^16..2^24 and 2^26, MSM G1 2^16..2^24, G2 2^16..2^22, 75%-bit
            MSMs at 2^22 and 2^24, MSM G1 at 2^26 under a 16 GB budget
  groth16   SHA-256 circuits at 2^16, 2^20, 2^24 (proofs saved as snarkjs JSON)
  pce       SpMV on the 32GiB-PoRep-shaped matrices (largest that fits), ELL and CSR
  witness   witness generation rates, recording 10^6..10^8 constraints
  filecoin  every proof kind at 2KiB (proof + verify), 8MiB and 512MiB (proof), 32GiB
            PoRep record-only; the stage plot beside cuzk's figures
            and PoRep 512MiB in the 16 GB mode (key, matrices, a, b, c, h in host memory)
  out_of_core  the out-of-core h at 2^23 within 2 GiB: in core, serial and pipelined sweeps
  engine    the 32GiB-PoRep-shaped job (10 partitions of 4M rows) resident and within a
            16 GB budget, and the mixed stream (WinningPoSt latency under PoRep load)
  smoke     tiny sizes of ntt_msm and groth16 (checks the harness on a CPU)
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # noqa: E402

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# suite -> [(step name, module, arguments, seconds allowed)]
SUITES = {
    "ntt_msm": [
        ("ntt", "bench.ntt_msm", ["--ntt", "16,18,20,22,24,26"], 300),
        ("g1", "bench.ntt_msm", ["--g1", "16,18,20,22,24"], 400),
        ("bits", "bench.ntt_msm", ["--bits", "22,24"], 400),
        ("g2", "bench.ntt_msm", ["--g2", "16,18,20,22"], 600),
        ("budget", "bench.ntt_msm", ["--budget", "26", "--budget-gb", "16"], 600),
    ],
    "groth16": [
        ("sha256", "bench.groth16", ["--sizes", "16,20,24", "--cache", "--save", "{results}/proofs/groth16_{tag}"],
         1800),
    ],
    "pce": [
        ("porep_shape", "bench.pce", ["--rows", "130278541", "--layouts", "ell,csr"], 900),
    ],
    "witness": [
        ("rates", "bench.witness", ["--record", "1e6,1e7,1e8"], 1800),
    ],
    "filecoin": [
        ("2KiB", "bench.filecoin", ["--sizes", "2KiB", "--cache", "--save", "{results}/proofs/filecoin_{tag}"],
         1800),
        ("8MiB_512MiB", "bench.filecoin", ["--sizes", "8MiB,512MiB", "--cache", "--no-verify",
                                           "--save", "{results}/proofs/filecoin_{tag}"], 3600),
        ("32GiB_record", "bench.filecoin", ["--kinds", "porep", "--sizes", "32GiB", "--record-only"], 1800),
        ("16gb_512MiB", "bench.filecoin", ["--kinds", "porep", "--sizes", "512MiB",
                                           "--keys-in-host-memory", "--msm-budget-gib", "4",
                                           "--out-of-core-gib", "2", "--cache", "--no-verify"],
         1200),
    ],
    "out_of_core": [
        ("h_2p23", "bench.out_of_core", ["--log-m", "23", "--budget-gib", "2"], 600),
    ],
    "engine": [
        ("porep_shaped", "bench.engine", ["--case", "porep_shaped", "--rows", "4000000",
                                          "--partitions", "10", "--proofs", "5", "--cache"], 1800),
        ("budget16", "bench.engine", ["--case", "porep_shaped", "--rows", "4000000",
                                      "--partitions", "10", "--proofs", "5", "--cache",
                                      "--budget-gb", "16"], 1800),
        ("mixed", "bench.engine", ["--case", "mixed", "--rows", "4000000", "--partitions", "10",
                                   "--cache", "--post", "real", "--post-size", "32GiB",
                                   "--window-every", "0", "--winning", "6", "--winning-every", "5",
                                   "--inflight", "2"], 2400),
    ],
    "smoke": [
        ("ntt", "bench.ntt_msm", ["--ntt", "8,10", "--reps", "5"], 600),
        ("groth16", "bench.groth16", ["--sizes", "8", "--circuit", "dense", "--reps", "5",
                                      "--no-verify"], 1200),
    ],
}
# suite -> bench.plot's arguments for its records (one SVG beside them)
PLOTTED = {"ntt_msm": [], "filecoin": ["--stages", "--cuzk"]}


def define_flags():
    """Defined when run as a script only, so importing this module defines no flags."""
    flags.DEFINE_string("suites", "smoke", "comma-separated suites, or 'all': " + ", ".join(SUITES))
    flags.DEFINE_string("tag", None, "results file suffix, e.g. h200_run8 (required)")
    flags.DEFINE_string("results_dir", "bench/results", "where records, commands and plots go")
    flags.DEFINE_float("time_scale", 1.0, "multiply every step's time limit by this")
    flags.DEFINE_bool("dry_run", False, "print the steps and exit")


def plan(suites: list[str], tag: str, results: str, scale: float = 1.0) -> list[dict]:
    """The steps to run: dicts with suite, step, argv, out, timeout_s."""
    steps = []
    for s in suites:
        if s not in SUITES:
            raise ValueError(f"unknown suite {s!r}; known: {', '.join(SUITES)}")
        out = os.path.join(results, f"{s}_{tag}.jsonl")
        for name, module, args, limit in SUITES[s]:
            args = [a.format(results=results, tag=tag) for a in args]
            steps.append({"suite": s, "step": name, "out": out, "timeout_s": max(1, int(limit * scale)),
                          "argv": [sys.executable, "-m", module, *args, "--out", out]})
    return steps


def run_step(st: dict, log) -> int:
    """Run one step under its time limit; append its command line and outcome
    to the suite's commands file.  Returns the exit status (124: timed out)."""
    cmd = shlex.join(["python3"] + st["argv"][1:])
    print(f"[{time.strftime('%H:%M:%S')}] {st['suite']}/{st['step']}: {cmd} "
          f"(limit {st['timeout_s']} s)", file=sys.stderr, flush=True)
    t = time.perf_counter()
    try:
        rc = subprocess.run(st["argv"], timeout=st["timeout_s"], cwd=ROOT).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    dt = time.perf_counter() - t
    log.write(f"{cmd}\t# exit {rc}{' (time limit)' if rc == 124 else ''}, {dt:.0f} s\n")
    log.flush()
    return rc


def main(argv):
    del argv
    if not FLAGS.tag:
        raise app.UsageError("--tag is required (it names the results files)")
    suites = list(SUITES) if FLAGS.suites == "all" else [s for s in FLAGS.suites.split(",") if s]
    try:
        steps = plan(suites, FLAGS.tag, FLAGS.results_dir, FLAGS.time_scale)
    except ValueError as e:
        raise app.UsageError(str(e))
    if FLAGS.dry_run:
        for st in steps:
            print(f"{st['suite']}/{st['step']} ({st['timeout_s']} s): {shlex.join(st['argv'])}")
        return 0
    os.makedirs(FLAGS.results_dir, exist_ok=True)
    env_commit = os.environ.get("JAXPROVE_COMMIT")
    failed = []
    for s in suites:
        mine = [st for st in steps if st["suite"] == s]
        with open(os.path.join(FLAGS.results_dir, f"{s}_{FLAGS.tag}.commands.txt"), "a") as log:
            if env_commit:
                log.write(f"# JAXPROVE_COMMIT={env_commit}\n")
            for st in mine:
                if run_step(st, log) != 0:
                    failed.append(f"{s}/{st['step']}")
        if s in PLOTTED and os.path.exists(mine[0]["out"]):
            svg = mine[0]["out"][:-len(".jsonl")] + ".svg"
            subprocess.run([sys.executable, "-m", "bench.plot", *PLOTTED[s], mine[0]["out"],
                            "--out", svg], cwd=ROOT)
    if failed:
        print(f"steps that failed or ran out of time: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
