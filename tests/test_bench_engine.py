"""bench/engine.py: the PoRep-shaped circuit (counts against recorded
circuits, witnesses against Python-integer satisfaction and hand-packed
public inputs), the memory plan's refusals, argument errors, and both cases
driven through the real engine: with a fast stand-in prover (records,
throughput bounds, priority evidence: WinningPoSt served before queued
PoRep work) and, marked slow, with real Groth16 proofs (setup, verify
before return, a streaming run within a tiny budget, one proof checked by
py_ecc's pairing)."""
from __future__ import annotations

import json
import os
import time

import jax
import numpy as np
import pytest

from bench import engine as B
from circuits import cs as C
from jaxprove import engine as E
from ops.field import Fr

ROWS = 3000                     # a few thousand rows: 992 XORs, 18 squares, no SHA block


def _hand_public(seed: int, shape: B.Shape) -> list[int]:
    """The public inputs from the seed with Python integers: the fill bits
    drawn after the blocks' bits, z_i = x_i XOR y_i for i < 256, packed
    little-endian in 254-bit chunks."""
    g = np.random.default_rng(seed)
    g.integers(0, 2, (shape.blocks, 512), dtype=np.uint32)
    fill = [int(v) for v in g.integers(0, 2, 2 * shape.pairs + shape.singles, dtype=np.uint32)]
    z = [fill[i] ^ fill[shape.pairs + i] for i in range(256)]
    return [sum(b << i for i, b in enumerate(z[:254])), sum(b << i for i, b in enumerate(z[254:]))]


# ---------------------------------------------------------------- the circuit
def test_counts_model_matches_recorded_circuits():
    base, block = B._unit_counts()
    assert block.rows == 512 + 25_840            # research note: one compression of free bits
    assert block.num_inputs == 0 and block.bit_vars == block.num_aux
    for shape in (B.Shape(1, 300, 2, 5), B.Shape(0, 257, 1, 0), B.Shape(0, 256, 0, 3)):
        got = B._counts_of(C.record(B.porep_shaped, *shape))
        assert got == B.circuit_counts(shape), shape
    for rows in (B.min_rows(), B.min_rows() + 1, ROWS, 30_000, B.DEFAULT_ROWS):
        shape = B.shape_for_rows(rows)
        assert B.circuit_counts(shape).rows == rows and shape.singles < 3
    big = B.circuit_counts(B.shape_for_rows(B.DEFAULT_ROWS))
    assert big.rows == 130_278_541 and B.shape_for_rows(B.DEFAULT_ROWS).blocks > 4800
    assert 0.015 < 1 - big.bit_vars / big.num_vars < 0.018      # ~1.6% not boolean, as recorded
    with pytest.raises(ValueError, match=f"rows must be an integer >= {B.min_rows()}"):
        B.shape_for_rows(B.min_rows() - 1)


def test_witness_satisfies_and_public_inputs_by_hand():
    """A one-block circuit: every instance satisfies the R1CS (Python
    integers), its public inputs are the hand-packed XORs, the module's host
    computation agrees, and other seeds give other inputs."""
    rows = B.min_rows() + 26_352 + 1000
    spec = B.porep_shaped_spec(rows)
    shape = B.shape_for_rows(rows)
    assert shape.blocks == 1 and shape.dense > 0
    r1cs = spec.record()
    seeds = spec.split({"seeds": [3, 2**62 + 5]})
    w = np.asarray(spec.witness(seeds))
    assert w.shape == (8, 2, r1cs.num_vars)
    for i, s in enumerate(seeds):
        ok, row = C.is_satisfied(r1cs, w[:, i])
        assert ok, row
        pub = [int(v) for v in Fr.to_int(w[:, i, 1:r1cs.num_inputs])]
        assert pub == _hand_public(s, shape) == B.public_inputs(s, shape)
    assert B.public_inputs(3, shape) != B.public_inputs(4, shape)
    for col in (r1cs.num_inputs, 1):          # a dense value (its square row), a public input
        bad = w[:, 0].copy()
        bad[:, col] = np.asarray(Fr.from_int([5]))[:, 0]
        assert not C.is_satisfied(r1cs, bad)[0]
    for inputs, msg in (({"seeds": []}, "one integer per partition"),
                        ({"seeds": [-1]}, "not an integer in"), ([1], "one integer"),
                        ({"seeds": [True]}, "not an integer in")):
        with pytest.raises(ValueError, match=msg):
            spec.split(inputs)


