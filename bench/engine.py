"""Proving-engine benchmarks (issue 7): PoRep-shaped proofs through
``jaxprove.engine`` — one proof's latency, steady-state throughput, a
device-memory budget, several devices, and WinningPoSt latency while PoRep
work runs.

**The PoRep-shaped circuit** (``porep_shaped``, kind ``porep-shaped``,
sector size = its rows): Filecoin's witness structure, almost every variable
a bit, sized to a given number of R1CS rows (default 130,278,541: one 32GiB
PoRep partition, domain 2^27).  One partition =

* ``blocks`` SHA-256 compressions (bellperson's gadget, 26,352 rows each:
  512 allocated bits and one compression) of free 512-bit blocks,
* ``pairs`` ≥ 256 XORs z = x ⊕ y of two free bits (3 rows each), the first
  256 results packed into 2 public inputs (``multipack``),
* ``singles`` < 3 lone free bits (1 row each),
* ``dense`` squares y = x² of free field elements (1 row, 2 variables that
  are not bits each), so that about ``DENSE_VAR_FRACTION`` of the variables
  are not bits: their share in the recorded 2KiB PoRep circuit (43,846 of
  2,685,713), so the MSMs see Filecoin's mix of 0/1 and full scalars,

with ``shape_for_rows`` choosing them so the rows are exactly the requested
number (at least ``min_rows()``, 773: below one block the circuit is XORs
alone).  A partition's input is a seed; its bits and field elements come
from ``partition_bits`` (numpy's PCG64), so jobs are cheap to submit.  The row,
variable and bit counts are linear in the shape (``circuit_counts``, from two
small recorded circuits), which gives the key and memory estimates before
any setup.

**Cases** (``python -m bench.engine --case …``):

* ``porep_shaped``: keys are set up once (``Engine.preload`` on every worker:
  record, Groth16 setup on first use, PCE extraction, keys and matrices to
  each device: ``setup_s``, reported apart); a warm-up job of P partitions
  (compiles: ``warmup_s``); then one job of P partitions alone
  (``latency_s``: the engine's submission → done); then K jobs submitted at
  once: ``throughput_proofs_per_s`` = (K − 1) / (last done − first done),
  the jobs after the first (``throughput_basis`` says so; for K = 1 it is
  1 / that job's total), ``throughput_total_proofs_per_s`` = K / (last done
  − submission), ``s_per_proof`` = 1 / throughput, and the per-stage medians
  over the K jobs of the jobs' timings (per job: each stage summed over its
  P partitions; ``prove_per_partition_median_s`` divides prove by P).
  ``--budget-gb G``: the engine in streaming mode within G GiB (2^30 bytes,
  as a card's memory is quoted): proving keys in host memory
  (``Groth16Prover(keys_in_host_memory=True)``), residency budget G, every
  MSM bounded by ``msm_budget_bytes`` = G − (matrices + NTT buffers, the
  ``bench.filecoin.plan`` estimate) unless ``--msm-budget-gb``.
  ``--msm-budget-gb`` alone keeps the keys on the device and bounds only
  the MSMs (separate, chunked passes instead of the merged ones).
  ``--out-of-core-gb O`` with ``--budget-gb``: the 16 GB mode at full size
  (``Groth16Prover(out_of_core_budget=)``): the PCE matrices stay in host
  memory too and a, b, c and h are computed out of core within O GiB
  (nothing resident on the device; the MSM budget defaults to G − 32·(n +
  max(n, m)) bytes, w and its copy beside the MSMs); each witness waits in
  host memory and h is computed on the device (``Groth16Prover``'s default,
  bench/NOTES.md hypothesis 83) unless ``--no-host-witness``.
  ``--devices D``: the first D local devices, one engine worker each (the
  partitions of a job spread over them); a 1-device and a 2-device record
  give the scaling ratio (``throughput_proofs_per_s`` of each).
* ``kind`` (``--kind K --size S``): the same measurements for a registered
  Filecoin kind, the real circuit (``jaxprove.filecoin_kinds``; PoRep 32GiB:
  10 partitions of 130,278,541 rows), every job proving one synthetic
  sector (made once; fresh r, s per proof) through the engine's whole path,
  its JSON parsed per job; ``--circuit-dir``: the recorded circuit and its
  matrices loaded from where ``bench.filecoin --circuit-dir`` stored them
  (``run_kind``).
* ``mixed``: ``--inflight`` PoRep-shaped jobs (NORMAL) kept in flight (one
  submitted as soon as one finishes) while ``--winning`` WinningPoSt jobs
  arrive every ``--winning-every`` s and WindowPoSt jobs every
  ``--window-every`` s.  ``--post real`` (default): the registered
  ``winning-post`` (CRITICAL) and ``window-post`` (HIGH) kinds of
  ``jaxprove.filecoin_kinds`` at ``--post-size`` (default 2KiB), synthetic
  inputs made before the stream starts; ``--post standin``: the PoRep-shaped
  circuit at ``--post-rows`` (default: the PoRep rows, one shared topology)
  registered as ``winning-post-standin`` (CRITICAL, 1 partition) and
  ``window-post-standin`` (HIGH).  Recorded: every WinningPoSt job's latency
  and queue wait (median, max, all), the same for WindowPoSt, the PoRep
  throughput during the stream (PoRep jobs done between the first
  WinningPoSt submission and the last PoSt job's completion, per second),
  and the priority evidence per WinningPoSt job: NORMAL items still queued
  just after its submission and how many earlier PoRep jobs it overtook
  (finished after it).  PoRep jobs in flight at the end are drained.

Both cases keep verify-before-return on (the engine's default; ``verify`` in
the record) unless ``--no-verify``, check every proof's public inputs
against the ones computed on the host from the job's seeds
(``public_match``), and fail loudly if a job fails.  Before anything is
recorded or set up the memory plan (``plan_case``) is checked against the
machine (``bench.filecoin.limits``): a case that cannot fit is refused with
``DoesNotFit`` naming the shortfall (a ``skipped`` record is written first);
``--force`` tries anyway.

Every record: case, phase (setup, latency, done: records are written as soon
as they exist), rows, partitions, devices, budget_bytes, setup_s,
latency_s, throughput_proofs_per_s, stages_median_s, batches_per_worker (batches each
device's worker proved, warm-up and latency jobs included), peak_bytes (per
device: the process's peak so far, ``memory_stats``; None on the CPU),
peak_bytes_sampled (per device: the most bytes in use seen by a 10 ms poll
while jobs ran), resident_bytes (the engine's residency per worker), the
plan's estimates (est_*), device, jax, commit (``bench.common.environment``)
and the command.

    python -m bench.engine --case porep_shaped --rows 130278541 --partitions 10 --proofs 5
    python -m bench.engine --case porep_shaped --rows 130278541 --budget-gb 16
    python -m bench.engine --case porep_shaped --budget-gb 16 --out-of-core-gb 9
    python -m bench.engine --case porep_shaped --devices 2 --proofs 6
    python -m bench.engine --case mixed --rows 130278541 --winning 10 --winning-every 5

Goals (issue 7): ≤ 15 s per 32GiB-PoRep-shaped proof in steady state on one
H200, ≤ 60 s within a 16 GB budget, ≥ 1.8× throughput on two GPUs,
WinningPoSt ≤ 1 s while PoRep jobs run.  Anchors (research/cuzk.md): cuzk
36.7 s per 32GiB PoRep proof in steady state on an RTX 5070 Ti (16 GB),
WinningPoSt 0.8 s end to end.
"""
from __future__ import annotations

