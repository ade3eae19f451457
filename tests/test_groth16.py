"""Groth16 end to end on a small circuit: setup, prove (SpMV, NTTs, MSMs),
verify with our pairing, and an independent pairing check with py_ecc."""
from __future__ import annotations

import dataclasses
import random
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets.num import Num
from conftest import R, ob
from jaxprove import groth16 as G
from jaxprove import pce
from ops import msm as M
from ops.curve import G1, G2
from ops.field import Fr

K = 4        # y_k = x_k^3 + x_k for K values per instance
BATCH = 2
NB = 3       # secret bits per instance


def cubic(cs, inp):
    """y = x³ + x public for K secret x, and NB secret bits (boolean variables:
    the provers' 0/1 path)."""
    x = Num.alloc(cs, (K,), lambda: inp[0])
    y = x.square(cs).mul(cs, x).add(cs, x)
    y.inputize(cs)
    Bo.alloc_bits(cs, (NB,), lambda: inp[1])


@pytest.fixture(scope="module")
def circuit():
    rng = random.Random(3)
    xs = [[rng.randrange(R) for _ in range(K)] for _ in range(BATCH)]
    bits = np.array([[1, 0, 1], [1, 1, 0]], np.uint32)
    r1cs = C.record(cubic, name="cubic")
    assert int(np.sum(np.asarray(pce.extract(r1cs).bit_vars))) == NB
    w = C.witness(cubic, (jnp.asarray(Fr.from_int(xs)), jnp.asarray(bits)), in_axes=(1, 0))
    pk, vk = G.setup(r1cs, seed=1)
    proof, times = G.prove(pk, pce.extract(r1cs), w, seed=2)
    ys = [[(x ** 3 + x) % R for x in row] for row in xs]
    return r1cs, w, pk, vk, proof, times, ys


def _g1(A):
    pt = G1.to_affine_ints(A, projective=False)
    return None if pt is None else (ob.FQ(pt[0]), ob.FQ(pt[1]), ob.FQ.one())


def _g2(B):
    pt = G2.to_affine_ints(B, projective=False)
    return (ob.FQ2(list(pt[0])), ob.FQ2(list(pt[1])), ob.FQ2.one())


def test_public_inputs_are_the_circuit_outputs(circuit):
    r1cs, w, *_, ys = circuit
    assert r1cs.num_inputs == K + 1
    got = Fr.to_int(np.asarray(w[:, :, 1:K + 1]))
    assert [[int(v) for v in row] for row in got] == ys


def test_proofs_verify(circuit):
    _, _, _, vk, proof, times, ys = circuit
    assert np.all(np.asarray(G.verify(vk, ys, proof)))
    cpu = jax.devices("cpu")[0]                  # placed explicitly (the engine's host self-check)
    assert list(np.asarray(G.verify(vk, [ys[0], [y + 1 for y in ys[1]]], proof, cpu))) == [True, False]
    assert set(times) >= {"spmv", "ntt", "msm_g1", "msm_g2", "combine", "total"}


def test_a_key_split_on_the_device_gives_the_same_proofs(circuit):
    """The engine's resident key split once at load (``streaming_key`` over
    device arrays, B at its density: 5 + δ of 24 variables dense here)
    proves through the per-MSM path to the same proof bytes as the merged
    pass over the whole key, with the same seed."""
    r1cs, w, pk, vk, proof, _, ys = circuit
    m = pce.extract(r1cs)
    pos = G.msm_positions(m)
    split = G.streaming_key(pk, pos)
    assert isinstance(split.b_g2.dense, jax.Array)
    assert split.b_g2.dense.shape[-1] == len(pos.b.dense) + 1 < pk.b_g2.shape[-1]
    got, times = G.prove(split, m, w, seed=2, positions=pos)
    assert "msm_b_g2" in times
    assert G.proof_to_bytes(got) == G.proof_to_bytes(proof)