# ---------------------------------------------------------------- refusals and errors
def test_plan_refuses_before_setup(tmp_path):
    out = tmp_path / "r.jsonl"
    lim = {"device": 141 * B.GIB, "host": 128 * B.GIB}
    counts = B.circuit_counts(B.shape_for_rows(B.DEFAULT_ROWS))
    plan = B.kind_plan(B.KIND, counts, None, None)
    assert 60 * B.GIB < plan.key_bytes < 90 * B.GIB          # A, B1, L, H in G1 + B2 in G2
    est, why = B.plan_case([plan], None, None, lim)        # fits an H200 (chunk-by-chunk setup)
    assert why is None and est["est_key_bytes"][B.KIND] == plan.key_bytes
    est, why = B.plan_case([plan], None, None, dict(lim, device=64 * B.GIB))
    assert why and "needs about" in why
    budget = 16 * B.GIB
    msm = B.msm_budget_for(counts, budget)
    est, why = B.plan_case([B.kind_plan(B.KIND, counts, budget, msm)], budget, msm, lim)
    assert msm < B.MIN_MSM_BUDGET and "budget for the MSMs" in why   # NTT buffers alone > 16 GiB
    # the 16 GB mode (out of core within 9 GiB): nothing resident, the MSMs within what w and
    # its copy leave, the key held once in host memory beside the matrices and a, b, c, h
    ooc = 9 * B.GIB
    msm = B.msm_budget_for(counts, budget, ooc)
    m = 1 << 27
    assert msm == budget - 32 * 2 * counts.num_vars          # w, gathered scalars
    plan = B.kind_plan(B.KIND, counts, budget, msm, ooc)
    assert plan.resident_bytes == 0
    assert plan.host_bytes == plan.key_bytes + 2 * plan.matrices_bytes + 4 * 32 * m
    est, why = B.plan_case([plan], budget, msm, lim)
    assert why is None and est["est_prove_peak_bytes"] <= budget
    assert est["est_host_bytes"] == max(plan.record_bytes, plan.setup_host_bytes,
                                        plan.host_bytes) < lim["host"]
    # kinds set up in turn: each records and sets up while the earlier ones hold their bytes
    two = B.plan_case([plan, plan], budget, msm, dict(lim, host=10**15))[0]["est_host_bytes"]
    assert two == plan.host_bytes + max(plan.record_bytes, plan.setup_host_bytes,
                                        plan.host_bytes)
    with pytest.raises(ValueError, match="needs a budget"):
        B.kind_plan(B.KIND, counts, None, None, ooc)
    small = B.circuit_counts(B.shape_for_rows(ROWS))
    assert B.plan_case([B.kind_plan(B.KIND, small, None, None)], None, None, lim)[1] is None
    t = time.perf_counter()
    with pytest.raises(B.DoesNotFit, match="MSMs"):
        B.run_porep_shaped(rows=ROWS, partitions=2, proofs=2, budget_gib=0.001, out=str(out),
                           say=lambda m: None)
    rec = json.loads(out.read_text().splitlines()[-1])
    assert rec["skipped"] and rec["case"] == "engine.porep_shaped" and rec["budget_bytes"]
    assert time.perf_counter() - t < 30                       # refused before any setup