import argparse
import dataclasses
import contextlib
import functools
import random
import statistics
import sys
import threading
import time
from typing import Callable, NamedTuple

import jax
import numpy as np

from bench.common import argv_command, emit, environment
from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets import multipack as MP
from circuits.gadgets import sha256 as S
from circuits.gadgets.num import Num
from jaxprove import engine as E
from jaxprove import memory
from jaxprove.engine import Priority

DEFAULT_ROWS = 130_278_541         # one 32GiB PoRep partition (research/filecoin-circuits.md)
DEFAULT_PARTITIONS = 10
PUBLIC_BITS = 256                  # XOR results packed into the public inputs (2 of them)
DENSE_VAR_FRACTION = 0.0163        # non-boolean variables of the 2KiB PoRep circuit, recorded
GIB = 1 << 30
MIN_MSM_BUDGET = 8 << 20           # below this an MSM budget is taken as "does not fit"
R1CS_BYTES_PER_ROW = 100           # a recorded circuit, kept until its keys exist (89 measured:
                                   # porep-shaped, 4·10^5 rows, session 24)
GOALS = {"s_per_proof": 15.0, "s_per_proof_budget_16gb": 60.0, "scaling_2_devices": 1.8,
         "winning_post_s": 1.0}
ANCHORS = {"cuzk_s_per_proof_rtx5070ti": 36.7, "cuzk_winning_post_s": 0.8}
KIND = "porep-shaped"
STANDINS = {"winning": ("winning-post-standin", Priority.CRITICAL, 1),
            "window": ("window-post-standin", Priority.HIGH, None)}


def _say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the circuit
class Shape(NamedTuple):
    """One partition of the PoRep-shaped circuit (module docstring)."""
    blocks: int
    pairs: int
    singles: int
    dense: int


def porep_shaped(cs, bits, blocks: int, pairs: int, singles: int, dense: int):
    """The circuit.  ``bits`` (witness mode, per instance): {"blocks": uint32
    0/1 ``(blocks, 512)``, "fill": uint32 0/1 ``(2·pairs + singles,)``,
    "dense": Fr ``(8, dense)``}; None when recording.  Public inputs: the
    packing of (fill[i] ⊕ fill[pairs + i]) for i < 256."""
    rec = cs.recording
    if dense:
        Num.alloc(cs, (dense,), None if rec else (lambda: bits["dense"])).square(cs)
    if blocks:
        x = Bo.alloc_bits(cs, (blocks, 512), None if rec else (lambda: bits["blocks"]))
        S.block_no_padding(cs, x)
    xy = Bo.alloc_bits(cs, (2, pairs),
                       None if rec else (lambda: bits["fill"][:2 * pairs].reshape(2, pairs)))
    z = Bo.xor(cs, xy[0], xy[1])
    if singles:
        Bo.alloc_bits(cs, (singles,), None if rec else (lambda: bits["fill"][2 * pairs:]))
    MP.pack_into_inputs(cs, z[:PUBLIC_BITS])


class Counts(NamedTuple):
    """rows (constraints + inputs, ONE included), num_inputs (ONE included),
    num_aux, bit_vars (variables proven boolean)."""
    rows: int
    num_inputs: int
    num_aux: int
    bit_vars: int

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.num_aux


def _counts_of(r1cs) -> Counts:
    return Counts(r1cs.num_rows, r1cs.num_inputs, r1cs.num_aux,
                  int(np.count_nonzero(r1cs.bit_vars)))


@functools.lru_cache(maxsize=1)
def _unit_counts() -> tuple[Counts, Counts]:
    """(counts of Shape(0, 256, 0, 0), counts added by one SHA-256 block), recorded."""
    base = _counts_of(C.record(porep_shaped, 0, PUBLIC_BITS, 0, 0))
    one = _counts_of(C.record(porep_shaped, 1, PUBLIC_BITS, 0, 0))
    return base, Counts(*(a - b for a, b in zip(one, base)))


def circuit_counts(shape: Shape) -> Counts:
    """Counts of a shape without recording it: base + blocks·(one block) +
    3 rows / 3 bit variables per pair beyond 256 + 1 per single + 1 row and
    2 variables (not bits) per dense square."""
    base, block = _unit_counts()
    extra = 3 * (shape.pairs - PUBLIC_BITS) + shape.singles
    return Counts(base.rows + shape.blocks * block.rows + extra + shape.dense, base.num_inputs,
                  base.num_aux + shape.blocks * block.num_aux + extra + 2 * shape.dense,
                  base.bit_vars + shape.blocks * block.bit_vars + extra)


def min_rows() -> int:
    """The smallest PoRep-shaped circuit (no blocks, 256 pairs, no squares)."""
    return _unit_counts()[0].rows


def shape_for_rows(rows: int) -> Shape:
    """The shape with exactly ``rows`` rows: ``DENSE_VAR_FRACTION`` of the
    rows above the smallest circuit as dense variables (squares), then as
    many SHA-256 blocks as fit, the rest XOR pairs and lone bits.
    ValueError below ``min_rows()``."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < min_rows():
        raise ValueError(f"porep-shaped: rows must be an integer >= {min_rows()} "
                         f"(256 XORs packed into 2 public inputs), got {rows!r}")
    base, block = _unit_counts()
    dense = int((rows - base.rows) * DENSE_VAR_FRACTION) // 2
    blocks, rem = divmod(rows - base.rows - dense, block.rows)
    return Shape(blocks, PUBLIC_BITS + rem // 3, rem % 3, dense)


def partition_bits(seed: int, shape: Shape) -> dict:
    """The inputs of one partition from its seed (numpy's PCG64), drawn in
    this order: the blocks' bits, the fill bits, the dense values (Fr
    Montgomery limbs ``(8, dense)``, any value below 2^252 < r)."""
    g = np.random.default_rng(seed)
    out = {"blocks": g.integers(0, 2, (shape.blocks, 512), dtype=np.uint32),
           "fill": g.integers(0, 2, 2 * shape.pairs + shape.singles, dtype=np.uint32)}
    dense = g.integers(0, 1 << 32, (8, shape.dense), dtype=np.uint32)
    dense[7] &= 0x0FFFFFFF
    out["dense"] = dense
    return out


def public_inputs(seed: int, shape: Shape) -> list[int]:
    """The partition's public inputs (ONE excluded), computed on the host."""
    fill = partition_bits(seed, shape)["fill"]
    return MP.compute_multipacking(fill[:PUBLIC_BITS] ^ fill[shape.pairs:shape.pairs + PUBLIC_BITS])


