"""Out-of-core four-step NTT (ops.four_step) and Groth16's h over host arrays
against ops.ntt, the O(n²) Python-int evaluation and _h_coefficients.

Compile-time discipline: every (block shape, stage) is one compile, so the
cases share a few sizes (2^4 with batch (1,), 2^6 with no batch)."""
import math
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprove import groth16 as G
from jaxprove import pce
from ops import four_step as FS
from ops import ntt as N
from ops import transfer
from ops.field import Fr

P = Fr.p
BIG = 1 << 30
MODES = {"ntt": (False, False, N.ntt), "intt": (True, False, N.intt),
         "coset_ntt": (False, True, N.coset_ntt), "coset_intt": (True, True, N.coset_intt)}


def host_vectors(k, batch, count, seed):
    rng = random.Random(seed)
    rows = int(np.prod(batch))
    vals = [np.array([Fr.random_ints(1 << k, rng) for _ in range(rows)],
                     dtype=object).reshape(batch + (1 << k,)) for _ in range(count)]
    return [Fr.from_int(v) for v in vals], vals


@pytest.fixture(scope="module")
def small():
    (x,), (xs,) = host_vectors(4, (1,), 1, 7)
    return x, [int(v) for v in xs[0]], N.domain(4)


@pytest.mark.parametrize("mode", list(MODES))
def test_matches_ops_ntt_and_naive(small, mode):
    x, xs, dom = small
    inverse, coset, ref = MODES[mode]
    got = FS.ntt_host(x, BIG, inverse=inverse, coset=coset, log_n1=2)
    assert np.array_equal(got, np.asarray(ref(jnp.asarray(x), dom)))
    w = N.root_of_unity(4)
    if inverse:
        w = pow(w, -1, P)
    g = pow(N.GENERATOR, -1 if inverse else 1, P)
    scale = pow(16, -1, P) if inverse else 1
    pre = [v * pow(g, i, P) % P for i, v in enumerate(xs)] if coset and not inverse else xs
    want = [v * scale % P for v in N.naive_ntt(pre, w)]
    if coset and inverse:
        want = [v * pow(g, i, P) % P for i, v in enumerate(want)]
    assert [int(v) for v in Fr.to_int(got)[0]] == want


@pytest.mark.parametrize("log_n1,budget", [(1, BIG), (3, BIG), (5, BIG), (3, 1)])
def test_splits_and_chunks_agree(log_n1, budget):
    (x,), _ = host_vectors(6, (), 1, 11)
    budget = budget if budget == BIG else FS.step_bytes(1, 6 - log_n1, 1, 1, 6, log_n1)
    want = np.asarray(N.ntt(jnp.asarray(x), N.domain(6)))
    assert np.array_equal(FS.ntt_host(x, budget, log_n1=log_n1), want)


def test_one_line_per_chunk_is_chosen_for_the_smallest_budget():
    need = FS.step_bytes(1, 3, 1, 1, 6, 3)
    assert FS.chunk_lines(3, 1, 1, 6, 3, need) == 1
    assert FS.chunk_lines(3, 1, 1, 6, 3, BIG) == 8
    with pytest.raises(ValueError, match="cannot hold one line"):
        FS.chunk_lines(3, 1, 1, 6, 3, need - 1)


def test_transposed_layout_and_round_trip(small):
    x, _, dom = small
    y = FS.ntt_host(x, BIG, transposed_out=True, log_n1=2)
    nat = np.asarray(N.ntt(jnp.asarray(x), dom))
    # index j = j1 + 4·j2 sits at j1·4 + j2: the (4, 4) transpose
    assert np.array_equal(y, nat.reshape(8, 1, 4, 4).swapaxes(-1, -2).reshape(8, 1, 16))
    back = FS.ntt_host(y, BIG, inverse=True, transposed_in=True, log_n1=2)
    assert np.array_equal(back, x)
    with pytest.raises(ValueError, match="transpose pass"):
        FS.ntt_host(x, BIG, transposed_in=True, transposed_out=True)