@pytest.mark.parametrize("kwargs, msg", [
    ({"partitions": 0}, "partitions must be a positive integer"),
    ({"proofs": 0}, "proofs must be"),
    ({"devices": 99}, "asked for 99"),
    ({"rows": 10}, "rows must be an integer"),
    ({"budget_gib": -1.0}, "budget_gb must be > 0"),
    ({"msm_budget_gib": 0.0}, "msm_budget_gb must be > 0"),
    ({"out_of_core_gib": 0.0, "budget_gib": 1.0}, "out_of_core_gb must be > 0"),
    ({"out_of_core_gib": 0.5}, "out_of_core_gb needs budget_gb"),
    ({"out_of_core_gib": 1.0, "budget_gib": 1.0}, "must be below budget_gb"),
])
def test_bad_arguments(kwargs, msg):
    args = dict(rows=ROWS, partitions=2, proofs=2, say=lambda m: None)
    with pytest.raises(ValueError, match=msg):
        B.run_porep_shaped(**{**args, **kwargs})


def test_mixed_bad_arguments_and_post_kinds():
    with pytest.raises(ValueError, match="post must be"):
        B.run_mixed(rows=ROWS, post="bogus", say=lambda m: None)
    with pytest.raises(ValueError, match="winning_every"):
        B.run_mixed(rows=ROWS, winning_every=0, say=lambda m: None)
    real = B._post_specs("real", "2KiB", None, ROWS)
    assert (real["winning"].kind, real["winning"].priority, real["winning"].partitions) == \
        ("winning-post", E.Priority.CRITICAL, 1)
    assert (real["window"].kind, real["window"].priority) == ("window-post", E.Priority.HIGH)
    assert real["winning"].sector_size == 2048
    stand = B._post_specs("standin", "2KiB", None, ROWS)
    assert stand["winning"].priority == E.Priority.CRITICAL and stand["winning"].partitions == 1
    assert stand["winning"].topology == B.porep_shaped_spec(ROWS).topology      # shared keys


# ---------------------------------------------------------------- the cases, stand-in prover
class StandInProver:
    """Sleeps ``delay`` s per batch instead of proving; public inputs read
    from the engine's real witnesses; records the MSM budget it is given."""

    def __init__(self, delay: float):
        self.delay, self.msm_budgets = delay, set()

    def load(self, spec, device):
        return E.Resident(None, None, spec.record().num_inputs, 1024)

    def check(self, res, w):
        return [None] * w.shape[1]

    def prove(self, res, w, use, msm_budget, on_stage=None):
        self.msm_budgets.add(msm_budget)
        time.sleep(self.delay)
        pub = Fr.to_int(np.asarray(w[:, :, 1:res.matrices]))
        return [None] * len(use), [[int(v) for v in row] for row in pub], \
            {"msm": self.delay, "total": self.delay}

    def verify(self, res, public, proof):
        return [True] * len(public)

    def encode(self, proof):
        return [bytes(192)] * len(proof)


FIELDS = ("case", "rows", "partitions", "devices", "budget_bytes", "setup_s", "latency_s",
          "throughput_proofs_per_s", "stages_median_s", "peak_bytes", "peak_bytes_sampled",
          "resident_bytes", "device", "jax", "commit", "command", "verify", "est_key_bytes")


