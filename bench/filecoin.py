"""Filecoin proof benchmarks (issue 6): one partition of each proof kind at
each sector size, from the circuit to a verified proof.

For each (kind, size) of ``--kinds`` × ``--sizes`` (``jaxprove.filecoin_kinds``:
winning-post, window-post, porep, snap; sizes of ``circuits.filecoin.sizes``):

1. **plan**: the rows estimated from the research note's constraint formulas
   (``post`` / ``porep`` / ``snap.constraint_count``; rows = constraints +
   public inputs + ONE), the domain 2^k ≥ rows, and the bytes that recording
   (host) and the proving key (device) will need.  A case that cannot fit
   this machine is reported (stderr and a ``skipped`` record naming the
   shortfall) instead of dying deep inside; ``--force`` tries anyway;
2. **record** the circuit (seconds, rows / inputs / aux / bit variables, nnz
   of A, B, C; the rows are checked against the estimate) and **extract** its
   PCE (seconds, device bytes of the matrices); a ``.circuit`` record is
   written here, so a later failure still leaves these numbers.
   ``--record-only`` stops here (the large sizes).  ``--circuit-dir DIR``
   stores the circuit and its matrices under DIR and later runs load them
   instead (``r1cs_load_s`` / ``pce_load_s`` instead of ``record_s`` /
   ``extract_s``): a 32GiB partition (155 s of recording, 112 s of
   extraction on the H200's host) is recorded in one process and proved in
   the next;
3. with the exact counts, the device peak of setup and proving is estimated
   again (keys, matrices, NTT buffers, ``ops.msm.working_set_bytes`` of the
   largest MSM) and the case is skipped if it cannot fit — unless only the
   merged MSM passes are too large beside the resident key: then the key is
   built split on the device and each MSM runs alone in chunks within the
   memory left (``msm_budget_bytes`` recorded, ``msm_budget_auto`` true);
4. **setup** (seconds, cumulative per stage as it goes), a synthetic,
   satisfiable job from the kind's own generator (``CircuitSpec.synthetic``
   seeded by ``--seed``: the JSON form a client sends, parsed back by
   ``CircuitSpec.split``), the **witness** of its first partition by the
   kind's jitted witness program (first call, then warm), the public inputs
   in the witness checked against the ones the kinds module computes on the
   host (rust-fil-proofs' order, ONE excluded), satisfaction checked once
   (``pce.is_satisfied``);
5. **prove** with the proving key, matrices and NTT domain resident
   (``engine.Resident``, ``engine.Groth16Prover``: the daemon's path): a
   warm-up proof, then ``--reps`` timed proofs (median / min / max, the
   per-stage medians of ``groth16.prove``: spmv, ntt, the MSMs — msm_g1 and
   msm_g2 for the merged passes, msm_a … msm_h in streaming mode — and
   combine), and the device's peak bytes in use
   (``bench.common.peak_memory_bytes``: the process's peak so far — run one
   case per process for a per-case peak; ``proofs_in_use_max_bytes``: the
   largest bytes in use sampled during the timed proofs alone,
   ``bench.common.InUseSampler``, below the setup's peak).  The timing record is written
   now, before the risky steps;
6. ``--save DIR``: snarkjs ``verification_key.json``, ``proof.json`` and
   ``public.json`` of the proof under ``DIR/<kind>_<size>`` (``snarkjs
   groth16 verify`` checks them on another machine); then, unless
   ``--no-verify``, our verifier (``groth16.verify`` on the host CPU, as
   the engine's self-check: the pairing's GPU compile takes minutes) and a
   ``.verify`` record.

Streaming mode (``--msm-budget-gib``, ``--keys-in-host-memory``: the
engine's) bounds the MSMs' device memory for circuits whose merged MSM
passes do not fit.  ``--then-resident`` then places the same key on the
device and times proofs again (a second record): one setup for both modes;
``--streaming-reps 0`` skips the streaming proofs (and their compiles).
``--out-of-core-gib`` (with ``--keys-in-host-memory``) is the 16 GB mode: the
matrices stay in host memory too, and a, b, c and h are computed out of core;
``--device-budget-gib`` holds a ballast after the setup so that only the card's
memory stays free for the witness and the proofs (the setup itself needs more:
at 32GiB ~39 GiB).  ``--keys-dir`` stores each circuit's keys after its setup
and loads them in later runs instead of a setup (``--setup-only`` stops there).
``--challenges N`` scales a kind down to N challenges (per sector for PoSt,
per partition for PoRep and SnapDeals), with the same gadgets and tree
shapes: a smaller circuit of the same structure (the topology name says
``-c<N>``).

    python -m bench.filecoin --kinds winning-post,window-post,porep,snap --sizes 2KiB \\
        --save /tmp/fc --out bench/results/filecoin_h200.jsonl
    python -m bench.filecoin --kinds porep,window-post --sizes 32GiB --record-only
    python -m bench.filecoin --kinds porep --sizes 32GiB --record-only --circuit-dir /tmp/fc32
    python -m bench.filecoin --kinds porep --sizes 32GiB --circuit-dir /tmp/fc32 --cache

Issue 6 asks, on the H200: per kind and size (2KiB, 8MiB, 512MiB, a full 32GiB
PoRep partition and a full 32GiB WindowPoSt partition) extraction time and
PCE size, witness time, SpMV, NTT, each MSM, total, peak device memory; and
a full proof + verify of each 2KiB kind.  Anchor (research/perf-anchors.md):
cuzk's 32GiB PoRep partition (2^27) ~3.7 s of GPU time on an RTX 5070 Ti.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import os
import pickle
import random
import statistics
import sys
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import (InUseSampler, argv_command, emit, environment, host_rss_bytes,
                          peak_memory_bytes)
from circuits.filecoin import sizes as Z
from jaxprove import engine as E
from jaxprove import filecoin_kinds as FK
from jaxprove import groth16 as G
from jaxprove import memory
from jaxprove import modes as MD
from jaxprove import pce
from jaxprove.modes import DOMAIN_VECTORS, G1_AFFINE, G2_AFFINE, NTT_VECTORS
from ops import msm as M
from ops import ntt as N
from ops import transfer
from ops.curve import G1, G2
from ops.field import Fr

KINDS = ("winning-post", "window-post", "porep", "snap")
FR_BYTES = MD.FR
# host bytes per R1CS row while recording and extracting: 1.06 GB RSS for the
# 7.24M rows of one 32GiB PoRep challenge (bench/results/record_cpu_p4b.jsonl),
# with room for the CSR copies extraction makes
HOST_BYTES_PER_ROW = 300
# device bytes of the PCE matrices per row before extraction (then measured):
# 65 (2KiB PoRep, SnapDeals) to 103 (2KiB PoSt) on the CPU
MATRIX_BYTES_PER_ROW = 100


def _say(msg):
    """A progress line on stderr: time, host memory (resident/peak: the
    32GiB 16 GB mode's host limit, bench/NOTES.md session 25), message."""
    rss, peak = host_rss_bytes()
    mem = f"host {'?' if rss is None else f'{rss / 2**30:.1f}'}/{peak / 2**30:.1f} GiB"
    print(f"[{time.strftime('%H:%M:%S')}] ({mem}) {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the cases
def _post_spec(size: str, kind: str, challenges: int) -> E.CircuitSpec:
    """``filecoin_kinds.post_spec`` with K = ``challenges`` per sector."""
    from circuits import cs as C
    from circuits.filecoin import post as P
    k = kind.split("-")[0]
    p = dataclasses.replace(Z.params(size), **{f"{k}_challenges": challenges})
    S, K = p.post(k)
    arities = p.tree_r_arities
    topology = f"{kind}-{size}-n{p.nodes}-tree{'.'.join(map(str, arities))}-s{S}-c{K}"
    return E.CircuitSpec(
        kind, p.sector_bytes, topology,
        lambda: C.record(P.fallback_post, arities, S, K, name=topology),
        lambda inputs: FK.parse_post(inputs, p, k),
        lambda parts: FK.post_witness(parts, arities, S, K), FK.PRIORITIES[kind],
        1 if k == "winning" else None,
        lambda rng: FK.post_json([P.synthetic_post(arities, S, K, rng.randrange(1 << 63),
                                                   kind=k)]))


def _porep_spec(size: str, challenges: int | None, partitions: int | None = None) -> E.CircuitSpec:
    """``filecoin_kinds.porep_spec`` with ``challenges`` per partition (None:
    the size's); jobs
    are in-process ``VanillaPartition`` lists (a C1 JSON names a registered
    proof, whose challenge count is fixed) of ``partitions`` partitions
    (default: the sector size's)."""
    from circuits import cs as C
    from circuits.filecoin import porep as PR
    from circuits.filecoin import porep_synthetic as PS
    p, cfg = Z.params(size), PR.CONFIGS[size]
    cfg = cfg if challenges is None else cfg.with_challenges(challenges)
    topology = (f"porep-{size}-n{cfg.nodes}-tree{'.'.join(map(str, cfg.arities))}"
                f"-l{cfg.layers}-c{cfg.challenges}")

    def split(parts):
        if not isinstance(parts, list) or not parts or \
                any(not isinstance(v, PS.VanillaPartition) or v.cfg != cfg for v in parts):
            raise ValueError(f"porep {size} with {challenges} challenges: expected a list of "
                             f"VanillaPartition of {cfg.name}")
        return parts

    return E.CircuitSpec(
        "porep", p.sector_bytes, topology, lambda: C.record(PR.stacked_circuit, cfg, name=topology),
        split, lambda parts: FK.porep_witness(parts, cfg), FK.PRIORITIES["porep"], None,
        lambda rng: PS.generate_sector(cfg, rng.randrange(1 << 63),
                                       partitions or p.porep_partitions))


def _snap_spec(size: str, challenges: int) -> E.CircuitSpec:
    """``filecoin_kinds.snap_spec`` with ``challenges`` per partition."""
    from circuits import cs as C
    from circuits.filecoin import snap as SN
    p = Z.params(size)
    shape = dataclasses.replace(SN.size_shape(size), challenges=challenges)
    topology = (f"snap-{size}-n{shape.nodes}-tree{'.'.join(map(str, shape.arities))}"
                f"-p{shape.partitions}-c{shape.challenges}-apex{shape.apex_leaves}"
                f"-hs{'.'.join(map(str, shape.hs))}")

    def synthetic(rng):
        seed = rng.randrange(1 << 63)
        return FK.snap_json([SN.synthetic_snap(shape, seed, k) for k in range(shape.partitions)])

    return E.CircuitSpec(
        "snap", p.sector_bytes, topology,
        lambda: C.record(SN.empty_sector_update, shape, name=topology),
        lambda inputs: FK.parse_snap(inputs, shape, size),
        lambda parts: FK.snap_witness(parts, shape), FK.PRIORITIES["snap"], shape.partitions,
        synthetic)


def spec_for(kind: str, size: str, challenges: int | None = None) -> E.CircuitSpec:
    """The kind's registered ``CircuitSpec`` at ``size``, or (``challenges``
    given) the same circuit scaled to that many challenges."""
    if kind not in KINDS:
        raise ValueError(f"unknown proof kind {kind!r}; known: {', '.join(KINDS)}")
    Z.params(size)                                   # ValueError naming an unknown size
    if challenges is None:
        return next(s for s in FK.filecoin_specs((size,)) if s.kind == kind)
    if isinstance(challenges, bool) or not isinstance(challenges, int) or challenges < 1:
        raise ValueError(f"challenges must be a positive integer, got {challenges!r}")
    if kind == "porep":
        return _porep_spec(size, challenges)
    if kind == "snap":
        return _snap_spec(size, challenges)
    return _post_spec(size, kind, challenges)


def synthetic_parts(kind: str, size: str, challenges: int | None = None, seed: int = 0,
                    directory: str | None = None) -> list:
    """The partitions of the synthetic job whose partition 0 the bench
    proves: the kind's own generator, through the form a client sends
    (``CircuitSpec.synthetic``, then ``split``); for PoRep, partition 0
    alone, in process (a 32GiB sector's ten partitions and their C1 JSON
    took 72 s on the H200 host, the one 4 s).  With ``directory`` (the
    ``--circuit-dir``), kept there for the next process of the same sources
    (``synthetic_path``): the 32GiB WindowPoSt job takes 95–105 s to make, and
    a device session's pipeline made it twice."""
    path = synthetic_path(directory, kind, size, challenges, seed) if directory else None
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    spec = spec_for(kind, size, challenges)
    if kind == "porep":
        one = _porep_spec(size, challenges, partitions=1)
        if one.topology != spec.topology:
            raise AssertionError(f"{one.topology} != {spec.topology}")
        spec = one
    parts = spec.split(spec.synthetic(random.Random(seed)))
    if path:
        from jaxprove.atomic import write_bytes
        os.makedirs(directory, exist_ok=True)
        write_bytes(path, pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL))
    return parts


def synthetic_path(directory: str, kind: str, size: str, challenges: int | None,
                   seed: int) -> str:
    """Where ``synthetic_parts`` keeps a job: named by the kind, size,
    challenges, seed and the hash of the sources that make it (an edited
    generator never reads an old job).  A pickle: read only from a directory
    this benchmark wrote."""
    from ops.aot import module_hash, source_hash
    tag = hashlib.sha256((source_hash() + module_hash(__name__)).encode()).hexdigest()[:16]
    return os.path.join(directory, f"synthetic-{kind}-{size}-c{challenges}-s{seed}-{tag}.pkl")


def counts(kind: str, size: str, challenges: int | None = None) -> tuple[int, int]:
    """(constraints, public inputs without ONE) of one partition, from the
    research note's formulas (no recording)."""
    from circuits.filecoin import porep as PR
    from circuits.filecoin import post as P
    from circuits.filecoin import snap as SN
    p = Z.params(size)
    if kind == "porep":
        cfg = PR.CONFIGS[size]
        cfg = cfg if challenges is None else cfg.with_challenges(challenges)
        return PR.constraint_count(cfg), PR.num_public_inputs(cfg)
    if kind == "snap":
        shape = SN.size_shape(size)
        shape = shape if challenges is None else dataclasses.replace(shape, challenges=challenges)
        return SN.constraint_count(shape), 4
    if kind not in KINDS:
        raise ValueError(f"unknown proof kind {kind!r}; known: {', '.join(KINDS)}")
    S, K = p.post(kind.split("-")[0])
    K = K if challenges is None else challenges
    return P.constraint_count(p.tree_r_arities, S, K), S * (1 + K)


# ---------------------------------------------------------------- memory plan
class Plan(NamedTuple):
    """Estimated sizes of one partition circuit (bytes; see ``plan``)."""
    rows: int
    domain_log: int
    host_record_bytes: int
    key_bytes: int
    setup_peak_bytes: int
    prove_peak_bytes: int
    host_setup_bytes: int = 0
    host_prove_bytes: int = 0

    def as_record(self, prefix: str = "est_") -> dict:
        return {prefix + k: v for k, v in self._asdict().items()}


def _merged_msm_bytes(curve, bases: int, general: int, cfg) -> int:
    """Device working set of one merged Pippenger pass (``ops.msm.msm_many``)
    over ``bases`` points of which ``general`` have general scalars (the
    others 0/1, one entry each): ``ops.msm.working_set_bytes`` of the general
    positions, the point-major copy of the other bases and their entries."""
    general = max(general, 1)
    F = 4 * math.prod(curve.fp)
    return (M.working_set_bytes(curve, general, 1,
                                M.many_window(curve, [general], 1, cfg), cfg)
            + (bases - general) * (4 * F + 32))


SETUP_CHUNK_BYTES = 4 << 30   # one fixed-base chunk (2^20 G2 points, tables, temporaries), generous
# the least MSM budget a key-resident 2^27 proof is planned with (it runs with 80% of the
# device's free memory: groth16.prove_msms)
RESIDENT_MSM_FLOOR = 4 << 30


def plan(rows: int, num_vars: int, num_aux: int, dense_vars: int, matrices_bytes: int,
         msm_budget: int | None = None, keys_in_host: bool = False,
         spmv_bytes: int | None = None, out_of_core: int | None = None,
         b_vars: int | None = None, host_witness: bool = False) -> Plan:
    """Estimated bytes for a circuit of ``rows`` R1CS rows, ``num_vars``
    variables (``num_aux`` aux, ``dense_vars`` not proven boolean, ``b_vars``
    occurring in B, default all) and PCE matrices of ``matrices_bytes``,
    domain m = 2^k ≥ rows:

    key = g1 + g2 with g1 = 96·(2·num_vars + num_aux + m − 1) (affine A, B1,
    L, H) and g2 = 192·num_vars (B2), and for a key built split (an MSM
    budget or ``keys_in_host``) B1 and B2 at ``b_vars`` instead of
    ``num_vars`` (``modes.key_bytes``) and the bit parts of A, B1, L and B2
    padded to a power of two; setup peak = 32·(7·num_vars + 2·m)
    (QAP values and scalars) + key (none with ``keys_in_host``) + one chunk
    of ``fixed_base_points`` (each query is written chunk by chunk into its
    own array);
    prove peak = key (none with ``keys_in_host``) + matrices + the domain
    (``DOMAIN_VECTORS`` vectors of m) + 32·num_vars (the witness) + the
    largest stage: the SpMV, ``spmv_bytes`` (``pce.evaluate_bytes`` of the
    extracted matrices; before extraction 32·(num_vars + 4·rows)); the
    NTTs, ``NTT_VECTORS`` vectors of m; the MSMs, h (m) + their working set:
    the larger merged pass (G1: A, B1, L, H; G2: B2), or a copy of the
    witness (w ‖ r, w ‖ s) + ``msm_budget`` (the per-MSM path, bases in
    chunks);
    host = ``HOST_BYTES_PER_ROW``·rows (recording and extraction), and for
    the setup that plus the key with ``keys_in_host`` (the key is built
    split, ``groth16.setup(positions=)``: never a second copy).

    ``out_of_core`` (bytes, with ``keys_in_host``; the 16 GB mode,
    ``groth16.prove(out_of_core_budget=)``): no key, matrices or domain on
    the device; prove peak = w + the larger of the budget (SpMV row blocks,
    NTT sweeps) and the MSMs' stage (w ‖ r, 32·num_vars, + the MSM budget,
    which defaults to the same budget; h, in host memory, goes to the
    device a chunk at a time, ``ops.msm``); host while proving =
    the key + the matrices twice (``to_host``'s and the prepared
    ``pce.host_plan``'s pinned row blocks) + a, b, c and h (4 vectors of m:
    the h steps overwrite a and b; the device h needs two, but falls back to
    this path where it runs out of device memory); ``host_witness``: no w
    on the device before the MSMs (``modes.peak_bytes``), and w in host
    memory instead."""
    log_m = G.domain_log(rows)
    m = 1 << log_m
    split = msm_budget is not None or keys_in_host
    b = b_vars if split and b_vars is not None else num_vars
    g1, g2 = G1_AFFINE * (num_vars + b + num_aux + m - 1), G2_AFFINE * b
    bits = num_vars - dense_vars
    if split and bits:
        # built split (the per-MSM path): A, B1, B2 and L's bit parts padded to 2^k
        pad = (1 << (bits - 1).bit_length()) - bits
        g1, g2 = g1 + 3 * G1_AFFINE * pad, g2 + G2_AFFINE * pad
    key = g1 + g2
    setup = (FR_BYTES * (7 * num_vars + 2 * m) + (0 if keys_in_host else key)
             + SETUP_CHUNK_BYTES)
    host_setup = HOST_BYTES_PER_ROW * rows + (key if keys_in_host else 0)
    record = HOST_BYTES_PER_ROW * rows
    if out_of_core is not None:
        if not keys_in_host:
            raise ValueError("plan: out_of_core needs keys_in_host")
        return Plan(rows, log_m, record, key, setup,
                    MD.peak_bytes(num_vars, num_aux, rows, matrices_bytes, "out-of-core",
                                  msm_budget=msm_budget, out_of_core=out_of_core,
                                  host_witness=host_witness), host_setup,
                    key + 2 * matrices_bytes + G.out_of_core_host_bytes(rows)
                    + (FR_BYTES * num_vars if host_witness else 0))
    held = 0 if keys_in_host else key
    if msm_budget is not None:          # the per-MSM path: w ‖ r + the budget
        prove = held + MD.peak_bytes(num_vars, num_aux, rows, matrices_bytes, "streaming",
                                     spmv_bytes, msm_budget)
    else:                               # one merged pass per curve
        cfg = M.default_config()
        merged = max(_merged_msm_bytes(G1, 2 * num_vars + num_aux + m - 1,
                                       3 * dense_vars + m - 1, cfg),
                     _merged_msm_bytes(G2, num_vars, dense_vars, cfg))
        spmv = FR_BYTES * (num_vars + 4 * rows) if spmv_bytes is None else spmv_bytes
        prove = (held + matrices_bytes + FR_BYTES * (DOMAIN_VECTORS * m + num_vars)
                 + max(spmv, FR_BYTES * NTT_VECTORS * m, FR_BYTES * m + merged))
    return Plan(rows, log_m, record, key, setup, prove, host_setup)


def plan_from_counts(kind: str, size: str, challenges: int | None = None,
                     msm_budget: int | None = None, keys_in_host: bool = False,
                     out_of_core: int | None = None, host_witness: bool = False) -> Plan:
    """``plan`` before recording: rows from ``counts``, every variable taken
    as aux and dense (aux ≈ constraints in these circuits; the prove peak is
    an upper bound until the recorded circuit says which variables are bits)."""
    constraints, inputs = counts(kind, size, challenges)
    rows = constraints + inputs + 1
    return plan(rows, rows, constraints, rows, MATRIX_BYTES_PER_ROW * rows, msm_budget,
                keys_in_host, out_of_core=out_of_core, host_witness=host_witness)


def pinned_estimate(kind: str, size: str, challenges: int | None = None,
                    out_of_core: int | None = None, host_witness: bool = False,
                    witnesses: int = 1) -> int:
    """Pinned host bytes a ``--pinned-key`` process plans for ``kind`` at
    ``size`` before anything is recorded (``memory.widen_pinned_pool``'s
    ``pinned``: the pool's cap, set before the backend starts): the key in
    host memory and a proof's pinned vectors (``groth16.pinned_plan_bytes``)
    from ``plan_from_counts``, an upper bound (every variable dense, the
    matrices at ``MATRIX_BYTES_PER_ROW``)."""
    p = plan_from_counts(kind, size, challenges, keys_in_host=True, out_of_core=out_of_core,
                         host_witness=host_witness)
    return G.pinned_plan_bytes(p.key_bytes, p.rows, p.rows,
                               None if out_of_core is None else MATRIX_BYTES_PER_ROW * p.rows,
                               host_witness, witnesses)


def limits() -> dict:
    """Bytes this machine offers: ``device`` (the accelerator's limit; on the
    CPU backend, host memory) and ``host`` (available host memory)."""
    phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    avail = phys
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    stats = {}
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # noqa: BLE001 - not every backend has memory stats
        pass
    return {"device": int(stats.get("bytes_limit") or avail), "host": int(avail)}


def gib(b: int) -> str:
    """Bytes for a message: GiB from 1 GiB up, MiB below."""
    return f"{b / 2**30:.1f} GiB" if b >= 2**30 else f"{b / 2**20:.1f} MiB"


def shortfall(p: Plan, lim: dict, stages=("record", "setup", "prove"),
              has: dict | None = None) -> str | None:
    """Why the planned case cannot fit ``lim`` (``limits()``), or None;
    ``has``: how the message names a limit (where -> phrase; default "this
    machine has")."""
    need = {"record": [("host", p.host_record_bytes)],
            "setup": [("device", p.setup_peak_bytes), ("host", p.host_setup_bytes)],
            "prove": [("device", p.prove_peak_bytes), ("host", p.host_prove_bytes)]}
    for stage in stages:
        for where, b in need[stage]:
            if b > lim[where]:
                phrase = (has or {}).get(where, "this machine has")
                return (f"{stage} needs about {gib(b)} of {where} memory for {p.rows:,} rows "
                        f"(domain 2^{p.domain_log}), {phrase} {gib(lim[where])}")
    return None


# ---------------------------------------------------------------- one case
class Result(NamedTuple):
    """What ``run_case`` leaves: the main record, and (when it proved) the
    verifying key, the proof (batch (1,)) and its public inputs (ints)."""
    record: dict
    vk: Any = None
    proof: Any = None
    public: list | None = None


def _expected_public(part) -> list:
    """The partition's public inputs as the kinds module computes them on
    the host (rust-fil-proofs' order, ONE excluded)."""
    pub = part.public_inputs() if callable(getattr(part, "public_inputs", None)) else part.public
    return [int(v) for v in pub]


def _nbytes(tree, device_only: bool = False) -> int:
    """Bytes of a pytree's arrays (only the device arrays if ``device_only``)."""
    return sum(int(x.nbytes) for x in jax.tree.leaves(tree)
               if isinstance(x, jax.Array) or (not device_only and hasattr(x, "nbytes")))


def _circuit(spec, directory: str | None, rec: dict):
    """(R1CS, Matrices) of ``spec``: recorded and extracted (``record_s``,
    ``extract_s`` in ``rec``), or, with ``directory``, loaded from there
    (``r1cs_load_s``, ``pce_load_s``) where an earlier run stored them
    (``jaxprove.pce``: atomic, checksummed entries keyed by the topology and
    the PCE version).  ``extract_s`` is the extraction alone, so the matrices
    are loaded, extracted and saved here rather than by ``pce.get_or_extract``."""
    key = pce.cache_key(spec.topology)

    def record():
        t0 = time.perf_counter()
        r = spec.record()
        rec["record_s"] = time.perf_counter() - t0
        _say(f"recorded {r.num_rows:,} rows in {rec['record_s']:.1f} s")
        return r

    t = time.perf_counter()
    r1cs = pce.get_or_record(record, key + ".r1cs", directory) if directory else record()
    if "record_s" not in rec:
        rec["r1cs_load_s"] = time.perf_counter() - t
        _say(f"loaded the recorded circuit from {directory} in {rec['r1cs_load_s']:.1f} s")
    t = time.perf_counter()
    m = pce.load(directory, key) if directory else None
    if m is not None:
        rec["pce_load_s"] = time.perf_counter() - t
    else:
        m = jax.block_until_ready(pce.extract(r1cs))
        rec["extract_s"] = time.perf_counter() - t
        if directory:
            pce.save(m, directory, key)
    return r1cs, m


def run_case(kind: str, size: str, reps: int = 5, env: dict | None = None,
             out: str | None = None, verify: bool = True, save: str | None = None,
             record_only: bool = False, challenges: int | None = None, seed: int = 0,
             force: bool = False, setup_seed: int | None = None,
             msm_budget: int | None = None, keys_in_host: bool = False,
             circuit_dir: str | None = None, then_resident: bool = False,
             streaming_reps: int | None = None, out_of_core: int | None = None,
             keys_dir: str | None = None, setup_only: bool = False,
             device_budget: int | None = None, host_witness: bool = False,
             pinned_key: bool = False) -> Result:
    """Benchmark one partition of ``kind`` at ``size`` (module docstring) and
    emit its JSON records (to stdout, appended to ``out``).  Streaming mode
    (the engine's): ``msm_budget`` bytes per MSM call (bases in chunks),
    ``keys_in_host`` the proving key's point vectors in host memory.
    ``setup_seed``: a seeded (insecure) setup, for tests.  ``circuit_dir``:
    keep the recorded circuit and its matrices there and reuse them (a
    32GiB partition is recorded in one process, proved in the next).
    ``then_resident`` (with ``keys_in_host``): after the streaming proofs,
    place the same key on the device and time proofs again with the MSMs
    within 80% of the free device memory (a second record,
    ``keys_in_host_memory`` false, ``msm_budget_bytes`` null, and
    ``_resident`` saved proofs): one setup for both modes; skipped (with a
    message) when the plan with ``RESIDENT_MSM_FLOOR`` does not fit.  After
    the 16 GB mode (``out_of_core``, ``device_budget``) the ballast is
    dropped and the matrices and domain go back to the device first.
    ``streaming_reps`` (default ``reps``): timed streaming proofs; 0 (only
    with ``then_resident``) skips the streaming proofs and their compiles —
    the key is still set up in host memory, then placed (the streaming
    record is written without timings, ``streaming_reps`` 0).
    ``out_of_core`` (bytes, with ``keys_in_host``; the 16 GB mode): the
    matrices stay in host memory and a, b, c and h are computed out of core
    within that many device bytes per program (``Groth16Prover``'s
    ``out_of_core_budget``); the satisfaction check runs out of core too.
    Run it under a pool capped like the card (XLA_PYTHON_CLIENT_MEM_FRACTION)
    to show that the card's memory is enough.
    ``keys_dir``: keys of this circuit (``keys_name``) are loaded from there
    instead of set up (``groth16.load_keys``), or set up and stored there;
    ``setup_only`` stops after storing them.  So the 16 GB mode at 32GiB,
    whose setup needs ~39 GiB of device memory, proves under the capped pool
    with keys an uncapped process set up before, where the disk holds the
    key.  ``device_budget`` (bytes): after the setup, a ballast allocation
    leaves only that many device bytes free for everything after it
    (witness, proofs: ``ballast_bytes``), the way a smaller card would: the
    16 GB mode in the process that set its keys up (the 32GiB PoRep key, 70
    GiB in host memory, does not fit the H200 machine's 64 GiB disk).
    ``pinned_key`` (with ``keys_in_host``, not ``then_resident``): the
    proving key's host vectors moved into pinned host memory after the
    setup (``groth16.pin_key``, timed as ``pin_key_s``; bench/NOTES.md
    hypothesis 84).
    ``host_witness`` (with ``out_of_core``): the witness goes to host memory
    after the witness program (``transfer.fetch``, timed as
    ``witness_fetch_s``, and its device copy dropped) and the proofs take
    it from there (``groth16.prove``'s host witness: a and b evaluated into
    the device, h computed there, bench/NOTES.md hypothesis 83; the row
    blocks planned for it, ``groth16.out_of_core_plan``).  The proof times do
    not include the fetch: add ``witness_fetch_s`` for the witness program's
    output to a proof."""
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if setup_only and not keys_dir:
        raise ValueError("setup_only needs keys_dir: the keys are what it leaves behind")
    if out_of_core is not None and (out_of_core <= 0 or not keys_in_host):
        raise ValueError(f"out_of_core ({out_of_core}) must be a positive byte count, with "
                         f"keys_in_host")
    if host_witness and out_of_core is None:
        raise ValueError("host_witness needs out_of_core: it is a form of the 16 GB mode")
    if pinned_key and (not keys_in_host or then_resident):
        raise ValueError("pinned_key needs keys_in_host, without then_resident (the pinned "
                         "key is not placed on the device)")
    streaming_reps = reps if streaming_reps is None else streaming_reps
    if streaming_reps < 0 or (streaming_reps == 0 and not (then_resident and keys_in_host)):
        raise ValueError(f"streaming_reps must be >= 1, or 0 with then_resident and "
                         f"keys_in_host, got {streaming_reps}")
    env = environment() if env is None else env
    spec = spec_for(kind, size, challenges)
    name = f"filecoin.{kind}"
    rec = {"case": name, "kind": kind, "size": size, "sector_bytes": spec.sector_size,
           "topology": spec.topology, "challenges": challenges, "seed": seed,
           "msm_budget_bytes": msm_budget, "keys_in_host_memory": keys_in_host,
           "out_of_core_bytes": out_of_core, "command": argv_command(), **env}
    est = plan_from_counts(kind, size, challenges, msm_budget, keys_in_host, out_of_core,
                           host_witness and keys_in_host)
    lim = limits()
    rec.update(est.as_record(), limit_device_bytes=lim["device"], limit_host_bytes=lim["host"])
    _say(f"{kind} {size} ({spec.topology}): about {est.rows:,} rows, domain 2^{est.domain_log}, "
         f"key ~{est.key_bytes / 2**30:.2f} GiB")
    # the prove estimate needs the exact dense-variable count (after extraction)
    # with keys_dir the setup may be skipped (stored keys): its stage is checked once the
    # recorded circuit names the entry
    why = shortfall(est, lim, ("record",) if record_only or keys_dir else ("record", "setup"))
    if why and not force:
        _say(f"SKIPPED {kind} {size}: {why} (--force tries anyway; --record-only needs "
             f"host memory only; --challenges N scales the circuit down)")
        rec["skipped"] = why
        emit(rec, out)
        return Result(rec)

    r1cs, m = _circuit(spec, circuit_dir, rec)
    bits = int(np.count_nonzero(np.asarray(m.bit_vars)))
    b_vars = int(np.count_nonzero(np.asarray(m.b_input_density))
                 + np.count_nonzero(np.asarray(m.b_aux_density)))
    rec.update(rows=m.rows, constraints=m.num_constraints, num_inputs=m.num_inputs,
               num_aux=m.num_aux, num_vars=m.num_vars, bit_vars=bits, b_vars=b_vars,
               nnz=list(m.nnz),
               domain_log=G.domain_log(m.rows), matrices_bytes=m.nbytes,
               rows_match_estimate=m.rows == est.rows)
    if m.rows != est.rows:
        _say(f"WARNING: {m.rows:,} rows recorded, the formulas say {est.rows:,}")
    def planned(budget, host, spmv_bytes):
        """``plan`` of the recorded circuit with this MSM budget and key placement."""
        return plan(m.rows, m.num_vars, m.num_aux, m.num_vars - bits, m.nbytes, budget, host,
                    spmv_bytes, out_of_core if host else None, b_vars,
                    host_witness=host_witness and host)

    spmv_bytes = pce.evaluate_bytes(m)
    exact = planned(msm_budget, keys_in_host, spmv_bytes)
    rec.update(exact.as_record("plan_"))
    _say(f"matrices {'loaded' if 'pce_load_s' in rec else 'extracted'} in "
         f"{rec.get('pce_load_s', rec.get('extract_s')):.1f} s ({m.nbytes / 2**20:.1f} MiB)")
    emit({**rec, "case": name + ".circuit"}, out)
    if record_only:
        return Result(rec)

    def resident_shortfall():
        # the key-resident proofs (then_resident) plan the key on the device beside the
        # prover's working set; with no streaming proofs to make, a case whose resident plan
        # does not fit stops here, before its setup (the 32GiB WindowPoSt partition ran out of
        # memory in its SpMV, bench/NOTES.md session 13)
        return then_resident and keys_in_host and shortfall(
            planned(RESIDENT_MSM_FLOOR, False, spmv_bytes), lim, ("prove",))

    split = keys_in_host or msm_budget is not None
    kname = keys_name(kind, size, challenges, split, m) if keys_dir else None
    stored = bool(kname) and os.path.isdir(os.path.join(keys_dir, kname))
    check = ("prove",) if stored else ("setup",) if setup_only else ("setup", "prove")
    def short(p, stages):
        """shortfall, the proving stage against ``device_budget`` where one is given."""
        if device_budget is None or device_budget >= lim["device"] or "prove" not in stages:
            return shortfall(p, lim, stages)
        return shortfall(p, lim, tuple(x for x in stages if x != "prove")) or shortfall(
            p, dict(lim, device=device_budget), ("prove",),
            {"device": "the device budget is"})

    why = short(exact, check)
    resident_why = None if setup_only else resident_shortfall()
    if why or resident_why:
        # before refusing on the model's SpMV figure (an upper bound on the GPU, ~2x at
        # 32GiB WindowPoSt), ask XLA what the SpMV program takes (one compilation)
        xla = pce.evaluate_xla_bytes(m)
        if xla is not None:
            rec.update(spmv_bytes_model=spmv_bytes, spmv_bytes_xla=xla)
            spmv_bytes = xla
            exact = planned(msm_budget, keys_in_host, spmv_bytes)
            rec.update(exact.as_record("plan_"))
            why = short(exact, check)
            resident_why = None if setup_only else resident_shortfall()
            _say(f"the SpMV program takes {xla / 2**30:.1f} GiB by XLA's count (the model: "
                 f"{rec['spmv_bytes_model'] / 2**30:.1f} GiB)")
    if why and msm_budget is None and not keys_in_host and not keys_dir:
        # the key fits on the device but not beside the merged MSMs' working set (SnapDeals
        # 512MiB: ~135 GiB planned, session 17): the per-MSM path instead, the key built
        # split on the device and each MSM in chunks within what the rest leaves
        budget = lim["device"] - planned(0, False, spmv_bytes).prove_peak_bytes
        if budget >= RESIDENT_MSM_FLOOR and not shortfall(planned(budget, False, spmv_bytes),
                                                          lim, ("setup", "prove")):
            _say(f"the merged MSMs do not fit beside the key ({why}): each MSM alone, in "
                 f"chunks within {gib(budget)}")
            msm_budget, why = budget, None
            exact = planned(msm_budget, False, spmv_bytes)
            rec.update(exact.as_record("plan_"), msm_budget_bytes=msm_budget,
                       msm_budget_auto=True)
    if not why and resident_why and not streaming_reps:
        why = f"with the key resident, {resident_why}"
    if not why and out_of_core is not None:
        try:                   # the row blocks must fit the budget: say so before the setup
            pce.plan_blocks(m, 1, out_of_core)
        except ValueError as e:
            why = f"out of core: {e}"
    if why and not force:
        _say(f"SKIPPED setup/prove of {kind} {size}: {why}")
        rec["skipped"] = why
        emit(rec, out)
        return Result(rec)

    stages = {}

    def progress(stage, sec):
        stages[stage] = round(sec, 3)
        _say(f"setup: {stage} at {sec:.1f} s")

    pos = G.msm_positions(m)
    split = keys_in_host or msm_budget is not None      # (msm_budget may have been chosen above)
    if stored:
        _say(f"keys {kname} from {keys_dir}")
        t = time.perf_counter()
        got = G.load_keys(keys_dir, kname, host=keys_in_host)
        if got is None:
            raise ValueError(f"keys {kname} vanished from {keys_dir}")
        (pk, vk), got = got, None
        rec["keys_load_s"] = time.perf_counter() - t
        rec["keys_loaded"] = kname
    else:
        _say(f"setup of {m.rows:,} rows")
        t = time.perf_counter()
        # streaming mode (an MSM budget, or keys in host memory: the per-MSM path): the key
        # is built split by the MSM positions, as the engine's streaming key
        # (groth16.streaming_key), so no proof splits it again (on the device that would copy
        # 57 GiB at 2^27); keys in host memory go there chunk by chunk
        pk, vk = jax.block_until_ready(G.setup(r1cs, seed=setup_seed, progress=progress,
                                               host=keys_in_host,
                                               positions=pos if split else None))
        rec["setup_s"] = time.perf_counter() - t
        rec["setup_stages_cumulative_s"] = stages
        rec["peak_bytes_after_setup"] = peak_memory_bytes()
        if keys_dir:
            t = time.perf_counter()
            G.save_keys(pk, vk, keys_dir, kname)
            rec["keys_save_s"] = time.perf_counter() - t
            rec["keys_saved"] = kname
            _say(f"keys stored as {kname} in {rec['keys_save_s']:.1f} s")
    if setup_only:
        emit({**rec, "case": name + ".setup"}, out)
        return Result(rec)
    del r1cs
    host_plan = None
    if out_of_core is None:
        dom = jax.block_until_ready(N.domain(rec["domain_log"]))  # resident with the keys
    else:                      # the 16 GB mode: matrices in host memory, no resident domain;
        m, dom = pce.to_host(m), None          # the SpMV's row blocks cut once, pinned,
        t = time.perf_counter()                # where the host has room beside the proof's vectors,
        # before the key is pinned (its room counts them as pinned: memory.pinned_in_use)
        host_plan = G.out_of_core_plan(m, out_of_core, host_witness=host_witness)
        rec["spmv_budget_bytes"] = min(host_plan.budgets)   # B's: beside the most planes
        rec["spmv_budgets_bytes"] = list(host_plan.budgets)
        rec["host_plan_s"] = time.perf_counter() - t
        rec["host_plan_blocks"] = [len(p.blocks) for p in host_plan.plans]
        rec["host_plan_prepared"] = host_plan.blocks is not None
        rec["host_plan_pinned_bytes"] = memory.pinned_in_use()   # the blocks, padded
        _say(f"the SpMV's row blocks {'prepared' if host_plan.blocks else 'cut per proof'} "
             f"in {rec['host_plan_s']:.1f} s ({memory.gib(rec['host_plan_pinned_bytes'])} "
             f"pinned; the matrices {memory.gib(m.nbytes)})")
    rec["pinned_key"] = pinned_key
    if pinned_key:             # hypothesis 84: the key's host vectors in pinned memory
        t = time.perf_counter()
        box = [pk]
        del pk
        room = memory.pinned_room(jax.devices()[0], G.proof_pinned_bytes(
            None if out_of_core is None else m, host_witness),   # hypothesis 92
            in_use=memory.pinned_in_use())
        pk = G.pin_key(box, room=room)
        rec["pin_key_s"] = time.perf_counter() - t
        rec["pinned_key_bytes"], rec["pinned_pool_bytes"] = G.pinned_bytes(pk), memory.pinned_pool_bytes()
        _say(f"{memory.gib(rec['pinned_key_bytes'])} of the key pinned in host memory in "
             f"{rec['pin_key_s']:.1f} s (the pool's cap {memory.gib(rec['pinned_pool_bytes'])})")
    ballast = None
    if device_budget is not None:
        hold = ballast_bytes(jax.devices()[0].memory_stats(), device_budget)
        rec["device_budget_bytes"], rec["ballast_bytes"] = device_budget, hold
        if hold is None:
            _say("no device memory statistics here: no ballast, the budget is not enforced")
        elif hold:
            box = [pk, vk, pos]
            del pk, vk, pos
            ballast, (pk, vk, pos) = ballast_below(box, hold)
            st = jax.devices()[0].memory_stats() or {}
            rec["after_ballast_in_use_bytes"] = st.get("bytes_in_use")
            rec["after_ballast_largest_free_bytes"] = st.get("largest_free_block_bytes")
            _say(f"ballast of {gib(hold)} held: {gib(device_budget)} free for the proofs "
                 f"(in use {gib(st.get('bytes_in_use', 0))} of {gib(st.get('bytes_limit', 0))}, "
                 f"largest free block {gib(st.get('largest_free_block_bytes', 0))})")
    res = E.Resident(pk, vk, m, _nbytes((pk, vk, m, dom, pos), device_only=True), dom, pos,
                     host_plan, {}, "resident" if not keys_in_host else
                     "streaming" if out_of_core is None else "out-of-core", out_of_core)
    rec["key_bytes"], rec["resident_bytes"] = _nbytes((pk, vk)), res.nbytes

    t = time.perf_counter()
    parts = synthetic_parts(kind, size, challenges, seed, circuit_dir)
    rec["synthetic_s"] = time.perf_counter() - t
    rec["job_partitions"] = len(parts)
    _say(f"synthetic job of {len(parts)} partition(s) in {rec['synthetic_s']:.1f} s; witness")
    t = time.perf_counter()
    w = jax.block_until_ready(spec.witness(parts[:1]))
    rec["witness_first_s"] = time.perf_counter() - t
    t = time.perf_counter()
    w = jax.block_until_ready(spec.witness(parts[:1]))
    rec["witness_s"] = time.perf_counter() - t
    # the proof's public inputs are w[1:num_inputs]: what the verifying key
    # expects (num_inputs − 1 values, ONE excluded), in the kinds module's order
    want = _expected_public(parts[0])
    got = [int(v) for v in Fr.to_int(np.asarray(w[:, 0, 1:m.num_inputs]))]
    if len(got) != vk.ic.shape[-1] - 1 or got != want:
        raise RuntimeError(
            f"{kind} {size}: the witness's {len(got)} public inputs differ from the "
            f"{len(want)} the kinds module computes (the key expects {vk.ic.shape[-1] - 1})")
    rec["host_witness"] = host_witness
    if host_witness:           # the witness leaves the device (the 16 GB mode's h and MSMs)
        t = time.perf_counter()
        w = transfer.fetch_held(w)   # its pinned copy kept: put back by DMA (hypothesis 91)
        rec["witness_fetch_s"] = time.perf_counter() - t
    prover = E.Groth16Prover(keys_in_host_memory=keys_in_host, out_of_core_budget=out_of_core)
    t = time.perf_counter()
    if out_of_core is None:
        bad = prover.check(res, w)[0]
    else:                      # the prover leaves a lone instance to its proof: check it here
        first = int(pce.evaluate_host(m, w, out_of_core, check=True,
                                      plan=G.host_plan_for(host_plan, out_of_core),
                                      learned=res.budgets)[3].reshape(-1)[0])
        bad = None if first < 0 else f"first failing row {first}"
    rec["check_first_s"] = time.perf_counter() - t
    if bad is not None:
        raise RuntimeError(f"{kind} {size}: the synthetic witness fails: {bad}")
    _say(f"witness {rec['witness_s']:.3f} s (first {rec['witness_first_s']:.1f} s), satisfied; "
         f"first proof (compiles)")

    suffix = f"_c{challenges}" if challenges else ""
    rec["streaming_reps"] = streaming_reps
    if streaming_reps:
        timing, proof, public = _timed_proofs(prover, res, w, streaming_reps, msm_budget, want,
                                              f"{kind} {size}")
        rec.update(timing)
        rec["learned_budgets"] = dict(res.budgets)    # the budgets a halving settled on
        if ballast is not None and timing["proofs_in_use_max_bytes"] is not None:
            rec["proofs_in_use_max_bytes_less_ballast"] = \
                timing["proofs_in_use_max_bytes"] - rec["ballast_bytes"]
    rec["host_rss_peak_bytes"] = host_rss_bytes()[1]      # the process so far (VmHWM)
    emit(rec, out)
    if save and streaming_reps:
        _save(save, f"{kind}_{size}{suffix}", vk, proof, public)
    if resident_why and not force:
        _say(f"SKIPPED the key-resident proofs of {kind} {size}: {resident_why}")
        emit({**rec, "case": name + ".resident", "skipped": resident_why}, out)
    elif then_resident and keys_in_host:
        # the same key, now resident on the device (the <= 1.5 s goal): no second
        # setup, and the host copy is dropped once the device holds it
        _say("placing the key on the device; proving with the key resident")
        if out_of_core is not None:
            # from the 16 GB mode: the ballast goes, the matrices and the domain come back
            # to the device, the prover works in core
            ballast = host_plan = res = None
            prover = E.Groth16Prover(keys_in_host_memory=True)
            m = jax.block_until_ready(jax.device_put(m))
            w = jax.block_until_ready(jnp.asarray(w))    # a host witness back (in core)
            dom = jax.block_until_ready(N.domain(rec["domain_log"]))
        t = time.perf_counter()                 # key_place_s: the key alone, as without it
        pk = jax.block_until_ready(G.place_keys((pk, vk))[0])
        place = time.perf_counter() - t
        res = E.Resident(pk, vk, m, _nbytes((pk, vk, m, dom, pos), device_only=True), dom, pos)
        # the MSMs within 80% of the device's free memory (groth16.prove_msms), not the
        # streaming budget: the key is on the device now
        timing, proof, public = _timed_proofs(prover, res, w, reps, None, want,
                                              f"{kind} {size} (key resident)")
        rec = {**rec, **timing, "keys_in_host_memory": False, "msm_budget_bytes": None,
               "key_place_s": place, "out_of_core_bytes": None, "device_budget_bytes": None,
               "ballast_bytes": None, "proofs_in_use_max_bytes_less_ballast": None,
               "resident_bytes": res.nbytes, "after_streaming_in_process": True,
               "reps": reps, "host_rss_peak_bytes": host_rss_bytes()[1],
               "command": argv_command()}
        emit(rec, out)
        if save:
            _save(save, f"{kind}_{size}_resident{suffix}", vk, proof, public)
    if verify:
        _say("verifying (pairing, host CPU)")
        t = time.perf_counter()
        ok = prover.verify(res, [public], proof)[0]
        emit({"case": name + ".verify", "kind": kind, "size": size, "topology": spec.topology,
              "challenges": challenges, "verified": ok, "verify_first_s": time.perf_counter() - t,
              "command": argv_command(), **env}, out)
        if not ok:
            raise RuntimeError(f"{kind} {size}: the proof does not verify")
    return Result(rec, vk, proof, public)


def ballast_bytes(stats: dict | None, budget: int) -> int | None:
    """Bytes to hold so that ``budget`` of the pool stays free: bytes_limit −
    bytes_in_use − budget (at least 0; a multiple of 4); None without the
    allocator's statistics."""
    if not stats or "bytes_limit" not in stats or "bytes_in_use" not in stats:
        return None
    if budget <= 0:
        raise ValueError(f"device budget must be positive, got {budget}")
    return max(0, int(stats["bytes_limit"]) - int(stats["bytes_in_use"]) - budget) // 4 * 4


def ballast_below(box: list, hold: int):
    """(ballast, the arrays of ``box``): a ballast of ``hold`` bytes allocated
    at the bottom of the device pool, below the device arrays of ``box``
    (moved to host memory while it is allocated, then placed again; ``box``
    is emptied, so the caller holds no device copy meanwhile).  The budget
    it leaves is then one free region above it, not the holes that the
    setup's freed temporaries left between live arrays (session 37: a 14 GiB
    budget could not hold the 32GiB witness's 8.0 GiB peak)."""
    tree = list(box)
    box.clear()
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    del tree
    placed = [isinstance(x, jax.Array) for x in leaves]
    leaves = [np.asarray(jax.device_get(x)) if d else x for x, d in zip(leaves, placed)]
    ballast = jax.block_until_ready(jnp.zeros((hold // 4,), jnp.uint32))
    leaves = [jax.device_put(x) if d else x for x, d in zip(leaves, placed)]
    return ballast, jax.tree_util.tree_unflatten(treedef, leaves)


def keys_name(kind: str, size: str, challenges: int | None, split: bool, m) -> str:
    """The ``--keys-dir`` entry of a circuit's keys: kind, size, challenges,
    split (streaming) or whole, and the matrices' content key."""
    return (f"{kind}-{size}-c{'all' if challenges is None else challenges}-"
            f"{'split' if split else 'whole'}-{m.key[:16]}")


def _timed_proofs(prover, res, w, reps: int, msm_budget, want: list, what: str):
    """A warm-up proof, then ``reps`` timed ones of the witness ``w`` (one
    instance): (record fields, the last proof, its public inputs)."""
    t = time.perf_counter()
    prover.prove(res, w, [True], msm_budget, on_stage=_progress(what, t))
    first = time.perf_counter() - t
    _say(f"{what}: first proof {first:.1f} s; timing {reps}")
    totals, per_stage = [], {}
    with InUseSampler() as sampled:        # the proofs' own device peak (the setup's is older)
        for _ in range(reps):
            proof, public, times = prover.prove(res, w, [True], msm_budget)
            totals.append(times["total"])
            for k, v in times.items():
                per_stage.setdefault(k, []).append(v)
            _say(f"proof {times['total']:.3f} s")
    public = public[0]
    if public != want:
        raise RuntimeError(f"{what}: the prover returned other public inputs than its "
                           f"witness holds")
    med = statistics.median(totals)
    return (dict(median_s=med, min_s=min(totals), max_s=max(totals), reps=reps,
                 first_proof_s=first, compile_s=max(first - med, 0.0),
                 stages_median_s={k: statistics.median(v) for k, v in per_stage.items()},
                 public_inputs=len(public), public_match=True, peak_bytes=peak_memory_bytes(),
                 proofs_in_use_max_bytes=sampled.max_bytes),
            proof, public)


def _progress(what: str, start: float, every: float = 30.0):
    """An ``on_stage`` for a first proof (its compiles take minutes at 32GiB):
    says which stage finished or is running, at most every ``every`` seconds
    within a stage (chunked MSMs call it between chunks)."""
    last = {"stage": None, "at": start}

    def on_stage(stage: str) -> None:
        now = time.perf_counter()
        if stage != last["stage"] or now - last["at"] >= every:
            _say(f"{what}: first proof: {stage} at {now - start:.1f} s")
            last.update(stage=stage, at=now)
    return on_stage


def _save(save: str, name: str, vk, proof, public) -> None:
    from bench.groth16 import save_for_snarkjs
    d = os.path.join(save, name)
    save_for_snarkjs(d, vk, proof, public)
    _say(f"saved snarkjs JSON under {d}")


def _names(s: str, known, what: str) -> list:
    out = [x for x in s.split(",") if x]
    bad = [x for x in out if x not in known]
    if bad or not out:
        raise SystemExit(f"--{what}: {', '.join(bad) or 'none given'}; known: {', '.join(known)}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: " + ", ".join(KINDS))
    ap.add_argument("--sizes", default="2KiB", help="comma-separated: " + ", ".join(Z.SIZES))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--streaming-reps", type=int, default=None,
                    help="timed streaming proofs (default --reps); 0 with --then-resident: "
                         "straight to the key-resident proofs")
    ap.add_argument("--challenges", type=int, default=None,
                    help="scale each kind to N challenges (per sector for PoSt)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic inputs")
    ap.add_argument("--out", default=None, help="append JSON records here")
    ap.add_argument("--save", default=None,
                    help="write snarkjs verification_key/proof/public JSON under DIR/<kind>_<size>")
    ap.add_argument("--no-verify", action="store_true", help="skip our verifier")
    ap.add_argument("--record-only", action="store_true",
                    help="record and extract only (counts, times, PCE bytes)")
    ap.add_argument("--force", action="store_true", help="run cases the memory plan says won't fit")
    ap.add_argument("--msm-budget-gib", type=float, default=None,
                    help="streaming mode: device bytes per MSM call (bases in chunks)")
    ap.add_argument("--keys-in-host-memory", action="store_true",
                    help="streaming mode: the proving key's point vectors stay in host memory")
    ap.add_argument("--out-of-core-gib", type=float, default=None,
                    help="with --keys-in-host-memory: the 16 GB mode, a, b, c and h out of core "
                         "within this many device bytes per program (cap the pool like the "
                         "card: XLA_PYTHON_CLIENT_MEM_FRACTION)")
    ap.add_argument("--cache", action="store_true", help="persistent compilation cache")
    ap.add_argument("--circuit-dir", default=None,
                    help="store the recorded circuits and their matrices here and reuse them "
                         "(record a 32GiB partition with --record-only in one process, prove "
                         "it in the next)")
    ap.add_argument("--then-resident", action="store_true",
                    help="with --keys-in-host-memory: then place the key on the device and "
                         "time proofs again (one setup for both modes)")
    ap.add_argument("--keys-dir", default=None,
                    help="load each circuit's keys from here instead of setting them up, or set "
                         "them up and store them here (the 16 GB mode at 32GiB: an uncapped "
                         "--setup-only process first, then the capped proofs)")
    ap.add_argument("--device-budget-gib", type=float, default=None,
                    help="after the setup, hold a ballast so that only this many GiB of the "
                         "device pool stay free for the witness and the proofs (a smaller "
                         "card's memory, in the process that set the keys up)")
    ap.add_argument("--pinned-key", action="store_true",
                    help="with --keys-in-host-memory: the proving key's host vectors in pinned "
                         "host memory (groth16.pin_key; the MSMs' puts at the link's rate)")
    ap.add_argument("--host-witness", action="store_true",
                    help="with --out-of-core-gib: the witness in host memory between its "
                         "program and the proofs (groth16.prove's host witness; the budget "
                         "then counts every device byte of the proof before its MSMs)")
    ap.add_argument("--setup-only", action="store_true",
                    help="with --keys-dir: record, set up, store the keys, stop")
    a = ap.parse_args(argv)
    if a.setup_only and not a.keys_dir:
        raise SystemExit("--setup-only: needs --keys-dir")
    if a.device_budget_gib is not None and a.device_budget_gib <= 0:
        raise SystemExit("--device-budget-gib: must be > 0")
    kinds = _names(a.kinds, KINDS, "kinds")
    sizes = _names(a.sizes, tuple(Z.SIZES), "sizes")
    if a.challenges is not None and a.challenges < 1:
        raise SystemExit("--challenges: must be >= 1")
    if a.msm_budget_gib is not None and a.msm_budget_gib <= 0:
        raise SystemExit("--msm-budget-gib: must be > 0")
    if a.out_of_core_gib is not None and (a.out_of_core_gib <= 0 or not a.keys_in_host_memory):
        raise SystemExit("--out-of-core-gib: must be > 0, with --keys-in-host-memory")
    if a.host_witness and a.out_of_core_gib is None:
        raise SystemExit("--host-witness: needs --out-of-core-gib")
    if a.pinned_key and (not a.keys_in_host_memory or a.then_resident):
        raise SystemExit("--pinned-key: needs --keys-in-host-memory, without --then-resident")
    if a.then_resident and not a.keys_in_host_memory:
        raise SystemExit("--then-resident: needs --keys-in-host-memory (streaming first)")
    if a.streaming_reps is not None and (a.streaming_reps < 0 or (
            a.streaming_reps == 0 and not a.then_resident)):
        raise SystemExit("--streaming-reps: must be >= 1, or 0 with --then-resident")
    budget = None if a.msm_budget_gib is None else int(a.msm_budget_gib * 2**30)
    if a.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    ooc = None if a.out_of_core_gib is None else int(a.out_of_core_gib * 2**30)
    # before the backend starts: the pool's cap is what the cases plan to pin (hypothesis 95)
    memory.widen_pinned_pool(max(pinned_estimate(k, z, a.challenges, ooc, a.host_witness)
                                 for k in kinds for z in sizes) if a.pinned_key else None)
    env = environment()
    for size in sizes:
        for kind in kinds:
            run_case(kind, size, a.reps, env, a.out, not a.no_verify, a.save, a.record_only,
                     a.challenges, a.seed, a.force, None, budget, a.keys_in_host_memory,
                     a.circuit_dir, a.then_resident, a.streaming_reps,
                     ooc, a.keys_dir, a.setup_only,
                     None if a.device_budget_gib is None else int(a.device_budget_gib * 2**30),
                     a.host_witness, a.pinned_key)


if __name__ == "__main__":
    main()