def test_independent_pairing_check(circuit):
    """e(A, B) = e(α, β)·e(IC(x), γ)·e(C, δ) with py_ecc's pairing (G2 first)."""
    _, _, _, vk, proof, _, ys = circuit
    ic = [G1.to_affine_ints(vk.ic[..., j], projective=False) for j in range(K + 1)]
    acc = None
    for coef, pt in zip([1] + ys[0], ic):
        if pt is not None:
            term = ob.multiply((ob.FQ(pt[0]), ob.FQ(pt[1]), ob.FQ.one()), coef)
            acc = term if acc is None else ob.add(acc, term)
    lhs = ob.pairing(_g2(proof.b[..., 0]), _g1(proof.a[..., 0]))
    rhs = (ob.pairing(_g2(vk.beta_g2), _g1(vk.alpha_g1)) * ob.pairing(_g2(vk.gamma_g2), acc)
           * ob.pairing(_g2(vk.delta_g2), _g1(proof.c[..., 0])))
    assert lhs == rhs


def test_tampering_is_rejected(circuit):
    _, _, _, vk, proof, _, ys = circuit
    bad_inputs = [[(ys[0][0] + 1) % R] + ys[0][1:], ys[1]]
    assert list(np.asarray(G.verify(vk, bad_inputs, proof))) == [False, True]
    swap = lambda x: x[..., ::-1]            # instance 0's A with instance 1's, etc.
    for field in ("a", "b", "c"):
        bad = proof._replace(**{field: swap(getattr(proof, field))})
        assert not np.any(np.asarray(G.verify(vk, ys, bad))), field


def test_blinding_gives_fresh_proofs(circuit):
    """CSPRNG blinding gives a fresh proof; and ``on_stage`` is called after
    every stage, with the time spent in it left out of total (``paused``)."""
    r1cs, w, pk, vk, proof, _, ys = circuit
    stages = []

    def on_stage(name):
        stages.append(name)
        if name == "ntt":
            time.sleep(0.3)                             # a more urgent proof runs here

    t = time.perf_counter()
    again, times = G.prove(pk, pce.extract(r1cs), w, on_stage=on_stage)
    wall = time.perf_counter() - t
    assert not np.array_equal(np.asarray(again.a), np.asarray(proof.a))
    assert np.all(np.asarray(G.verify(vk, ys, again)))
    assert stages[:2] == ["spmv", "ntt"] and stages[-1] == "combine"
    assert set(stages) <= {"spmv", "ntt", "msm_g1", "msm_g2", "combine"}
    assert times["paused"] >= 0.3 and times["total"] <= wall - 0.3 + 1e-3


def test_bad_input(circuit):
    r1cs, w, pk, vk, proof, _, ys = circuit
    with pytest.raises(ValueError, match="public inputs"):
        G.verify(vk, [y[:-1] for y in ys], proof)
    with pytest.raises(ValueError, match="witness"):
        G.prove(pk, pce.extract(r1cs), w[..., :-1])
    bad = w.at[:, 1, K + 1].set(w[:, 1, K + 2])           # instance 1: x_0 := x_1 (row 0: x_0² = s_0)
    with pytest.raises(ValueError, match=r"does not satisfy .* \[\(1, 0\)\]"):
        G.prove(pk, pce.extract(r1cs), bad)


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_proof_bytes_round_trip(circuit):
    *_, vk, proof, _, ys = circuit
    enc = G.proof_to_bytes(proof)
    assert [len(e) for e in enc] == [192, 192]
    back = G.proof_from_bytes(b"".join(enc))
    for x, y in zip(back, proof):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    with pytest.raises(ValueError, match="multiple of 192"):
        G.proof_from_bytes(enc[0][:-1])


def test_keys_round_trip_and_damage(circuit, tmp_path):
    import json
    import os
    from jaxprove import store
    _, _, pk, vk, *_ = circuit
    path = G.save_keys(pk, vk, str(tmp_path), "cubic")
    pk2, vk2 = G.load_keys(str(tmp_path), "cubic")
    for x, y in zip(pk + vk, pk2 + vk2):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert G.load_keys(str(tmp_path), "other") is None
    # streaming mode: the point vectors come back in host memory, the rest on the device,
    # from keys stored from the device and from host memory alike
    G.save_keys(G.ProvingKey(*(np.asarray(x) for x in pk)), vk, str(tmp_path), "cubic-host")
    for name in ("cubic", "cubic-host"):
        hpk, hvk = G.load_keys(str(tmp_path), name, host=True)
        for f in G.ProvingKey._fields:
            assert isinstance(getattr(hpk, f), np.ndarray) == (f in G.POINT_VECTORS), (name, f)
        assert all(isinstance(x, jax.Array) for x in hvk)
        for x, y in zip(pk + vk, hpk + hvk):
            assert np.array_equal(np.asarray(x), np.asarray(y))
    meta_path = os.path.join(path, store.META)
    meta = json.load(open(meta_path))
    meta["arrays"]["pk.h"]["checksum"] = "0" * 16
    json.dump(meta, open(meta_path, "w"))
    with pytest.raises(ValueError, match="checksum mismatch in array pk.h"):
        G.load_keys(str(tmp_path), "cubic")