def test_wrong_twiddle_is_caught(small, monkeypatch):
    x, _, dom = small
    good = FS.tables

    def swapped(log_n):
        t = good(log_n)
        return t._replace(omega=t.omega_inv)
    monkeypatch.setattr(FS, "tables", swapped)
    got = FS.ntt_host(x, BIG, log_n1=2)
    assert not np.array_equal(got, np.asarray(N.ntt(jnp.asarray(x), dom)))


def test_too_small_budget_is_named(small):
    x, _, _ = small
    with pytest.raises(ValueError, match="cannot hold one line"):
        FS.ntt_host(x, 1000, log_n1=2)
    with pytest.raises(ValueError, match="power of two"):
        FS.ntt_host(np.zeros((8, 12), np.uint32), BIG)


def test_sixteen_gib_at_2_27_fits_the_documented_chunks():
    g = 16 << 30
    assert FS.chunk_lines(13, 3, 1, 27, 13, g) == 2048
    assert FS.chunk_lines(13, 1, 1, 27, 13, g) == 4096
    assert FS.chunk_lines(14, 1, 1, 27, 13, g) == 2048
    assert FS.step_bytes(2048, 13, 3, 1, 27, 13) <= g < FS.step_bytes(4096, 13, 3, 1, 27, 13)


@pytest.mark.parametrize("k,batch,log_n1,small_budget", [(4, (1,), 2, False), pytest.param(6, (), 3, True, marks=pytest.mark.slow)])
def test_h_coefficients_host_equals_device(k, batch, log_n1, small_budget):
    vs, _ = host_vectors(k, batch, 3, 100 + k)
    copies = [v.copy() for v in vs]
    want = np.asarray(jax.device_get(G._h_coefficients(*[jnp.array(v) for v in vs],
                                                         N.domain(k))))
    budget = FS.step_bytes(1, log_n1, 3, 1, k, log_n1) if small_budget else BIG
    got = G.h_coefficients_host(*vs, k, budget, log_n1=log_n1)
    assert got.shape == batch_shape(batch, k) and np.array_equal(got, want)
    assert all(np.array_equal(v, c) for v, c in zip(vs, copies))      # inputs untouched
    with pytest.raises(ValueError, match="cannot hold one line"):
        G.h_coefficients_host(*vs, k, 1000, log_n1=log_n1)
    got = G.h_coefficients_host(*copies, k, budget, log_n1=log_n1, overwrite=True)
    assert np.array_equal(got, want)          # a, b, c were its work buffers
    assert not all(np.array_equal(v, c) for v, c in zip(vs, copies))
    vs[0].flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        G.h_coefficients_host(*vs, k, budget, log_n1=log_n1, overwrite=True)