_IN_AXES = {"blocks": 0, "fill": 0, "dense": 1}      # the instance axis of each input


def porep_shaped_spec(rows: int, kind: str = KIND, priority: Priority = Priority.NORMAL,
                      partitions: int | None = None) -> E.CircuitSpec:
    """The PoRep-shaped circuit of ``rows`` rows as an engine kind (sector
    size = rows).  Inputs: {"seeds": [one integer in [0, 2^63) per
    partition]}.  Kinds of one row count share one topology (keys,
    matrices, compiled programs)."""
    shape = shape_for_rows(rows)
    topology = (f"porep-shaped-r{rows}-b{shape.blocks}-x{shape.pairs}-s{shape.singles}"
                f"-d{shape.dense}")

    def split(inputs):
        seeds = inputs.get("seeds") if isinstance(inputs, dict) else None
        if not isinstance(seeds, list) or not seeds:
            raise ValueError(f"{kind}: inputs must be {{'seeds': [one integer per partition]}}")
        for i, s in enumerate(seeds):
            if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 1 << 63:
                raise ValueError(f"{kind} partition {i}: seed {s!r:.40} is not an integer "
                                 f"in [0, 2^63)")
        return list(seeds)

    def witness(seeds):
        import jax.numpy as jnp
        bits = [partition_bits(s, shape) for s in seeds]
        batch = {k: jnp.asarray(np.stack([b[k] for b in bits], axis=ax))
                 for k, ax in _IN_AXES.items()}
        return C.witness(porep_shaped, batch, *shape, in_axes=_IN_AXES)

    def synthetic(rng):
        return job_inputs(rng, partitions or 1)

    return E.CircuitSpec(kind, rows, topology,
                         lambda: C.record(porep_shaped, *shape, name=topology),
                         split, witness, priority, partitions, synthetic)


def job_inputs(rng: random.Random, partitions: int) -> dict:
    """A PoRep-shaped job of ``partitions`` partitions (fresh seeds)."""
    return {"seeds": [rng.randrange(1 << 63) for _ in range(partitions)]}


# ---------------------------------------------------------------- memory plan
class DoesNotFit(ValueError):
    """The requested case cannot fit this machine (the message says why)."""


def _gib(b) -> str:
    return f"{b / GIB:.2f} GiB" if b >= GIB else f"{b / 2**20:.1f} MiB"


class KindPlan(NamedTuple):
    """Estimated bytes of one registered kind (``bench.filecoin.plan``)."""
    kind: str
    rows: int
    key_bytes: int
    matrices_bytes: int
    setup_peak_bytes: int
    resident_bytes: int        # device: key (unless in host memory) + matrices
    work_bytes: int            # proving's device working set beyond the resident entry
    merged_work_bytes: int     # the same with the merged MSM passes
    record_bytes: int          # host, while recording and extracting
    setup_host_bytes: int      # host during the setup: the recorded circuit, matrices, key
    host_bytes: int            # host from then on: the key's one host copy and the
                               # matrices; out of core the matrices' prepared row
                               # blocks too and a, b, c, h (4 vectors of m)


def kind_plan(kind: str, counts: Counts, budget: int | None, msm_budget: int | None,
              out_of_core: int | None = None) -> KindPlan:
    """``bench.filecoin.plan`` for a circuit of known counts (every non-bit
    variable taken as dense).  Without an MSM budget ``groth16.prove_msms``
    merges the MSMs only when that fits 80% of the free device memory, else
    chunks them within it, so the working set counts ``MIN_MSM_BUDGET`` for
    the MSMs (``merged_work_bytes``: with the merged passes).  The engine
    keeps one host copy of the key (with a budget the key's vectors stay
    there, split: ``Groth16Prover(keys_in_host_memory=True)``).
    ``out_of_core`` (bytes, with a budget; the 16 GB mode,
    ``Groth16Prover(out_of_core_budget=)``): the matrices stay in host
    memory too, nothing is resident on the device, and proving holds w and
    the larger of the out-of-core steps and the MSMs' stage."""
    from bench import filecoin as BF
    host_keys = budget is not None
    if out_of_core is not None and not host_keys:
        raise ValueError("kind_plan: out_of_core needs a budget (keys in host memory)")
    matrices = BF.MATRIX_BYTES_PER_ROW * counts.rows

    def plan(msm, host=host_keys, ooc=out_of_core):
        return BF.plan(counts.rows, counts.num_vars, counts.num_aux,
                       counts.num_vars - counts.bit_vars, matrices, msm, host,
                       out_of_core=ooc if host else None)

    p = plan(MIN_MSM_BUDGET if msm_budget is None else msm_budget)
    if out_of_core is None:       # the engine keeps the matrices in host memory too
        resident, host = matrices + (0 if host_keys else p.key_bytes), p.key_bytes + matrices
    else:
        resident, host = 0, p.host_prove_bytes
    setup = plan(msm_budget, host=False).setup_peak_bytes     # the engine sets up on the device
    return KindPlan(kind, counts.rows, p.key_bytes, matrices, setup, resident,
                    p.prove_peak_bytes - resident, plan(msm_budget).prove_peak_bytes - resident,
                    p.host_record_bytes, R1CS_BYTES_PER_ROW * counts.rows + matrices
                    + p.key_bytes, host)


def _kind_counts(kind: str, size: str) -> Counts:
    """Upper-bound counts of a registered Filecoin kind from the research
    formulas (every aux variable taken as dense)."""
    from bench import filecoin as BF
    constraints, inputs = BF.counts(kind, size)
    return Counts(constraints + inputs + 1, inputs + 1, constraints, 0)


def msm_budget_for(counts: Counts, budget: int, out_of_core: int | None = None) -> int:
    """The MSM budget left within ``budget`` bytes once the matrices and the
    NTT buffers (``bench.filecoin.plan``, keys in host memory) are counted;
    out of core, once the MSMs' stage holds w and its copy w ‖ r (h goes a
    chunk at a time): 32·2·num_vars."""
    if out_of_core is None:
        p = kind_plan(KIND, counts, budget, 0)
        return budget - p.resident_bytes - p.work_bytes
    from bench import filecoin as BF
    return budget - BF.FR_BYTES * 2 * counts.num_vars