def test_porep_shaped_case_with_stand_in_prover(tmp_path):
    out = tmp_path / "r.jsonl"
    delay = 0.2
    for budget, msm, ooc in ((None, None, None), (0.01, None, None), (None, 0.009, None),
                             (0.01, None, 0.004)):
        prover = StandInProver(delay)
        run = B.run_porep_shaped(rows=ROWS, partitions=2, proofs=3, budget_gib=budget,
                                 msm_budget_gib=msm, out=str(out), say=lambda m: None,
                                 prover=prover, command="test", out_of_core_gib=ooc)
        rec = run.record
        assert all(rec.get(f) is not None or f in ("budget_bytes", "peak_bytes")
                   for f in FIELDS), [f for f in FIELDS if f not in rec]
        assert rec["phase"] == "done" and rec["public_match"] and rec["jobs_done"] == 5
        assert all(r.status == "done" and len(r.proof) == 2 * 192 and len(r.public) == 2
                   for v in run.jobs.values() for r in v)
        assert len(run.jobs["throughput"]) == 3
        # one worker proves the 2 partitions of each job one after the other
        assert rec["s_per_proof"] >= 2 * delay and rec["latency_s"] >= 2 * delay
        assert rec["stages_median_s"]["prove"] == pytest.approx(2 * delay)
        assert rec["prove_per_partition_median_s"] == pytest.approx(delay)
        assert rec["throughput_total_proofs_per_s"] <= 1 / (2 * delay)
        assert rec["s_per_proof"] == pytest.approx(1 / rec["throughput_proofs_per_s"])
        assert rec["devices"] == 1 and rec["partitions"] == 2 and rec["rows"] == ROWS
        if budget is None:
            assert not rec["keys_in_host_memory"] and rec["budget_bytes"] is None
            assert prover.msm_budgets == {None if msm is None else int(msm * B.GIB)}
        else:
            assert rec["budget_bytes"] == int(0.01 * B.GIB) and rec["keys_in_host_memory"]
            assert prover.msm_budgets == {rec["msm_budget_bytes"]}
            assert B.MIN_MSM_BUDGET <= rec["msm_budget_bytes"] < rec["budget_bytes"]
        assert rec["out_of_core_bytes"] == (None if ooc is None else int(ooc * B.GIB))
        assert rec["host_witness"] is (ooc is not None)          # the default: on out of core
    phases = [json.loads(x)["phase"] for x in out.read_text().splitlines()]
    assert phases == ["setup", "latency", "done"] * 4
    # without a stand-in, the 16 GB mode's budget reaches the real prover
    eng = B._engine(E.Registry([B.porep_shaped_spec(ROWS)]), jax.devices()[:1], 1 << 30,
                    1 << 28, True, None, None, B._Finished(), None, 1 << 29)
    assert eng.prover.out_of_core_budget == 1 << 29 and eng.prover.keys_in_host_memory
    assert eng.prover.host_witness is None                      # the default: on
    eng = B._engine(E.Registry([B.porep_shaped_spec(ROWS)]), jax.devices()[:1], 1 << 30,
                    1 << 28, True, None, None, B._Finished(), None, 1 << 29, host_witness=False)
    assert eng.prover.host_witness is False and eng.prover.pinned_key is False
    eng = B._engine(E.Registry([]), jax.devices()[:1], 1 << 30, 1 << 28, True, None, None,
                    B._Finished(), None, 1 << 29, pinned_key=True)
    assert eng.prover.pinned_key is True
    with pytest.raises(ValueError, match="host_witness is a form of the 16 GB mode"):
        B._engine(E.Registry([B.porep_shaped_spec(ROWS)]), jax.devices()[:1], 1 << 30,
                  1 << 28, True, None, None, B._Finished(), None, None, host_witness=True)


def test_kind_case_with_stand_in_prover(tmp_path):
    """--case kind: a registered Filecoin kind's latency and throughput, every
    job the same synthetic sector through the engine's real path (JSON
    parse, witness: the stand-in prover reads the public inputs from it);
    the recorded circuit stored in and then loaded from --circuit-dir; an
    unknown kind refused by name."""
    from jaxprove import pce
    out, cdir = tmp_path / "k.jsonl", tmp_path / "circuits"
    for _ in range(2):
        run = B.run_kind("winning-post", "2KiB", proofs=2, out=str(out), say=lambda m: None,
                         prover=StandInProver(0.05), command="test", circuit_dir=str(cdir))
        rec = run.record
        assert rec["case"] == "engine.winning-post" and rec["phase"] == "done"
        assert rec["public_match"] and rec["jobs_done"] == 4 and rec["partitions"] == 1
        assert rec["kind"] == "winning-post" and rec["size"] == "2KiB"
        assert rec["synthetic_s"] >= 0 and rec["throughput_proofs_per_s"] > 0
        inputs = list(run.inputs.values())
        assert all(x is inputs[0] for x in inputs)              # one sector, every job
    from bench import filecoin as BF
    topo = BF.spec_for("winning-post", "2KiB").topology
    assert any(f.startswith(pce.cache_key(topo)) for f in os.listdir(cdir))
    with pytest.raises(ValueError, match="unknown proof kind"):
        B.run_kind("bogus", "2KiB", say=lambda m: None)