def test_split_keys_round_trip(circuit, tmp_path, monkeypatch):
    """A key built split (streaming mode: ``SplitBases`` vectors) is stored as
    its parts and comes back split, in host memory or on the device, with
    each part's count a Python int (bench.filecoin --keys-dir: the 16 GB mode
    proves from keys a first, uncapped process set up)."""
    r1cs, _, pk, vk, *_ = circuit
    split = G.streaming_key(G.ProvingKey(*(np.asarray(x) for x in pk)),
                            G.msm_positions(pce.extract(r1cs)))
    assert any(isinstance(v, M.SplitBases) for v in split)
    G.save_keys(split, vk, str(tmp_path), "split")
    for host in (True, False):
        pk2, vk2 = G.load_keys(str(tmp_path), "split", host=host)
        for f in G.ProvingKey._fields:
            want, got = getattr(split, f), getattr(pk2, f)
            assert type(got) is type(want) or not isinstance(want, M.SplitBases), f
            if isinstance(want, M.SplitBases):
                assert type(got.n) is int and got.n == want.n
                for x, y in ((want.bits, got.bits), (want.dense, got.dense)):
                    assert isinstance(y, np.ndarray) == (host and f in G.POINT_VECTORS)
                    assert np.array_equal(np.asarray(x), np.asarray(y)), (host, f)
            else:
                assert np.array_equal(np.asarray(want), np.asarray(got)), (host, f)
        for x, y in zip(vk, vk2):
            assert np.array_equal(np.asarray(x), np.asarray(y))
    # a key split by other positions (before B's density: B over every variable) would pair
    # its bases with the wrong scalars: refused by name
    with monkeypatch.context() as mp:
        mp.setattr(G, "SPLIT_BY", None)
        G.save_keys(split, vk, str(tmp_path), "old-split")
    with pytest.raises(ValueError, match="split by the MSM positions of an older jaxprove"):
        G.load_keys(str(tmp_path), "old-split")


@pytest.mark.slow          # 78 s on the 2-core box; the product verifies vectorised (verify_group)
def test_verify_batch(circuit):
    *_, vk, proof, _, ys = circuit
    assert G.verify_batch(vk, ys, proof)
    bad = proof._replace(c=proof.c[..., ::-1])
    assert not G.verify_batch(vk, ys, bad)
    assert not G.verify_batch(vk, [ys[1], ys[0]], proof)


def test_h_coefficients_divide_by_the_vanishing_polynomial():
    """h from a·b − c over the domain D (a, b, c evaluations with a∘b = c):
    A(z)·B(z) − C(z) = h(z)·(z^m − 1) at a random z, all in Python integers
    (A, B, C interpolated over D by Lagrange); the inputs are consumed
    (donated to the NTT stages)."""
    from ops import ntt as N
    rng = random.Random(8)
    log_m = 3
    m = 1 << log_m
    a = [rng.randrange(R) for _ in range(m)]
    b = [rng.randrange(R) for _ in range(m)]
    c = [x * y % R for x, y in zip(a, b)]
    dev = [jnp.asarray(Fr.from_int(v)) for v in (a, b, c)]
    h = [int(v) for v in Fr.to_int(np.asarray(G._h_coefficients(*dev, N.domain(log_m))))]
    assert len(h) == m - 1 and all(x.is_deleted() for x in dev)
    omega = pow(7, (R - 1) >> log_m, R)
    pts = [pow(omega, i, R) for i in range(m)]
    z = rng.randrange(R)

    def interp(vals):
        total = 0
        for i in range(m):
            num = den = 1
            for k in range(m):
                if k != i:
                    num, den = num * (z - pts[k]) % R, den * (pts[i] - pts[k]) % R
            total += vals[i] * num * pow(den, -1, R)
        return total % R

    hz = sum(x * pow(z, i, R) for i, x in enumerate(h)) % R
    assert (interp(a) * interp(b) - interp(c)) % R == hz * (pow(z, m, R) - 1) % R