def plan_case(plans: list[KindPlan], budget: int | None, msm_budget: int | None,
              limits: dict) -> tuple[dict, str | None]:
    """(the estimates as record fields, why it cannot fit or None).  Device,
    per worker: setup = the largest setup peak + the other kinds' resident
    entries; proving = every kind resident + the largest working set (with a
    budget: within the budget, and the MSM budget at least
    ``MIN_MSM_BUDGET``); host: the kinds are set up in turn, each while
    the earlier ones hold their host bytes: the largest of those sums with
    each kind's recording or setup, and all kinds' host bytes."""
    resident = sum(p.resident_bytes for p in plans)
    setup = max(p.setup_peak_bytes + resident - p.resident_bytes for p in plans)
    prove = resident + max(p.work_bytes for p in plans)
    host = held = 0
    for p in plans:
        host = max(host, held + max(p.record_bytes, p.setup_host_bytes))
        held += p.host_bytes
    host = max(host, held)
    rec = {"est_key_bytes": {p.kind: p.key_bytes for p in plans},
           "est_matrices_bytes": {p.kind: p.matrices_bytes for p in plans},
           "est_setup_peak_bytes": setup, "est_prove_peak_bytes": prove,
           "est_prove_peak_merged_msm_bytes": resident + max(p.merged_work_bytes for p in plans),
           "est_host_bytes": host, "limit_device_bytes": limits["device"],
           "limit_host_bytes": limits["host"]}
    big = max(plans, key=lambda p: p.rows)
    what = f"{big.rows:,} rows (key {_gib(big.key_bytes)})"
    if budget is not None:
        if msm_budget < MIN_MSM_BUDGET:
            return rec, (f"the matrices and NTT buffers of {what} need about "
                         f"{_gib(prove - msm_budget)}, leaving {_gib(max(msm_budget, 0))} of the "
                         f"{_gib(budget)} budget for the MSMs (at least "
                         f"{_gib(MIN_MSM_BUDGET)} needed; --out-of-core-gb keeps them in "
                         f"host memory)")
        if prove > budget:
            return rec, f"proving {what} needs about {_gib(prove)}, over the {_gib(budget)} budget"
    for stage, need, where in (("setup", setup, "device"), ("proving", prove, "device"),
                               ("recording and host keys", host, "host")):
        if need > limits[where]:
            return rec, (f"{stage} of {what} needs about {_gib(need)} of {where} memory, "
                         f"this machine has {_gib(limits[where])}")
    return rec, None


def expected_public(spec: E.CircuitSpec, inputs) -> list:
    """A job's public inputs per partition (ONE excluded) computed on the
    host: from the seeds for PoRep-shaped kinds, else from the kind's own
    parse (``filecoin_kinds``: each partition's ``public``)."""
    if spec.topology.startswith("porep-shaped-"):
        shape = shape_for_rows(spec.sector_size)
        return [public_inputs(s, shape) for s in inputs["seeds"]]
    return [[int(v) for v in p.public] for p in spec.split(inputs)]


# ---------------------------------------------------------------- engine plumbing
class Run(NamedTuple):
    """What a case returns: its final record, the JobResults by role
    ("warmup", "latency", "throughput", "porep", "winning", "window") and
    each job's inputs by job id."""
    record: dict
    jobs: dict
    inputs: dict


class PeakSampler:
    """Context manager: polls ``bytes_in_use`` of each device every
    ``interval`` s on a thread; ``peaks`` is the most seen per device (None
    where the backend has no memory stats, e.g. the CPU)."""

    def __init__(self, devices, interval: float = 0.01):
        self.devices, self.interval = list(devices), interval
        self.peaks: list = [None] * len(self.devices)
        self._stop = threading.Event()
        self._thread = None

    def _poll(self):
        for i, d in enumerate(self.devices):
            try:
                used = (d.memory_stats() or {}).get("bytes_in_use")
            except Exception:  # noqa: BLE001 - not every backend has memory stats
                used = None
            if used is not None:
                self.peaks[i] = max(self.peaks[i] or 0, int(used))

    def _loop(self):
        while not self._stop.wait(self.interval):
            self._poll()

    def __enter__(self):
        self._poll()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="peak-sampler")
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._poll()


def process_peaks(devices) -> list:
    """Per device: the process's peak bytes in use so far (None without stats)."""
    out = []
    for d in devices:
        try:
            out.append((d.memory_stats() or {}).get("peak_bytes_in_use"))
        except Exception:  # noqa: BLE001 - not every backend has memory stats
            out.append(None)
    return out


def select_devices(n: int) -> list:
    """The first n local devices; ValueError naming how many there are."""
    devs = jax.local_devices()
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(devs):
        raise ValueError(f"devices: asked for {n!r}, this machine has {len(devs)} local "
                         f"{devs[0].platform} device(s)")
    return devs[:n]