def test_mixed_case_serves_winning_post_first(tmp_path):
    delay = 0.15
    run = B.run_mixed(rows=ROWS, partitions=2, winning=4, winning_every=0.7, window_every=1.0,
                      inflight=2, post="standin", out=str(tmp_path / "m.jsonl"),
                      say=lambda m: None, prover=StandInProver(delay), command="test")
    rec = run.record
    assert rec["case"] == "engine.mixed" and rec["phase"] == "done" and rec["public_match"]
    assert rec["post_kinds"] == {"winning": f"winning-post-standin/{ROWS}",
                                 "window": f"window-post-standin/{ROWS}"}
    win = rec["winning_post"]
    assert win["n"] == 4 and len(run.jobs["winning"]) == 4 and rec["window_post"]["n"] >= 2
    assert rec["latency_s"] == win["latency_median_s"] <= win["latency_max_s"]
    assert all(r.status == "done" for v in run.jobs.values() for r in v)
    assert rec["porep_jobs_done"] >= 2 and rec["throughput_proofs_per_s"] >= 0
    queued, overtook = rec["winning_normal_queued_at_submit"], rec["winning_overtook_porep_jobs"]
    # a WinningPoSt job arriving while PoRep partitions are queued finishes before
    # the earlier PoRep jobs those partitions belong to (FIFO would finish them first)
    assert any(q > 0 for q in queued)
    assert all(o >= 1 for q, o in zip(queued, overtook) if q > 0), (queued, overtook)
    # ... and waits at most for the batch on the device and the one built ahead
    assert win["latency_max_s"] < 2 * delay + 5.0


def test_mixed_case_without_window_post_sets_up_no_window_kind(tmp_path):
    prover = StandInProver(0.05)
    run = B.run_mixed(rows=ROWS, partitions=2, winning=2, winning_every=0.3, window_every=None,
                      inflight=1, post="standin", out=str(tmp_path / "m.jsonl"),
                      say=lambda m: None, prover=prover, command="test")
    rec = run.record
    assert rec["post_kinds"] == {"winning": f"winning-post-standin/{ROWS}"}
    assert set(rec["warmup_s"]) == {"porep", "winning"} and set(rec["setup_s_by_kind"]) == {
        f"{B.KIND}/{ROWS}", f"winning-post-standin/{ROWS}"}
    assert rec["window_post"] == {"n": 0} and rec["winning_post"]["n"] == 2
    assert not run.jobs["window"]


# ---------------------------------------------------------------- real proofs (slow)
def _py_ecc_verify(vk, public, proof: bytes) -> bool:
    """The Groth16 equation e(A, B) = e(α, β)·e(IC(x), γ)·e(C, δ) by py_ecc."""
    from py_ecc import optimized_bls12_381 as ob
    from py_ecc.bls import point_compression as pc

    from ops.curve import G1, G2

    def g1(pt):
        return (ob.FQ(pt[0]), ob.FQ(pt[1]), ob.FQ.one())

    def g2(pt):
        return (ob.FQ2(list(pt[0])), ob.FQ2(list(pt[1])), ob.FQ2.one())

    aff1 = lambda x: g1(G1.to_affine_ints(x, projective=False))      # noqa: E731
    aff2 = lambda x: g2(G2.to_affine_ints(x, projective=False))      # noqa: E731
    acc = aff1(vk.ic[..., 0])
    for j, y in enumerate(public):
        acc = ob.add(acc, ob.multiply(aff1(vk.ic[..., j + 1]), y))
    A = pc.decompress_G1(int.from_bytes(proof[:48], "big"))
    Bp = pc.decompress_G2((int.from_bytes(proof[48:96], "big"),
                           int.from_bytes(proof[96:144], "big")))
    Cp = pc.decompress_G1(int.from_bytes(proof[144:], "big"))
    return ob.pairing(Bp, A) == ob.pairing(aff2(vk.beta_g2), aff1(vk.alpha_g1)) * \
        ob.pairing(aff2(vk.gamma_g2), acc) * ob.pairing(aff2(vk.delta_g2), Cp)