def test_qap_at_equals_lagrange_interpolation(circuit):
    """u_j(τ) = Σ_i A[i][j]·ℓ_i(τ) with ℓ_i(τ) = Π_{k≠i}(τ − ω^k)/(ω^i − ω^k)
    evaluated directly in Python integers (the device uses the barycentric
    form, a batch inversion and a transposed SpMV)."""
    r1cs = circuit[0]
    rows = r1cs.num_constraints + r1cs.num_inputs
    log_m = G.domain_log(rows)
    m = 1 << log_m
    w = pow(7, (R - 1) >> log_m, R)          # the domain's ω (7 generates Fr*, as ops.ntt)
    pts = [pow(w, i, R) for i in range(m)]
    tau = 123456789
    ell = []
    for i in range(rows):
        num = den = 1
        for k in range(m):
            if k != i:
                num = num * (tau - pts[k]) % R
                den = den * (pts[i] - pts[k]) % R
        ell.append(num * pow(den, -1, R) % R)
    got = G.qap_at(r1cs, tau, log_m)
    n_vars = r1cs.num_inputs + r1cs.num_aux
    for mat, dev in zip((r1cs.a, r1cs.b, r1cs.c), got):
        want = [0] * n_vars
        for i in range(rows):
            for k in range(mat.indptr[i], mat.indptr[i + 1]):
                want[mat.cols[k]] = (want[mat.cols[k]] + r1cs.coeffs[mat.coeff_ids[k]] * ell[i]) % R
        assert [int(x) for x in Fr.to_int(np.asarray(dev))] == want


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_streaming_prove_from_host_memory(circuit, monkeypatch):
    """Bases in host memory (numpy), split once by the MSM positions (the
    engine's streaming key: no host gathers per proof), with a device budget:
    the MSMs stream them in chunks (ops.msm budget_bytes) and the proof
    verifies.  (An unsplit host key, streamed the same way, is proved in
    ``test_out_of_core.py`` against the in-core proof.)"""
    from ops import msm as M
    r1cs, w, pk, vk, _, _, ys = circuit
    host_pk = G.ProvingKey(*(np.asarray(x) for x in pk))
    small = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4)
    budget = M.working_set_bytes(G2, 8, 2, 4, small)      # G2 chunks of 8 points, G1 larger
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    m = pce.extract(r1cs)
    split_pk = G.streaming_key(host_pk, G.msm_positions(m))
    assert isinstance(split_pk.a.dense, np.ndarray)
    assert split_pk.a.shape[-1] == host_pk.a.shape[-1] + 1        # δ is one more base
    one_by_one = host_pk
    for f in G.SPLIT_VECTORS:                  # the engine's way: one vector at a time
        one_by_one = G.streaming_key(one_by_one, G.msm_positions(m), (f,))
    for x, y in zip(jax.tree.leaves(split_pk), jax.tree.leaves(one_by_one)):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    with pytest.raises(ValueError, match="a split already"):
        G.streaming_key(split_pk, G.msm_positions(m), ("a",))
    splits, real_split = [], M.split_bases
    monkeypatch.setattr(M, "split_bases", lambda *a, **k: splits.append(a[0].shape)
                        or real_split(*a, **k))
    again, times = G.prove(split_pk, m, w, seed=5, msm_config=cfg,
                           positions=G.msm_positions(m))
    assert {"msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h"} <= set(times)
    # H's bases are not split (gathered, padded: copied whole) per proof: 12.9 GB at 2^27
    # (a dense part may still be split again by counting its 0/1 scalars: small here)
    assert host_pk.h.shape[-1] not in [sh[-1] for sh in splits], splits
    assert np.all(np.asarray(G.verify(vk, ys, again)))
    # the key pinned (hypothesis 84: every host vector a transfer.PinnedVector): the same proof
    from ops import transfer as T
    box = [split_pk]
    pinned = G.pin_key(box)
    assert box == [] and all(isinstance(getattr(pinned, f).dense, T.PinnedVector)
                             for f in G.SPLIT_VECTORS) and isinstance(pinned.h, T.PinnedVector)
    same, _ = G.prove(pinned, m, w, seed=5, msm_config=cfg, positions=G.msm_positions(m))
    for x, y in zip(jax.tree.leaves(same), jax.tree.leaves(again)):
        assert np.array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_setup_into_host_memory_gives_the_same_keys(circuit):
    """setup(host=True) (the streaming key: queries written chunk by chunk into
    numpy arrays) equals the device setup with the same toxic waste."""
    r1cs, _, pk, vk, *_ = circuit
    hpk, hvk = G.setup(r1cs, seed=1, host=True, chunk=8)
    for f in ("a", "b_g1", "b_g2", "l", "h"):
        assert isinstance(getattr(hpk, f), np.ndarray), f
    for x, y in zip(pk + vk, hpk + hvk):
        assert np.array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("host,bits", [(True, True), (False, True), (True, False)])
