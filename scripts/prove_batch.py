"""Prove many instances of one proof kind with the engine, in this process.

Inputs: a directory of JSON input files (one job each, named by the file's
stem) or N synthetic instances of the kind (``CircuitSpec.synthetic``).
Writes each job's proof (its partitions' 192-byte proofs concatenated) to
``--out_dir/<name>.proof`` (temporary name, then rename), shows a progress
bar on stderr, and appends one JSON line per job (name, job id, status,
error, timings in seconds) plus a summary line (wall seconds, proofs per
second, median job seconds) to ``--log``.  Exits non-zero if a job failed.

    python3 scripts/prove_batch.py --kind cubic --sector_size 64 --synthetic 16 \\
        --keys_dir keys --max_batch_size 4 --log timings.jsonl
    python3 scripts/prove_batch.py --kind sha256-preimage --sector_size 64 --inputs_dir in/
    python3 scripts/prove_batch.py --registry filecoin --kind window-post --sector_size 2048 \\
        --synthetic 4 --keys_dir keys

Keys come from ``--keys_dir`` (``groth16.save_keys`` entries named by
``engine.key_name``); ``--setup_on_first_use`` runs a setup where one is
missing (with ``--setup_seed``: deterministic, for tests only).
"""
from __future__ import annotations

import json
import os
import random
import secrets
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so importing this module defines no flags."""
    flags.DEFINE_string("kind", "cubic", "proof kind (engine registry)")
    flags.DEFINE_enum("registry", "builtin", ["builtin", "filecoin"],
                      "proof kinds: the examples, or also the Filecoin kinds "
                      "(sector_size in bytes, e.g. 2048 for 2KiB)")
    flags.DEFINE_integer("sector_size", 64, "sector size (for the examples: the circuit size)")
    flags.DEFINE_string("inputs_dir", None, "directory of JSON input files, one job each")
    flags.DEFINE_integer("synthetic", None, "prove N synthetic instances instead", lower_bound=1)
    flags.DEFINE_integer("seed", None, "seed of the synthetic inputs (default: CSPRNG)")
    flags.DEFINE_string("priority", None, "job priority (default: the kind's)")
    flags.DEFINE_string("out_dir", None, "write <name>.proof files here")
    flags.DEFINE_string("log", None, "append JSON timing lines here")
    flags.DEFINE_string("keys_dir", None, "key store directory")
    flags.DEFINE_string("pce_dir", None, "PCE matrix cache directory")
    flags.DEFINE_bool("setup_on_first_use", False, "run a setup where keys are missing")
    flags.DEFINE_integer("setup_seed", None, "seeded setup (tests only: insecure)")
    flags.DEFINE_integer("max_batch_size", 1, "items per prove call", lower_bound=1)
    flags.DEFINE_float("max_batch_wait_ms", 0.0, "longest wait for a batch to fill")
    flags.DEFINE_integer("budget_bytes", None, "residency budget per device")
    flags.DEFINE_integer("msm_budget_bytes", None,
                         "streaming mode: MSM working-set budget; proving keys stay in host memory")
    flags.DEFINE_integer("out_of_core_bytes", None,
                         "the 16 GB mode: a, b, c and h computed out of core within this many "
                         "device bytes per program; proving keys and matrices in host memory")
    flags.DEFINE_bool("host_witness", True,
                      "the 16 GB mode: each witness waits in host memory and h is computed on "
                      "the device (--nohost_witness keeps every witness on the device)")
    flags.DEFINE_bool("pinned_key", False,
                      "streaming and the 16 GB mode: the proving keys' host vectors in pinned "
                      "(page-locked) host memory, so the MSMs put them faster")
    from jaxprove.modes import MEMORY_MODES
    flags.DEFINE_enum("memory_mode", "auto", list(MEMORY_MODES),
                      "auto: each circuit in the fastest mode that fits the device and "
                      "--budget_bytes (a budget above names the mode instead); or one mode "
                      "for all, budgets suggested from the device where not given")
    flags.DEFINE_bool("verify", True, "verify every proof before returning it")
    flags.DEFINE_bool("cache", True, "use the persistent compilation cache")


def progress(done: int, failed: int, total: int, t0: float, stream=sys.stderr):
    width = 30
    fill = int(width * done / total) if total else width
    stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} done"
                 f"{f', {failed} failed' if failed else ''}, {time.perf_counter() - t0:.1f} s")
    if done == total:
        stream.write("\n")
    stream.flush()


def _write(path: str, data: bytes):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def run_batch(engine, kind: str, sector_size: int, named_inputs: list, priority=None,
              out_dir: str | None = None, log_path: str | None = None, stream=sys.stderr):
    """Submit every (name, inputs) job to an engine not yet started, start it
    (so the first batches are full), wait for all (progress on ``stream``),
    write proofs and the timing log; returns the summary dict (including
    "failed": the names of failed jobs)."""
    t0 = time.perf_counter()
    ids = [(name, engine.submit(kind, sector_size, inputs, priority))
           for name, inputs in named_inputs]
    engine.start()
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    lines, failed, totals = [], [], []
    progress(0, 0, len(ids), t0, stream)
    for k, (name, jid) in enumerate(ids):
        r = engine.wait(jid)
        if r.status == "done":
            totals.append(r.timings["total"])
            if out_dir:
                _write(os.path.join(out_dir, f"{name}.proof"), r.proof)
        else:
            failed.append(name)
        lines.append({"name": name, "job_id": jid, "status": r.status, "error": r.error,
                      "partitions": len(r.public), "timings": r.timings})
        progress(k + 1, len(failed), len(ids), t0, stream)
    wall = time.perf_counter() - t0
    summary = {"summary": True, "kind": kind, "sector_size": sector_size, "jobs": len(ids),
               "done": len(totals), "failed": failed, "wall_s": wall,
               "proofs_per_s": len(totals) / wall if wall else None,
               "median_job_s": statistics.median(totals) if totals else None}
    if log_path:
        with open(log_path, "a") as f:
            for line in lines + [summary]:
                f.write(json.dumps(line) + "\n")
    return summary


def main(argv):
    del argv
    from jaxprove import engine as E
    from jaxprove import memory
    memory.widen_pinned_pool()   # before the backend starts: XLA's cap, within the host's share
    if (FLAGS.inputs_dir is None) == (FLAGS.synthetic is None):
        print("give exactly one of --inputs_dir and --synthetic", file=sys.stderr)
        return 2
    if FLAGS.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    if FLAGS.registry == "builtin":
        registry = E.builtin_registry()
    else:
        from jaxprove.filecoin_kinds import named_registry
        registry = named_registry(FLAGS.registry)
    spec = registry.get(FLAGS.kind, FLAGS.sector_size)
    if FLAGS.inputs_dir:
        named = []
        for fn in sorted(os.listdir(FLAGS.inputs_dir)):
            if fn.endswith(".json"):
                with open(os.path.join(FLAGS.inputs_dir, fn)) as f:
                    named.append((fn[:-5], json.load(f)))
        if not named:
            print(f"no .json input files in {FLAGS.inputs_dir}", file=sys.stderr)
            return 2
    else:
        if spec.synthetic is None:
            print(f"{FLAGS.kind} has no synthetic inputs", file=sys.stderr)
            return 2
        rng = random.Random(FLAGS.seed) if FLAGS.seed is not None else secrets.SystemRandom()
        named = [(f"synthetic-{i:04d}", spec.synthetic(rng)) for i in range(FLAGS.synthetic)]
    prover = E.Groth16Prover.from_settings(
        FLAGS.keys_dir, FLAGS.pce_dir, FLAGS.setup_on_first_use, FLAGS.setup_seed,
        FLAGS.memory_mode, FLAGS.msm_budget_bytes, FLAGS.out_of_core_bytes, FLAGS.budget_bytes,
        FLAGS.host_witness, FLAGS.pinned_key)
    config = E.EngineConfig(max_batch_size=FLAGS.max_batch_size,
                            max_batch_wait_s=FLAGS.max_batch_wait_ms / 1000.0,
                            budget_bytes=FLAGS.budget_bytes,
                            msm_budget_bytes=FLAGS.msm_budget_bytes, verify=FLAGS.verify)
    engine = E.Engine(registry, config, prover)
    try:
        summary = run_batch(engine, FLAGS.kind, FLAGS.sector_size, named, FLAGS.priority,
                            FLAGS.out_dir, FLAGS.log)
    finally:
        engine.shutdown()
    print(json.dumps(summary))
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    define_flags()
    app.run(lambda argv: sys.exit(main(argv)))