@pytest.mark.slow
def test_both_cases_with_real_proofs(tmp_path):
    """Real Groth16 proofs on the CPU (compiles dominate: minutes): the
    PoRep-shaped case without and within a tiny budget (streaming MSMs, keys
    in host memory), the mixed case with stand-in PoSt kinds, every job
    verified before return; one partition's proof checked by py_ecc against
    the saved verifying key and the hand-packed public inputs."""
    from jaxprove import groth16 as G
    keys = str(tmp_path / "keys")
    common = dict(rows=ROWS, partitions=2, keys_dir=keys, setup_seed=7, say=lambda m: None,
                  out=str(tmp_path / "r.jsonl"))
    shape = B.shape_for_rows(ROWS)
    runs = [B.run_porep_shaped(proofs=2, **common),
            B.run_porep_shaped(proofs=2, budget_gib=0.01, **common)]
    runs.append(B.run_mixed(winning=2, winning_every=2.0, window_every=3.0, post="standin",
                            **common))
    for run in runs:
        rec = run.record
        assert rec["verify"] and rec["public_match"] and rec["phase"] == "done"
        assert all(r.status == "done" for v in run.jobs.values() for r in v)
        assert rec["latency_s"] > 0 and rec["setup_s"] > 0
    assert runs[1].record["keys_in_host_memory"] and runs[1].record["msm_budget_bytes"]
    assert any(k.startswith("msm_") and k not in ("msm_g1", "msm_g2")
               for k in runs[1].record["stages_median_s"])            # the streaming MSMs
    _, vk = G.load_keys(keys, E.key_name(B.porep_shaped_spec(ROWS).topology))
    job = runs[1].jobs["latency"][0]
    assert job.public == [_hand_public(s, shape) for s in runs[1].inputs[job.job_id]["seeds"]]
    for k in range(2):
        assert _py_ecc_verify(vk, job.public[k], job.proof[192 * k:192 * (k + 1)])
    wrong = [(job.public[0][0] + 1) % Fr.p, job.public[0][1]]
    assert not _py_ecc_verify(vk, wrong, job.proof[:192])


@pytest.mark.slow
def test_porep_shaped_on_two_devices(tmp_path):
    """Issue 7's two-GPU step (bench/device/engine.sh `two`) rehearsed on two
    virtual CPU devices (XLA's host platform split in two, so a fresh
    process): one engine worker per device, each holding its own keys, both
    proving batches, every proof verified before return and its public
    inputs matching the seeds (~4 min on a 2-core CPU, compiles)."""
    import os
    import pathlib
    import subprocess
    import sys
    out = tmp_path / "two.jsonl"
    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=str(root))
    cmd = [sys.executable, "-m", "bench.engine", "--case", "porep_shaped", "--rows", str(ROWS),
           "--partitions", "2", "--proofs", "3", "--devices", "2", "--seed", "3",
           "--keys-dir", str(tmp_path / "keys"), "--out", str(out)]
    run = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    rec = [json.loads(x) for x in out.read_text().splitlines()][-1]
    assert rec["phase"] == "done" and rec["devices"] == 2
    assert rec["device_names"] == ["cpu:0", "cpu:1"]
    assert rec["verify"] and rec["public_match"] and rec["jobs_done"] == 5
    assert all(n > 0 for n in rec["resident_bytes"])         # keys resident on both devices
    assert len(rec["batches_per_worker"]) == 2 and min(rec["batches_per_worker"]) > 0
    assert sum(rec["batches_per_worker"]) == rec["batches"]