def test_setup_builds_the_streaming_key_split(circuit, host, bits):
    """setup(positions=) builds the key already split as streaming_key splits
    it (bit part, dense part with δ, both padded), word for word, without the
    unsplit vectors; with and without bit positions."""
    from ops import msm as M
    r1cs, _, pk, vk, *_ = circuit
    pos = G.msm_positions(pce.extract(r1cs))
    if not bits:
        none = np.zeros(0, np.int64)
        pos = G.MSMPositions(M.positions(pk.a.shape[-1], none), M.positions(pk.a.shape[-1], none),
                             M.positions(pk.l.shape[-1], none))
    assert (len(pos.a.bits) > 0) == bits
    spk, svk = G.setup(r1cs, seed=1, host=host, chunk=8, positions=pos)
    want = G.streaming_key(G.ProvingKey(*(np.asarray(x) for x in pk)), pos)
    assert jax.tree.structure(spk) == jax.tree.structure(want)
    assert isinstance(spk.b_g2.dense, np.ndarray) == host
    for x, y in zip(jax.tree.leaves((want, vk)), jax.tree.leaves((spk, svk))):
        assert np.array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_merged_msms_fall_back_to_chunks_within_a_budget(circuit):
    """Device bases with a budget below the merged passes' working set: each
    MSM runs alone in chunks (stages msm_a ... msm_h) and the proof verifies."""
    from ops import msm as M
    r1cs, w, pk, vk, _, _, ys = circuit
    small = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4)
    budget = M.working_set_bytes(G2, 8, 2, 4, small)
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    proof, times = G.prove(pk, pce.extract(r1cs), w, seed=6, msm_config=cfg)
    assert {"msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h"} <= set(times)
    assert np.all(np.asarray(G.verify(vk, ys, proof)))


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_an_msm_out_of_device_memory_runs_again_within_half_the_budget(circuit, monkeypatch):
    """The per-MSM path: an MSM whose device runs out of memory (the
    runtime's RESOURCE_EXHAUSTED) runs again within half its budget, the
    proof is the same, and with ``learned_budgets`` the next proof starts
    there; other errors, an exhausted retry count and calls without a budget
    are not retried."""
    from ops import msm as M
    r1cs, w, pk, vk, _, _, ys = circuit
    m = pce.extract(r1cs)
    small = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4)
    budget = 64 * M.working_set_bytes(G2, 8, 2, 4, small)
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    monkeypatch.setattr(G, "merged_msm_bytes", lambda *a: budget + 1)      # the per-MSM path
    want, _ = G.prove(pk, m, w, seed=6, msm_config=cfg)
    real, seen = M.msm, []

    def flaky(fail_above, message="RESOURCE_EXHAUSTED: Out of memory while trying to allocate"):
        def msm(curve, bases, scalars, config=None, on_chunk=None):   # every dense part
            if config is None or config.budget_bytes is None:          # (the verifier's)
                return real(curve, bases, scalars, config, on_chunk)
            seen.append(config.budget_bytes)
            if config.budget_bytes > fail_above:
                raise jax.errors.JaxRuntimeError(message)
            return real(curve, bases, scalars, config, on_chunk)
        return msm

    monkeypatch.setattr(M, "msm", flaky(budget // 2))
    got, times = G.prove(pk, m, w, seed=6, msm_config=cfg)
    assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(got, want))
    # each of the five MSMs failed once within the budget, then ran within half of it
    # (msm may call itself on a split part: more calls at the half budget)
    assert seen.count(budget) == 5 and set(seen) == {budget, budget // 2}
    assert np.all(np.asarray(G.verify(vk, ys, got)))
    learned = {}                # kept by the caller: the second proof has no failed tries
    for first in (True, False):
        seen.clear()
        got, _ = G.prove(pk, m, w, seed=6, msm_config=cfg, learned_budgets=learned)
        assert (budget in seen) == first and set(learned.values()) == {budget // 2}
        assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(got, want))
    for fn, match in ((flaky(budget // 8), "RESOURCE_EXHAUSTED"),     # 2 retries: budget / 4
                      (flaky(0, "INTERNAL: something else"), "INTERNAL")):
        seen.clear()
        monkeypatch.setattr(M, "msm", fn)
        with pytest.raises(jax.errors.JaxRuntimeError, match=match):
            G.prove(pk, m, w, seed=6, msm_config=cfg)
        assert seen == ([budget, budget // 2, budget // 4] if match != "INTERNAL" else [budget])


def test_on_stage_is_also_called_between_msm_chunks(circuit):
    """Streaming mode: on_stage runs between the chunks of each chunked MSM
    too (with the MSM's stage name), the proof is unchanged, and the time
    spent there is reported as paused, not in the stages."""
    from ops import msm as M
    r1cs, w, pk, vk, _, _, ys = circuit
    m = pce.extract(r1cs)
    pos = G.msm_positions(m)
    split_pk = G.streaming_key(G.ProvingKey(*(np.asarray(x) for x in pk)), pos)
    small = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4)
    # B's density leaves 5 + δ of its 24 variables dense: chunks of 4 points cut B2 in two
    assert len(pos.b.dense) + 1 > 4
    cfg = dataclasses.replace(small, budget_bytes=M.working_set_bytes(G2, 4, 2, 4, small))
    want, _ = G.prove(split_pk, m, w, seed=7, msm_config=cfg, positions=pos)
    calls = []

    def on_stage(stage):
        calls.append(stage)
        time.sleep(0.02)

    got, times = G.prove(split_pk, m, w, seed=7, msm_config=cfg, positions=pos,
                         on_stage=on_stage)
    assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(got, want))
    # H's MSM first (a device h is freed before a host w comes: groth16.prove_msms)
    stages = ["spmv", "ntt", "msm_h", "msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "combine"]
    assert [c for i, c in enumerate(calls) if c != calls[i - 1] or i == 0] == stages
    assert len(calls) > len(stages) and calls.count("msm_b_g2") > 1   # chunk points (G2's)
    assert times["paused"] >= 0.02 * len(calls)
    assert sum(times[s] for s in stages) <= times["total"] + 1e-6


@pytest.mark.parametrize("curve,host", [(G1, False), (G1, True), (G2, False)])
def test_points_at_nonzero_equal_the_whole_multiplication(curve, host):
    """The setup's B points are made only where v ≠ 0: the same array as
    the multiplication of every scalar (zero scalars give the identity,
    (0, 0)), from a multiplication of the nonzero scalars alone; all zero
    and none zero alike."""
    import functools
    rng = random.Random(5)
    vals = [0 if rng.random() < 0.7 else rng.randrange(1, R) for _ in range(24)]
    seen = []

    def points(c, s, **kw):
        seen.append(s.shape[-1])
        return G.fixed_base_points(c, s, **kw)

    bound = functools.partial(points, chunk=8, host=host)
    for v in (vals, [0] * 5, [rng.randrange(1, R) for _ in range(5)]):
        s = jnp.asarray(Fr.from_int(v))
        seen.clear()
        got = G.points_at_nonzero(bound, curve, s, host)
        want = G.fixed_base_points(curve, s, chunk=8)
        assert isinstance(got, np.ndarray) == host
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert sum(seen) == sum(1 for x in v if x)          # only the nonzero scalars


def test_pin_key_stops_where_pinned_memory_runs_out(monkeypatch):
    """``pin_key`` pins each host vector of the key (split parts one by one);
    where pinned memory runs out it keeps the rest in pageable memory (the
    MSMs take either); another error propagates."""
    from ops import msm as M
    from ops import transfer as T
    z = lambda *shape: np.zeros(shape, np.uint32)                   # noqa: E731
    split = lambda: M.SplitBases(z(2, 12, 4), z(2, 12, 8), 12)      # noqa: E731
    pk = G.ProvingKey(z(2, 12), z(2, 12), z(2, 2, 12), z(2, 12), z(2, 2, 12), split(),
                      split(), M.SplitBases(z(2, 2, 12, 4), z(2, 2, 12, 8), 12), split(),
                      z(2, 12, 15))
    calls, real = [], T.pin_vector

    def pin(x, dev, failing=None):
        calls.append(x.shape)
        if failing is not None and len(calls) == failing:
            raise failure[0]
        return real(x, dev)

    failure = [None]
    monkeypatch.setattr(T, "pin_vector", pin)
    got = G.pin_key([pk])
    assert len(calls) == 9 and isinstance(got.h, T.PinnedVector)
    assert all(isinstance(getattr(got, f).bits, T.PinnedVector) for f in G.SPLIT_VECTORS)
    calls.clear()
    failure[0] = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating")
    monkeypatch.setattr(T, "pin_vector", lambda x, dev: pin(x, dev, failing=4))
    got = G.pin_key([pk])              # A's bits and dense, B1's bits pinned, then none
    assert isinstance(got.a.dense, T.PinnedVector) and isinstance(got.b_g1.bits, T.PinnedVector)
    assert isinstance(got.b_g1.dense, np.ndarray) and isinstance(got.h, np.ndarray)
    calls.clear()
    failure[0] = jax.errors.JaxRuntimeError("INTERNAL: something else")
    with pytest.raises(jax.errors.JaxRuntimeError, match="something else"):
        G.pin_key([pk])


def test_pin_key_pins_what_fits_in_its_room(caplog):
    """``pin_key(room=)`` (hypothesis 92): the vectors pinned in turn while
    their bytes fit in the room; the first that does not and every later
    one stay numpy (logged); ``pinned_bytes`` counts what was pinned."""
    from ops import msm as M
    from ops import transfer as T
    z = lambda *shape: np.zeros(shape, np.uint32)                   # noqa: E731
    split = lambda: M.SplitBases(z(2, 12, 4), z(2, 12, 8), 12)      # noqa: E731
    pk = G.ProvingKey(z(2, 12), z(2, 12), z(2, 2, 12), z(2, 12), z(2, 2, 12), split(),
                      split(), M.SplitBases(z(2, 2, 12, 4), z(2, 2, 12, 8), 12), split(),
                      z(2, 12, 15))
    part = [pk.a.bits.nbytes, pk.a.dense.nbytes, pk.b_g1.bits.nbytes, pk.b_g1.dense.nbytes]
    assert G.pinned_bytes(pk) == 0
    everything = G.pin_key([pk], room=None)
    whole = G.pinned_bytes(everything)
    assert whole == sum(x.nbytes for f in G.POINT_VECTORS
                        for x in jax.tree.leaves(getattr(pk, f)) if isinstance(x, np.ndarray))
    assert G.pinned_bytes(G.pin_key([pk], room=whole)) == whole
    room = sum(part) - 1                         # A's parts and B1's bits, not B1's dense
    with caplog.at_level("WARNING"):
        got = G.pin_key([pk], room=room)
    assert isinstance(got.a.dense, T.PinnedVector) and isinstance(got.b_g1.bits, T.PinnedVector)
    assert isinstance(got.b_g1.dense, np.ndarray) and isinstance(got.h, np.ndarray)
    assert G.pinned_bytes(got) == sum(part[:3]) and "no room" in caplog.text
    got = G.pin_key([pk], room=0)
    assert G.pinned_bytes(got) == 0 and isinstance(got.a.bits, np.ndarray)


def test_proof_pinned_bytes_counts_vectors_and_witness(circuit):
    """``proof_pinned_bytes``: the proof's host vectors of the path (four, or
    two for the device h) of the domain's length, and with the host witness
    32 bytes a variable; not the row blocks (pinned before the key, counted
    as pinned); 0 without matrices (streaming).  ``pinned_plan_bytes`` adds
    the key's and the blocks' bytes."""
    m = pce.extract(circuit[0])
    n = 1 << G.domain_log(m.rows)
    assert G.proof_pinned_bytes(None, True) == 0
    assert G.proof_pinned_bytes(m) == 4 * 32 * n
    assert G.proof_pinned_bytes(m, host_witness=True) == 2 * 32 * n + 32 * m.num_vars
    assert G.proof_pinned_bytes(m, True, witnesses=2) == 2 * 32 * n + 64 * m.num_vars
    assert G.pinned_plan_bytes(5, m.rows, m.num_vars, 7, True, 2) == \
        5 + 7 + G.proof_pinned_bytes(m, True, 2)
    assert G.pinned_plan_bytes(5, m.rows, m.num_vars, None, True, 2) == 5