class _Finished:
    """Job id -> time.monotonic() when the engine finished it (the engine's
    ``on_finished`` hook; any status)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.at: dict[str, float] = {}

    def __call__(self, result: E.JobResult):
        with self._lock:
            self.at[result.job_id] = time.monotonic()

    def get(self, job_id: str):
        with self._lock:
            return self.at.get(job_id)


def _engine(registry, devices, budget: int | None, msm_budget: int | None, verify: bool,
            keys_dir: str | None, setup_seed: int | None, finished: _Finished,
            prover=None, out_of_core: int | None = None, pce_dir: str | None = None,
            host_witness: bool | None = None, pinned_key: bool = False) -> E.Engine:
    """An engine making real Groth16 proofs (unless another ``prover`` is
    given), setup on first use (CSPRNG unless ``setup_seed``: tests only),
    streaming mode when ``budget``, out of core within ``out_of_core``
    bytes (the 16 GB mode; ``host_witness``: ``Groth16Prover``'s, its
    witnesses in host memory unless False; ``pinned_key``: its as well),
    PCE matrices from ``pce_dir`` where stored."""
    if prover is None:
        prover = E.Groth16Prover(keys_dir, pce_dir, setup_on_first_use=True, setup_seed=setup_seed,
                                 keys_in_host_memory=budget is not None,
                                 out_of_core_budget=out_of_core, host_witness=host_witness,
                                 pinned_key=pinned_key)
    config = E.EngineConfig(budget_bytes=budget, msm_budget_bytes=msm_budget, verify=verify)
    return E.Engine(registry, config, prover, devices, on_finished=finished)


def _wait_done(eng, job_ids, what: str) -> list:
    """The JobResults, in order; RuntimeError naming the first failed job."""
    out = [eng.wait(j) for j in job_ids]
    bad = [r for r in out if r.status != "done"]
    if bad:
        raise RuntimeError(f"{what}: {len(bad)} of {len(out)} jobs did not succeed; first: "
                           f"{bad[0].job_id} {bad[0].status}: {bad[0].error}")
    return out


def _stage_medians(results, exclude=("batch_sizes",)) -> dict:
    """Median over jobs of each numeric per-job timing."""
    keys = sorted({k for r in results for k in r.timings if k not in exclude})
    return {k: statistics.median(r.timings.get(k, 0.0) for r in results) for k in keys}


def _check_public(results, inputs_of: dict) -> bool:
    """Every partition's public inputs equal the host's (``expected_public``);
    ``inputs_of``: job id -> (spec, inputs)."""
    return all(r.public == expected_public(*inputs_of[r.job_id]) for r in results)


def _preload(eng, kinds, say) -> dict:
    """Seconds of ``Engine.preload`` per (kind, sector size), in order."""
    out = {}
    for kind, size in kinds:
        say(f"setup of {kind}/{size} (record, keys, matrices on every worker)")
        t = time.perf_counter()
        eng.preload(kind, size)
        out[f"{kind}/{size}"] = time.perf_counter() - t
        say(f"setup of {kind}/{size}: {out[f'{kind}/{size}']:.1f} s")
    return out


def _base_record(case, rows, partitions, devices, budget, msm_budget, verify, env, command,
                 out_of_core=None, host_witness=None, pinned_key=False):
    return {"case": f"engine.{case}", "rows": rows, "partitions": partitions,
            "devices": len(devices), "device_names": [str(d) for d in devices],
            "budget_bytes": budget, "budget_gib": None if budget is None else budget / GIB,
            "msm_budget_bytes": msm_budget, "keys_in_host_memory": budget is not None,
            "out_of_core_bytes": out_of_core,
            "host_witness": out_of_core is not None and host_witness is not False,
            "pinned_key": budget is not None and pinned_key,
            "verify": verify, "goals": GOALS, "anchors": ANCHORS,
            "command": command or argv_command(), **env}


def _budgets(counts: Counts, budget_gib, msm_budget_gib, out_of_core_gib=None):
    """(budget, MSM budget, out-of-core budget), each bytes or None, from the
    GiB options (an MSM budget alone: keys stay on the device, the MSMs run
    in chunks; out of core: within a budget only, and below it)."""
    for name, v in (("budget_gb", budget_gib), ("msm_budget_gb", msm_budget_gib),
                    ("out_of_core_gb", out_of_core_gib)):
        if v is not None and not v > 0:
            raise ValueError(f"{name} must be > 0 GiB, got {v!r}")
    ooc = None if out_of_core_gib is None else int(out_of_core_gib * GIB)
    if budget_gib is None:
        if ooc is not None:
            raise ValueError("out_of_core_gb needs budget_gb (the 16 GB mode keeps the keys "
                             "in host memory)")
        return None, None if msm_budget_gib is None else int(msm_budget_gib * GIB), None
    budget = int(budget_gib * GIB)
    if ooc is not None and ooc >= budget:
        raise ValueError(f"out_of_core_gb ({out_of_core_gib}) must be below budget_gb "
                         f"({budget_gib}): the witness lives beside it")
    if msm_budget_gib is not None:
        return budget, int(msm_budget_gib * GIB), ooc
    return budget, msm_budget_for(counts, budget, ooc), ooc


def _refuse(rec, why, force, out, say):
    if why is None:
        return
    if force:
        say(f"WARNING (forced): {why}")
        rec["forced_past"] = why
        return
    rec["skipped"] = why
    emit(rec, out)
    raise DoesNotFit(f"{rec['case']}: {why} (--force tries anyway; --rows N for a smaller "
                     f"circuit)")


@contextlib.contextmanager
def _shutdown_after(eng):
    """Shut the engine down after the block: drained if the block finished,
    at once (queued jobs dropped) if it raised."""
    try:
        yield
    except BaseException:
        eng.shutdown(drain=False)
        raise
    eng.shutdown()


def _finish(rec, out, what: str, jobs, inputs_of) -> "Run":
    """Write the case's record; refuse a run whose proofs' public inputs
    differ from the host's computation."""
    emit(rec, out)
    if not rec["public_match"]:
        raise RuntimeError(f"{what}: a proof's public inputs differ from the host's")
    return Run(rec, jobs, {j: inp for j, (_, inp) in inputs_of.items()})


def _latency_and_throughput(eng, spec, make_inputs, partitions: int, proofs: int, rec: dict,
                            devs, finished, out, say) -> tuple[dict, dict]:
    """The measured part of a latency and throughput case: the kind's setup
    (``Engine.preload``), a warm-up job (compiles), one job alone (its
    latency), then ``proofs`` jobs at once (the throughput); each job's
    inputs from ``make_inputs()``.  Fills ``rec``; returns (jobs by role,
    inputs by job id)."""
    inputs_of, jobs = {}, {}

    def submit():
        inputs = make_inputs()
        jid = eng.submit(spec.kind, spec.sector_size, inputs)
        inputs_of[jid] = (spec, inputs)
        return jid

    eng.start()
    with _shutdown_after(eng):
        rec["setup_s"] = _preload(eng, [(spec.kind, spec.sector_size)], say)[
            f"{spec.kind}/{spec.sector_size}"]
        rec["phase"] = "setup"
        emit(dict(rec), out)
        say(f"warm-up job of {partitions} partitions (compiles)")
        jobs["warmup"] = _wait_done(eng, [submit()], "warm-up")
        rec["warmup_s"] = jobs["warmup"][0].timings["total"]
        with PeakSampler(devs) as sampler:
            say(f"warm-up {rec['warmup_s']:.1f} s; latency job of {partitions} partitions")
            jobs["latency"] = _wait_done(eng, [submit()], "latency")
            lat = jobs["latency"][0]
            rec.update(latency_s=lat.timings["total"], latency_stages_s=_stage_medians([lat]),
                       phase="latency")
            emit(dict(rec), out)
            say(f"latency {rec['latency_s']:.2f} s; {proofs} jobs at once")
            t0 = time.monotonic()
            ids = [submit() for _ in range(proofs)]
            jobs["throughput"] = _wait_done(eng, ids, "throughput")
        done = sorted(finished.get(j) for j in ids)
        if proofs > 1:
            tput, basis = (proofs - 1) / (done[-1] - done[0]), \
                "(K - 1) / (last job done - first job done): the jobs after the first"
        else:
            tput, basis = 1 / jobs["throughput"][0].timings["total"], "1 / the one job's total"
        med = _stage_medians(jobs["throughput"])
        status = eng.status()
        rec.update(
            phase="done", throughput_proofs_per_s=tput, s_per_proof=1 / tput,
            throughput_basis=basis, throughput_total_proofs_per_s=proofs / (done[-1] - t0),
            job_done_offsets_s=[d - t0 for d in done], stages_median_s=med,
            prove_per_partition_median_s=med.get("prove", 0.0) / partitions,
            jobs_done=sum(len(v) for v in jobs.values()),
            public_match=_check_public([r for v in jobs.values() for r in v], inputs_of),
            peak_bytes=process_peaks(devs), peak_bytes_sampled=sampler.peaks,
            resident_bytes=status["resident_bytes"], evictions=status["evictions"],
            batches=status["counters"].get("batches"),
            batches_per_worker=[d["proved_batches"] for d in status["devices"]])
        say(f"throughput {tput:.4g} proofs/s ({1 / tput:.2f} s/proof); latency "
            f"{rec['latency_s']:.2f} s; public inputs match: {rec['public_match']}")
    return jobs, inputs_of