def test_h_coefficients_resident_equals_device():
    """Hypothesis 39's form: whole vectors on the device, four-step passes in
    place there, a budget of two vectors plus one line's program (so every
    sweep runs in several blocks); h stays on the device."""
    k, batch, log_n1 = 6, (2,), 3
    vs, _ = host_vectors(k, batch, 3, 106)
    copies = [v.copy() for v in vs]
    want = np.asarray(G._h_coefficients(*[jnp.array(v) for v in vs], N.domain(k)))
    vec = vs[0].nbytes
    budget = 2 * vec + FS.step_bytes(1, log_n1, 3, 2, k, log_n1)
    assert FS.chunk_lines(log_n1, 3, 2, k, log_n1, budget - 2 * vec) < 1 << (k - log_n1)
    got = G.h_coefficients_resident(*vs, k, budget, log_n1=log_n1)
    assert isinstance(got, jax.Array) and got.shape == batch_shape(batch, k)
    assert np.array_equal(np.asarray(got), want)
    assert all(np.array_equal(v, c) for v, c in zip(vs, copies))      # inputs untouched
    got = G.h_coefficients_resident(*copies, k, budget, log_n1=log_n1, overwrite=True)
    assert isinstance(got, np.ndarray) and np.shares_memory(got, copies[0])   # a's buffer
    assert np.array_equal(got, want)                 # a's and b's transforms in their buffers
    with transfer.copy_pool() as pool:               # a plane per task
        assert np.array_equal(G.fetch_into(np.zeros_like(want), jnp.asarray(want), pool,
                                           in_flight=3), want)
    assert np.array_equal(copies[0][..., :-1], want)
    assert not np.array_equal(vs[0], copies[0]) and not np.array_equal(vs[1], copies[1])
    assert np.array_equal(vs[2], copies[2])
    copies[1].flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        G.h_coefficients_resident(*copies, k, budget, log_n1=log_n1, overwrite=True)
    with pytest.raises(ValueError, match="cannot hold 2 vectors"):
        G.h_coefficients_resident(*vs, k, 2 * vec, log_n1=log_n1)
    with pytest.raises(ValueError, match="has shape"):
        G.h_coefficients_resident(vs[0], vs[1], vs[2][..., :32], k, budget, log_n1=log_n1)