# ---------------------------------------------------------------- case: porep_shaped
def run_porep_shaped(rows: int = DEFAULT_ROWS, partitions: int = DEFAULT_PARTITIONS,
                     proofs: int = 5, budget_gib: float | None = None, devices: int = 1,
                     verify: bool = True, msm_budget_gib: float | None = None,
                     keys_dir: str | None = None, setup_seed: int | None = None, seed: int = 0,
                     force: bool = False, env: dict | None = None, out: str | None = None,
                     command: str | None = None, say: Callable = _say, prover=None,
                     out_of_core_gib: float | None = None, host_witness: bool | None = None,
                     pinned_key: bool = False) -> Run:
    """Latency of one job of ``partitions`` partitions and the throughput of
    ``proofs`` jobs at once (module docstring); emits the records and returns
    the final one with the jobs.  ``seed``: the jobs' input seeds (inputs
    are not secret); ``setup_seed``: a seeded, insecure setup (tests);
    ``prover``: an ``engine.Prover`` instead of ``Groth16Prover`` (tests of
    the orchestration); ``out_of_core_gib``: with ``budget_gib``, the 16 GB
    mode (matrices in host memory, a, b, c, h out of core within it)."""
    for name, v in (("partitions", partitions), ("proofs", proofs)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    devs = select_devices(devices)
    spec = porep_shaped_spec(rows)
    shape = shape_for_rows(rows)
    counts = circuit_counts(shape)
    budget, msm_budget, ooc = _budgets(counts, budget_gib, msm_budget_gib, out_of_core_gib)
    env = environment() if env is None else env
    rec = _base_record("porep_shaped", rows, partitions, devs, budget, msm_budget, verify, env,
                       command, ooc, host_witness, pinned_key)
    rec.update(phase="plan", proofs=proofs, topology=spec.topology, shape=shape._asdict(),
               num_vars=counts.num_vars, bit_vars=counts.bit_vars)
    from bench import filecoin as BF
    est, why = plan_case([kind_plan(KIND, counts, budget, msm_budget, ooc)], budget,
                         msm_budget, BF.limits())
    rec.update(est)
    say(f"porep-shaped {rows:,} rows = {shape.blocks} SHA-256 blocks + {shape.pairs} XORs + "
        f"{shape.singles} bits + {shape.dense} squares; key ~"
        f"{_gib(est['est_key_bytes'][KIND])}, {partitions} partitions, {proofs} proofs, "
        f"{len(devs)} device(s), budget {'none' if budget is None else _gib(budget)}"
        f"{'' if ooc is None else f', out of core within {_gib(ooc)}'}")
    _refuse(rec, why, force, out, say)

    finished = _Finished()
    eng = _engine(E.Registry([spec]), devs, budget, msm_budget, verify, keys_dir, setup_seed,
                  finished, prover, ooc, host_witness=host_witness, pinned_key=pinned_key)
    rng = random.Random(seed)
    jobs, inputs_of = _latency_and_throughput(eng, spec, lambda: job_inputs(rng, partitions),
                                              partitions, proofs, rec, devs, finished, out, say)
    return _finish(rec, out, "porep_shaped", jobs, inputs_of)


# ---------------------------------------------------------------- case: kind
def run_kind(kind: str, size: str, proofs: int = 5, budget_gib: float | None = None,
             devices: int = 1, verify: bool = True, msm_budget_gib: float | None = None,
             keys_dir: str | None = None, setup_seed: int | None = None, seed: int = 0,
             force: bool = False, env: dict | None = None, out: str | None = None,
             command: str | None = None, say: Callable = _say, prover=None,
             out_of_core_gib: float | None = None, circuit_dir: str | None = None,
             host_witness: bool | None = None, pinned_key: bool = False) -> Run:
    """``porep_shaped``'s latency and throughput for a registered Filecoin
    kind at a sector size (``jaxprove.filecoin_kinds``: the real circuit;
    PoRep 32GiB is 10 partitions of 130,278,541 rows).  Every job proves the
    same synthetic sector (its vanilla proofs made once: a 32GiB sector's
    took 72 s on the H200 host), each with fresh blinding r, s, through
    the engine's whole path (parsing the job's JSON, the witness, the proof,
    verify-before-return).  ``circuit_dir``: the recorded circuit and its
    matrices from there where ``bench.filecoin --circuit-dir`` stored them
    (a 32GiB partition records in ~210 s and extracts in ~130 s on the host:
    done beside other GPU work, e.g. ``bench/device/fc32.sh``), stored there
    otherwise; other arguments as ``run_porep_shaped``."""
    from bench import filecoin as BF
    from jaxprove import pce
    if isinstance(proofs, bool) or not isinstance(proofs, int) or proofs < 1:
        raise ValueError(f"proofs must be a positive integer, got {proofs!r}")
    spec = BF.spec_for(kind, size)
    if spec.synthetic is None:
        raise ValueError(f"{kind}/{size} has no synthetic inputs")
    if circuit_dir:                          # the R1CS as bench.filecoin stores it
        record = spec.record
        spec = dataclasses.replace(spec, record=lambda: pce.get_or_record(
            record, pce.cache_key(spec.topology) + ".r1cs", circuit_dir))
    devs = select_devices(devices)
    counts = _kind_counts(kind, size)
    budget, msm_budget, ooc = _budgets(counts, budget_gib, msm_budget_gib, out_of_core_gib)
    env = environment() if env is None else env
    rec = _base_record(f"{kind}", counts.rows, None, devs, budget, msm_budget, verify, env,
                       command, ooc, host_witness, pinned_key)
    rec.update(phase="plan", proofs=proofs, kind=kind, size=size, topology=spec.topology,
               inputs="one synthetic sector, proved by every job (fresh r, s each)")
    est, why = plan_case([kind_plan(kind, counts, budget, msm_budget, ooc)], budget,
                         msm_budget, BF.limits())
    rec.update(est)
    say(f"{kind} {size}: {counts.rows:,} rows a partition (upper bound), key ~"
        f"{_gib(est['est_key_bytes'][kind])}, {proofs} proofs, {len(devs)} device(s), budget "
        f"{'none' if budget is None else _gib(budget)}")
    _refuse(rec, why, force, out, say)
    say("making the synthetic sector's inputs")
    t = time.perf_counter()
    inputs = spec.synthetic(random.Random(seed))
    rec["synthetic_s"] = time.perf_counter() - t
    partitions = len(spec.split(inputs))
    rec["partitions"] = partitions
    finished = _Finished()
    eng = _engine(E.Registry([spec]), devs, budget, msm_budget, verify, keys_dir, setup_seed,
                  finished, prover, ooc, pce_dir=circuit_dir,
                  host_witness=host_witness, pinned_key=pinned_key)
    jobs, inputs_of = _latency_and_throughput(eng, spec, lambda: inputs, partitions, proofs,
                                              rec, devs, finished, out, say)
    return _finish(rec, out, kind, jobs, inputs_of)


# ---------------------------------------------------------------- case: mixed
def _post_specs(post: str, post_size: str, post_rows: int | None, rows: int):
    """{"winning": spec, "window": spec} of the PoSt kinds (module docstring)."""
    if post == "real":
        from jaxprove import filecoin_kinds as FK
        return {k: FK.post_spec(post_size, k) for k in ("winning", "window")}
    if post == "standin":
        return {k: porep_shaped_spec(post_rows or rows, name, prio, parts)
                for k, (name, prio, parts) in STANDINS.items()}
    raise ValueError(f"post must be 'real' or 'standin', got {post!r}")


def _latency_summary(results) -> dict:
    lat = [r.timings["total"] for r in results]
    qw = [r.timings.get("queue_wait", 0.0) for r in results]
    if not lat:
        return {"n": 0}
    return {"n": len(lat), "latency_median_s": statistics.median(lat),
            "latency_max_s": max(lat), "queue_wait_median_s": statistics.median(qw),
            "queue_wait_max_s": max(qw), "latency_s": lat, "queue_wait_s": qw}


def run_mixed(rows: int = DEFAULT_ROWS, partitions: int = DEFAULT_PARTITIONS,
              budget_gib: float | None = None, devices: int = 1, winning: int = 10,
              winning_every: float = 5.0, window_every: float | None = 10.0, inflight: int = 2,
              post: str = "real", post_size: str = "2KiB", post_rows: int | None = None,
              verify: bool = True, msm_budget_gib: float | None = None,
              keys_dir: str | None = None, setup_seed: int | None = None, seed: int = 0,
              force: bool = False, env: dict | None = None, out: str | None = None,
              command: str | None = None, say: Callable = _say, prover=None,
              out_of_core_gib: float | None = None, host_witness: bool | None = None,
              pinned_key: bool = False) -> Run:
    """PoRep-shaped jobs kept in flight while WinningPoSt (and WindowPoSt)
    jobs arrive (module docstring); emits the records and returns the final
    one with the jobs.  ``window_every`` None or 0: no WindowPoSt jobs (the
    kind is not set up either: ``--post real --post-size 32GiB`` then means
    a real 32GiB WinningPoSt, 2^19, without the 2^27 WindowPoSt); other
    arguments as ``run_porep_shaped``."""
    for name, v in (("partitions", partitions), ("winning", winning), ("inflight", inflight)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not winning_every > 0 or (window_every is not None and window_every < 0):
        raise ValueError(f"winning_every must be > 0 and window_every >= 0 seconds, got "
                         f"{winning_every!r}, {window_every!r}")
    devs = select_devices(devices)
    spec = porep_shaped_spec(rows)
    shape = shape_for_rows(rows)
    counts = circuit_counts(shape)
    posts = _post_specs(post, post_size, post_rows, rows)
    if not window_every:        # no WindowPoSt jobs: its kind is neither set up nor compiled
        del posts["window"]
    budget, msm_budget, ooc = _budgets(counts, budget_gib, msm_budget_gib, out_of_core_gib)
    env = environment() if env is None else env
    rec = _base_record("mixed", rows, partitions, devs, budget, msm_budget, verify, env, command,
                       ooc, host_witness, pinned_key)
    rec.update(phase="plan", topology=spec.topology, shape=shape._asdict(), post=post,
               post_kinds={k: f"{s.kind}/{s.sector_size}" for k, s in posts.items()},
               post_topologies={k: s.topology for k, s in posts.items()},
               post_size=post_size if post == "real" else None,
               post_rows=(post_rows or rows) if post == "standin" else None,
               winning=winning, winning_every_s=winning_every, window_every_s=window_every,
               inflight=inflight)
    plans = [kind_plan(KIND, counts, budget, msm_budget, ooc)]
    for k, s in posts.items():
        c = _kind_counts(s.kind, post_size) if post == "real" \
            else circuit_counts(shape_for_rows(s.sector_size))
        plans.append(kind_plan(s.kind, c, budget, msm_budget, ooc))
    from bench import filecoin as BF
    est, why = plan_case(plans, budget, msm_budget, BF.limits())
    rec.update(est)
    window = f"{posts['window'].kind} every {window_every} s" if "window" in posts \
        else "no WindowPoSt"
    say(f"mixed: porep-shaped {rows:,} rows × {partitions} partitions, {inflight} in flight; "
        f"{winning} {posts['winning'].kind} every {winning_every} s; {window}")
    _refuse(rec, why, force, out, say)

    finished = _Finished()
    eng = _engine(E.Registry([spec, *posts.values()]), devs, budget, msm_budget, verify,
                  keys_dir, setup_seed, finished, prover, ooc, host_witness=host_witness,
                  pinned_key=pinned_key)
    rng = random.Random(seed)
    say("making the PoSt inputs")
    pool = {k: [s.synthetic(rng) for _ in range(2)] for k, s in posts.items()}
    inputs_of, roles, submitted = {}, {}, {}

    def submit(role):
        if role == "porep":
            s, inputs = spec, job_inputs(rng, partitions)
        else:
            s = posts[role]
            inputs = pool[role][sum(r == role for r in roles.values()) % len(pool[role])]
        jid = eng.submit(s.kind, s.sector_size, inputs)
        inputs_of[jid] = (s, inputs)
        roles[jid], submitted[jid] = role, time.monotonic()
        return jid

    eng.start()
    with _shutdown_after(eng):
        setup = _preload(eng, [(KIND, rows)] + [(s.kind, s.sector_size) for s in posts.values()],
                         say)
        rec.update(setup_s=sum(setup.values()), setup_s_by_kind=setup, phase="setup")
        emit(dict(rec), out)
        say("warm-up: one job of each kind (compiles)")
        kinds = ("porep", *posts)
        warm = _wait_done(eng, [submit(r) for r in kinds], "warm-up")
        rec["warmup_s"] = {r: w.timings["total"] for r, w in zip(kinds, warm)}
        warm_ids = set(roles)
        evidence = {}
        with PeakSampler(devs) as sampler:
            porep = [submit("porep") for _ in range(inflight)]
            t_start = time.monotonic()
            due = {"winning": [t_start + i * winning_every for i in range(winning)],
                   "window": [t_start + j * window_every for j in
                              range(int((winning - 1) * winning_every // window_every) + 1)]
                   if window_every else []}
            posts_ids = []
            say(f"stream: {len(due['winning'])} WinningPoSt, {len(due['window'])} WindowPoSt")
            while any(due.values()) or any(finished.get(j) is None for j in posts_ids):
                now = time.monotonic()
                for role in ("winning", "window"):
                    while due[role] and due[role][0] <= now:
                        due[role].pop(0)
                        jid = submit(role)
                        posts_ids.append(jid)
                        if role == "winning":
                            evidence[jid] = eng.status()["queues"]["by_priority"]["NORMAL"]
                if sum(finished.get(j) is None for j in porep) < inflight:
                    porep.append(submit("porep"))
                time.sleep(0.02)
            t_end = time.monotonic()
            say("stream over; draining the PoRep jobs in flight")
            results = {j: r for j, r in zip(porep + posts_ids,
                                            _wait_done(eng, porep + posts_ids, "mixed"))}
        by_role = {role: [results[j] for j in results if roles[j] == role]
                   for role in ("porep", "winning", "window")}
        in_stream = [j for j in porep if finished.get(j) <= t_end]
        overtook = {j: sum(1 for p in porep if submitted[p] < submitted[j]
                           and finished.get(p) > finished.get(j)) for j in evidence}
        win = _latency_summary(by_role["winning"])
        status = eng.status()
        rec.update(
            phase="done", stream_s=t_end - t_start,
            latency_s=win["latency_median_s"], winning_post=win,
            window_post=_latency_summary(by_role["window"]),
            porep_jobs_in_stream=len(in_stream),
            throughput_proofs_per_s=len(in_stream) / (t_end - t_start),
            throughput_basis="PoRep jobs done during the stream / the stream's seconds",
            porep_jobs_done=len(by_role["porep"]),
            stages_median_s=_stage_medians(by_role["porep"]),
            winning_normal_queued_at_submit=[evidence[j] for j in evidence],
            winning_overtook_porep_jobs=[overtook[j] for j in evidence],
            public_match=_check_public(list(results.values()) + warm, inputs_of),
            jobs_done=len(results) + len(warm_ids),
            peak_bytes=process_peaks(devs), peak_bytes_sampled=sampler.peaks,
            resident_bytes=status["resident_bytes"], evictions=status["evictions"])
        say(f"WinningPoSt latency median {win['latency_median_s']:.3f} s, max "
            f"{win['latency_max_s']:.3f} s; PoRep {rec['throughput_proofs_per_s']:.4g} proofs/s "
            f"during the stream")
    return _finish(rec, out, "mixed", {"warmup": warm, **by_role}, inputs_of)


# ---------------------------------------------------------------- CLI
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", choices=["porep_shaped", "kind", "mixed"], required=True)
    ap.add_argument("--kind", default="porep",
                    help="kind: the registered Filecoin kind (porep, window-post, winning-post, "
                         "snap)")
    ap.add_argument("--size", default="32GiB", help="kind: the sector size")
    ap.add_argument("--circuit-dir", default=None,
                    help="kind: the recorded circuit and matrices (bench.filecoin "
                         "--circuit-dir), loaded from or stored there")
    ap.add_argument("--rows", type=int, default=DEFAULT_ROWS,
                    help="R1CS rows of one PoRep-shaped partition (default: a 32GiB partition)")
    ap.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS)
    ap.add_argument("--proofs", type=int, default=5,
                    help="porep_shaped, kind: jobs for the throughput")
    ap.add_argument("--budget-gb", type=float, default=None,
                    help="device budget in GiB (streaming mode: keys in host memory)")
    ap.add_argument("--msm-budget-gb", type=float, default=None,
                    help="MSM budget in GiB (default: what --budget-gb leaves; alone: keys "
                         "stay on the device, MSMs in chunks)")
    ap.add_argument("--out-of-core-gb", type=float, default=None,
                    help="with --budget-gb: the 16 GB mode, PCE matrices in host memory and "
                         "a, b, c, h computed out of core within this many GiB")
    ap.add_argument("--no-host-witness", dest="host_witness", action="store_const",
                    const=False, default=None,
                    help="with --out-of-core-gb: every witness on the device (by default they "
                         "wait in host memory and h is computed on the device, hypothesis 83)")
    ap.add_argument("--pinned-key", action="store_true",
                    help="with --budget-gb: the held key's host vectors in pinned host memory "
                         "(Groth16Prover(pinned_key=True), hypothesis 84)")
    ap.add_argument("--devices", type=int, default=1, help="local devices (one worker each)")
    ap.add_argument("--winning", type=int, default=10, help="mixed: WinningPoSt jobs")
    ap.add_argument("--winning-every", type=float, default=5.0, help="mixed: seconds apart")
    ap.add_argument("--window-every", type=float, default=10.0,
                    help="mixed: seconds between WindowPoSt jobs (0: none)")
    ap.add_argument("--inflight", type=int, default=2, help="mixed: PoRep jobs kept in flight")
    ap.add_argument("--post", choices=["real", "standin"], default="real",
                    help="mixed: the filecoin_kinds PoSt kinds, or PoRep-shaped stand-ins")
    ap.add_argument("--post-size", default="2KiB", help="mixed, --post real: sector size")
    ap.add_argument("--post-rows", type=int, default=None,
                    help="mixed, --post standin: rows (default: --rows)")
    ap.add_argument("--no-verify", action="store_true", help="no verify-before-return")
    ap.add_argument("--keys-dir", default=None, help="save the set-up keys here")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic inputs")
    ap.add_argument("--force", action="store_true", help="run what the memory plan refuses")
    ap.add_argument("--out", default=None, help="append JSON records here")
    ap.add_argument("--cache", action="store_true", help="persistent compilation cache")
    a = ap.parse_args(argv)
    pinned = None             # before the backend starts: the pool's cap (hypothesis 95)
    if a.pinned_key and a.case == "kind" and a.budget_gb is not None:
        from bench import filecoin as BF      # the held key, and two witnesses in host memory
        pinned = BF.pinned_estimate(
            a.kind, a.size, None,
            None if a.out_of_core_gb is None else int(a.out_of_core_gb * 2**30),
            a.out_of_core_gb is not None and a.host_witness is not False, witnesses=2)
    memory.widen_pinned_pool(pinned)
    if a.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    common = dict(rows=a.rows, partitions=a.partitions, budget_gib=a.budget_gb,
                  msm_budget_gib=a.msm_budget_gb, out_of_core_gib=a.out_of_core_gb, devices=a.devices, verify=not a.no_verify,
                  keys_dir=a.keys_dir, seed=a.seed, force=a.force, out=a.out,
                  host_witness=a.host_witness, pinned_key=a.pinned_key)
    try:
        if a.case == "porep_shaped":
            run_porep_shaped(proofs=a.proofs, **common)
        elif a.case == "kind":
            common = {k: v for k, v in common.items() if k not in ("rows", "partitions")}
            run_kind(a.kind, a.size, proofs=a.proofs, circuit_dir=a.circuit_dir, **common)
        else:
            run_mixed(winning=a.winning, winning_every=a.winning_every,
                      window_every=a.window_every or None, inflight=a.inflight, post=a.post,
                      post_size=a.post_size, post_rows=a.post_rows, **common)
    except (DoesNotFit, ValueError) as e:
        print(f"bench.engine: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