def test_h_coefficients_resident_allocates_its_vectors_first(monkeypatch):
    """The resident form's two device vectors are allocated before its first
    program runs, as limb planes (no allocation a whole vector's size: session
    41's 16 GB mode found 4.5 GiB free for a 4 GiB vector, in two pieces), and
    reused: a's and c's whole-vector puts go into one set of planes, b's
    (then h's) into the other, so no vector-sized allocation comes after the
    sweeps' temporaries (session 39's)."""
    k, batch, log_n1 = 6, (2,), 3
    vs, _ = host_vectors(k, batch, 3, 107)
    want = np.asarray(G._h_coefficients(*[jnp.array(v) for v in vs], N.domain(k)))
    vec, puts, steps, sizes = vs[0].nbytes, [], [], []
    real_put, real_step, real_zeros = FS.put_limbs, FS.resident_step, jnp.zeros

    def put(block, pool, out=None):
        assert block.nbytes == vec
        puts.append((len(steps), out is not None and [p.unsafe_buffer_pointer() for p in out]))
        return real_put(block, pool, out=out)

    def zeros(shape, *a, **kw):
        sizes.append(math.prod(shape) * 4)
        return real_zeros(shape, *a, **kw)

    monkeypatch.setattr(FS, "put_limbs", put)
    monkeypatch.setattr(FS, "resident_step", lambda *a, **kw: steps.append(1) or real_step(*a, **kw))
    monkeypatch.setattr(G.jnp, "zeros", zeros)
    budget = 2 * vec + FS.step_bytes(1, log_n1, 3, 2, k, log_n1)
    got = G.h_coefficients_resident(*vs, k, budget, log_n1=log_n1)
    monkeypatch.setattr(G.jnp, "zeros", real_zeros)
    assert np.array_equal(np.asarray(got), want)
    assert [s for s, _ in puts][0] == 0 and len(puts) == 3 and all(p for _, p in puts)
    (_, pa), (_, pb), (_, pc) = puts                 # c goes where a was, once a is home
    assert pa == pc and not set(pa) & set(pb) and len(set(pa + pb)) == 16
    assert max(sizes) < vec and sizes.count(vec // 8) >= 16    # limb planes, no whole vector


def test_h_coefficients_resident_sweep_c_puts_contiguous_planes(monkeypatch):
    """Sweep C's column blocks of a's and b's transforms reach ``put_block``
    as contiguous planes (the transforms came back as ``_column_blocks``:
    gathered from strided host views they took 2.30 s of the 32GiB h,
    bench/NOTES.md hypothesis 81), in both forms; h is unchanged."""
    k, batch, log_n1 = 6, (2,), 3
    vs, _ = host_vectors(k, batch, 3, 109)
    want = np.asarray(G._h_coefficients(*[jnp.array(v) for v in vs], N.domain(k)))
    budget = 2 * vs[0].nbytes + FS.step_bytes(1, log_n1, 3, 2, k, log_n1)
    cols = G.resident_chunks(vs[0], k, budget, log_n1)["quotient"]
    assert cols < 1 << (k - log_n1)                      # several column blocks
    blocks, real = [], FS.put_block
    monkeypatch.setattr(FS, "put_block", lambda x, pool: blocks.append(x) or real(x, pool))
    for overwrite in (False, True):
        blocks.clear()
        got = G.h_coefficients_resident(*[v.copy() for v in vs], k, budget, log_n1=log_n1,
                                        overwrite=overwrite)
        assert np.array_equal(np.asarray(got), want)
        sweep_c = [x for x in blocks if x.shape[-2:] == (1 << log_n1, cols)]
        assert len(sweep_c) == 2 * (1 << (k - log_n1)) // cols
        assert all(p.flags.c_contiguous for x in sweep_c for p in x.reshape(-1, *x.shape[-2:]))


def _satisfied(k, batch, seed):
    """Host a, b random, c = a·b (a satisfied witness's), and their h."""
    (a, b, _), _ = host_vectors(k, batch, 3, seed)
    c = np.asarray(Fr.mul(jnp.asarray(a), jnp.asarray(b)))
    return a, b, c, np.asarray(G._h_coefficients(*[jnp.array(v) for v in (a, b, c)],
                                                 N.domain(k)))


def _unsatisfied(c):
    """c (8, 2, 64) with instance 1 failing first at 45 (and at 50), instance 0 at 61."""
    bad = c.copy()
    for i, at in ((1, 45), (1, 50), (0, 61)):
        bad[:, i, at] ^= 1
    return bad


def test_h_coefficients_resident_checks_satisfaction_first(monkeypatch):
    """``check`` gets the first i with a_i·b_i != c_i per instance (−1 where
    satisfied) before any transform, so that raising there stops the step;
    c's rows are checked in several blocks (the last overlapping)."""
    k, batch, log_n1 = 6, (2,), 3
    a, b, c, want = _satisfied(k, batch, 108)
    vec = a.nbytes
    budget = 2 * vec + FS.step_bytes(1, log_n1, 3, 2, k, log_n1)
    assert G.resident_chunks(a, k, budget, log_n1)["check"] == 3    # rows 0-2, 3-5, 5-7
    seen = []
    got = G.h_coefficients_resident(a, b, c, k, budget, log_n1=log_n1, check=seen.append)
    assert np.array_equal(np.asarray(got), want) and len(seen) == 1
    assert seen[0].shape == batch and (seen[0] == -1).all()
    bad = _unsatisfied(c)
    steps = []

    def refuse(first):
        seen.append(first)
        raise ValueError("unsatisfied")

    real = FS.resident_step
    monkeypatch.setattr(FS, "resident_step", lambda *x, **kw: steps.append(1) or real(*x, **kw))
    with pytest.raises(ValueError, match="unsatisfied"):
        G.h_coefficients_resident(a, b, bad, k, budget, log_n1=log_n1, check=refuse)
    assert seen[-1].tolist() == [61, 45] and not steps


def _device_planes(x, log_n1):
    """Host (8, *batch, m) -> its matrix view's 8 device limb planes."""
    return tuple(jnp.asarray(p) for p in FS.matrix(x, 1 << log_n1))


def test_h_coefficients_device_equals_device():
    """Hypothesis 83's form: a and b already on the device as limb planes, c
    put whole into a third vector, every sweep on the device in several
    blocks (a budget of three vectors and one line's program), a's and b's
    planes consumed; the check over the three vectors, before any
    transform, finds each instance's first bad element."""
    k, batch, log_n1 = 6, (2,), 3
    a, b, c, want = _satisfied(k, batch, 110)
    vec = a.nbytes
    budget = 3 * vec + FS.step_bytes(1, log_n1, 3, 2, k, log_n1)
    chunks = G.resident_chunks(a, k, budget, log_n1, held=3)
    assert chunks["quotient"] < 1 << (k - log_n1) and chunks["check"] < 1 << log_n1
    seen = []
    ua, ub = _device_planes(a, log_n1), _device_planes(b, log_n1)
    got = G.h_coefficients_device(ua, ub, c, k, budget, log_n1=log_n1, check=seen.append)
    assert isinstance(got, jax.Array) and got.shape == batch_shape(batch, k)
    assert np.array_equal(np.asarray(got), want)
    assert len(seen) == 1 and (seen[0] == -1).all() and seen[0].shape == batch
    assert all(p.is_deleted() for p in ua + ub)          # donated to the sweeps
    # hypothesis 94: c as pce.HeldRows (its row blocks' results as fetched, rows past
    # each block's live ones garbage, blocks in any order): the same h
    rng = np.random.default_rng(5)
    R, cuts = 25, [(20, 45), (0, 20), (45, 1 << k)]
    flat = c.reshape(8, -1, 1 << k)
    blocks = []
    for r0, r1 in cuts:
        y = rng.integers(0, 2**32, (8, flat.shape[1], R), dtype=np.uint32)
        y[..., :r1 - r0] = flat[..., r0:r1]
        blocks.append((r0, r1, jnp.asarray(y)))
    held = pce.HeldRows(tuple(blocks), c.shape)
    assert held.nbytes == c.nbytes and held.ndim == c.ndim and held.dtype == c.dtype
    again = G.h_coefficients_device(_device_planes(a, log_n1), _device_planes(b, log_n1), held,
                                    k, budget, log_n1=log_n1)
    assert np.array_equal(np.asarray(again), want)
    bad = _unsatisfied(c)

    def refuse(first):
        seen.append(first)
        raise ValueError("unsatisfied")
    with pytest.raises(ValueError, match="unsatisfied"):
        G.h_coefficients_device(_device_planes(a, log_n1), _device_planes(b, log_n1), bad, k,
                                budget, log_n1=log_n1, check=refuse)
    assert seen[-1].tolist() == [61, 45]
    with pytest.raises(ValueError, match="cannot hold 3 vectors"):
        G.h_coefficients_device(_device_planes(a, log_n1), _device_planes(b, log_n1), c, k,
                                3 * vec, log_n1=log_n1)
    with pytest.raises(ValueError, match="limb planes"):
        G.h_coefficients_device(_device_planes(a, 2), _device_planes(b, log_n1), c, k,
                                budget, log_n1=log_n1)


def test_put_limbs_writes_given_planes():
    """``put_limbs``: a block's 8 limb planes, each its own device array,
    written into given planes (their buffers reused) and refused when the
    count differs."""
    x = np.arange(8 * 2 * 4 * 6, dtype=np.uint32).reshape(8, 2, 4, 6)
    with transfer.copy_pool() as pool:
        got = FS.put_limbs(x, pool)
        assert len(got) == 8 and all(np.array_equal(np.asarray(g), x[i]) for i, g in enumerate(got))
        out = tuple(jnp.zeros((2, 4, 6), jnp.uint32) for _ in range(8))
        ptrs = [o.unsafe_buffer_pointer() for o in out]
        y = FS.put_limbs(x + 1, pool, out=out)
        assert [p.unsafe_buffer_pointer() for p in y] == ptrs
        assert all(np.array_equal(np.asarray(g), x[i] + 1) for i, g in enumerate(y))
        with pytest.raises(ValueError, match="7 planes"):
            FS.put_limbs(x, pool, out=y[:7])


def batch_shape(batch, k):
    return (8,) + batch + ((1 << k) - 1,)
