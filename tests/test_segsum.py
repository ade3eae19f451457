"""ops.segsum (the fused bucket-accumulation kernel) in Pallas interpret mode.

The exact GPU kernel runs on the CPU (``KernelConfig(interpret=True)``) and
must give what the XLA loop (``ops.msm._accumulate``, itself checked against
py_ecc in test_msm) gives for the same level — buckets, partial-sum keys and
values — on sorted keys with heavy runs crossing lanes, sentinels, negative
digits and repeated points; and a whole MSM through it must equal py_ecc.
"""
from __future__ import annotations

import dataclasses
import random

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import R
from ops import msm as M
from ops import segsum
from ops.curve import G1
from ops.elementwise import KernelConfig
from test_msm import _expected, _g1, _run

G1I = dataclasses.replace(G1, config=KernelConfig(interpret=True, bn=4))
N_PTS = 12


@pytest.fixture(scope="module")
def points():
    ks = list(range(3, 3 + N_PTS))
    return G1.from_affine_ints([_g1(k) for k in ks])


def _keys(rng, n, nb):
    """Sorted keys with long runs (a heavy bucket across lanes) and sentinels."""
    heavy, skipped = n // 6, n // 3 - n // 6
    keys = np.sort(np.concatenate([rng.integers(0, nb, n - heavy - skipped), np.full(heavy, 2),
                                   np.full(skipped, nb + 1)]))
    return jnp.asarray(np.minimum(keys, nb).astype(np.int32))


def _xla_level(curve, keys, n_valid, pm, payload, lanes, min_steps, nb):
    """The reference: ``ops.msm._accumulate`` (the XLA loop) on the same level."""
    n = keys.shape[0]

    def fetch(e, ok):
        p = payload[jnp.clip(e, 0, n - 1)]
        i = (p & jnp.uint32(0x7FFFFFFF)).astype(jnp.int32)
        q = jnp.where(ok[:, None], jnp.take(pm, i, axis=0), jnp.uint32(0))
        return (q.T.reshape(curve.aff + (i.shape[0],)),
                jnp.where(ok, p >> jnp.uint32(31), jnp.uint32(0)))

    return M._accumulate(curve, keys, n_valid, fetch, M._step_fn(curve, True), lanes, min_steps,
                         curve.identity((nb,)))


def _aff(x):
    return G1.to_affine_ints(x)


def _from_pm(pm, count):
    return pm.T.reshape(G1.proj + (count,))


@pytest.mark.parametrize("lanes,min_steps,xyzz,prefetch", [
    (8, 1, False, False), (4, 4, False, False), (8, 1, True, False), (4, 4, True, False),
    (8, 1, False, True), (4, 4, True, True)])
def test_affine_level_equals_xla_loop(points, lanes, min_steps, xyzz, prefetch):
    """The fused level against the XLA loop; ``xyzz``: accumulated in XYZZ
    coordinates, whose incomplete addition meets the cases it must route:
    12 points over 44 entries repeat a point inside a bucket (A = Q: the
    doubling branch) and with both signs (A = −Q: the identity);
    ``prefetch``: the software-pipelined walk (each step's entry loaded by
    the step before)."""
    rng = np.random.default_rng(lanes)
    n, nb = 44, 9
    keys = _keys(rng, n, nb)
    payload = jnp.asarray(rng.integers(0, N_PTS, n).astype(np.uint32)
                          | (rng.integers(0, 2, n).astype(np.uint32) << 31))
    pm = M.point_major(G1, points)
    n_valid = jnp.sum(keys < nb).astype(jnp.int32)
    b0, k0, v0 = _xla_level(G1, keys, n_valid, pm, payload, lanes, min_steps, nb)
    b1, k1, v1 = segsum.level(G1I, keys, n_valid, pm, payload, lanes, min_steps,
                              segsum.identity_pm(G1, nb), xyzz=xyzz, prefetch=prefetch)
    assert _aff(_from_pm(b1, nb)) == _aff(b0)
    np.testing.assert_array_equal(np.asarray(k1), np.asarray(k0))
    valid = np.asarray(k0) < nb
    got, want = _aff(_from_pm(v1, 2 * lanes)), _aff(v0)
    assert [g for g, ok in zip(got, valid) if ok] == [w for w, ok in zip(want, valid) if ok]
    assert any(x is not None for x in _aff(b0)) and valid.any()       # the case is not empty


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_projective_reduction_equals_xla_loop(points):
    rng = np.random.default_rng(5)
    n, nb = 40, 6
    keys = _keys(rng, n, nb)
    vals = G1.from_affine(points[..., rng.integers(0, N_PTS, n)])
    cfg = M.MSMConfig(lanes=8, small_lanes=4, min_steps=3)
    want = M._reduce_parts_loop(G1, keys, vals, G1.identity((nb,)), cfg)
    got = segsum.reduce_parts(G1I, keys, vals.reshape(-1, n).T, segsum.identity_pm(G1, nb),
                              cfg.small_lanes, cfg.min_steps)
    assert _aff(_from_pm(got, nb)) == _aff(want)


def test_reduce_parts_resets_the_lane_rows(points):
    """Levels of ``reduce_parts`` share one target: a slot a level does not
    write must not keep the partial sum an earlier level left there.  These
    keys (4 lanes, 3 steps) make level 2 skip lane 0's tail slot, which
    level 1 filled with a partial sum of bucket 1, while a later slot of
    level 2 is valid (bucket 3): kept, that stale sum lands in bucket 3."""
    keys = jnp.asarray(np.array([0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4], np.int32))
    nb, n = 6, 12
    vals = G1.from_affine(points[..., np.arange(n) % N_PTS])
    cfg = M.MSMConfig(lanes=8, small_lanes=4, min_steps=3)
    want = M._reduce_parts_loop(G1, keys, vals, G1.identity((nb,)), cfg)
    got = segsum.reduce_parts(G1I, keys, vals.reshape(-1, n).T, segsum.identity_pm(G1, nb),
                              cfg.small_lanes, cfg.min_steps)
    assert _aff(_from_pm(got, nb)) == _aff(want)


def test_min_steps_below_three_is_refused():
    with pytest.raises(ValueError, match="min_steps must be at least 3"):
        M.MSMConfig(min_steps=2)


@pytest.mark.slow   # ~100 s ("same") and ~140 s ("bits"); CI time (session 21: see bench/NOTES.md)
@pytest.mark.parametrize("kind", ["same", "bits", "xyzz-repeated", "xyzz-prefetch-repeated",
                                  "running"])
def test_msm_through_fused_kernels_matches_py_ecc(kind):
    """"xyzz-repeated": XYZZ buckets over bases that repeat (a proving
    key's can: variables with equal QAP columns) with equal scalars, so
    buckets meet their own base again; "-prefetch-": the pipelined walk;
    "running": the bucket reduction's running sums as one kernel."""
    rng = random.Random(11)
    ks = [rng.randrange(1, R) for _ in range(8)]
    ks[3] = 0                                   # the identity as a base
    if kind.endswith("repeated"):
        ks[1], ks[6] = ks[0], ks[5]             # consecutive entries of one bucket: A = Q
    bases = G1.from_affine_ints([_g1(k) for k in ks])
    sc = [0xDEADBEEF] * 8 if kind != "bits" else [rng.randrange(2) for _ in range(8)]
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, split_threshold=None,
                      xyzz=kind.startswith("xyzz"), prefetch="prefetch" in kind,
                      fused_running=kind == "running")
    assert _run(bases, sc, curve=G1I, cfg=cfg) == _expected(ks, sc)


@pytest.mark.slow          # ~170 s on the 2-core box; every GPU MSM benchmark checks its result
def test_split_curve_steps_equal_xla_loop():
    """G2 (split formulas): the two-kernels-per-step walk equals the XLA loop;
    one base is the identity (the tail's select keeps the accumulator there)."""
    from ops.curve import G2
    from test_msm import _g2
    G2I = dataclasses.replace(G2, config=dataclasses.replace(G2.config, interpret=True, bn=4))
    pts = G2.from_affine_ints([_g2(k) for k in range(3, 8)] + [None])
    rng = np.random.default_rng(2)
    n, nb, lanes = 16, 5, 4
    keys = _keys(rng, n, nb)
    payload = jnp.asarray(rng.integers(0, 6, n).astype(np.uint32)
                          | (rng.integers(0, 2, n).astype(np.uint32) << 31))
    pm = M.point_major(G2, pts)
    n_valid = jnp.sum(keys < nb).astype(jnp.int32)
    b0, k0, v0 = _xla_level(G2, keys, n_valid, pm, payload, lanes, 3, nb)
    b1, k1, v1 = segsum.level(G2I, keys, n_valid, pm, payload, lanes, 3, segsum.identity_pm(G2, nb))
    aff = G2.to_affine_ints
    assert aff(b1.T.reshape(G2.proj + (nb,))) == aff(b0)
    np.testing.assert_array_equal(np.asarray(k1), np.asarray(k0))
    valid = np.asarray(k0) < nb
    got, want = aff(v1.T.reshape(G2.proj + (2 * lanes,))), aff(v0)
    assert [g for g, ok in zip(got, valid) if ok] == [w for w, ok in zip(want, valid) if ok]
    assert any(x is not None for x in aff(b0))
    # the projective steps: reduce those partial sums into the buckets
    cfg = M.MSMConfig(lanes=4, small_lanes=2, min_steps=3)
    want = M._reduce_parts_loop(G2, k0, v0, b0, cfg)
    got = segsum.reduce_parts(G2I, k0, v0.reshape(-1, 2 * lanes).T, b0.reshape(-1, nb).T,
                              cfg.small_lanes, cfg.min_steps)
    assert aff(got.T.reshape(G2.proj + (nb,))) == aff(want)


def test_prefetching_walk_lowers_for_cuda():
    """The pipelined walk (``prefetch``) lowers to Triton on a CPU-only host,
    with or without XYZZ: one more copy of the entry's loads (the prologue's)
    than the plain walk, no other kernel."""
    from bench import kernel_size as K
    ks = K.kernels()
    sizes = {name: K.triton_op_counts(*ks[name][:1], *ks[name][1])
             for name in ("G1.segsum_A", "G1.segsum_A_prefetch", "G1.segsum_X",
                          "G1.segsum_X_prefetch")}
    for plain in ("G1.segsum_A", "G1.segsum_X"):
        got, base = sizes[plain + "_prefetch"], sizes[plain]
        assert len(got) == len(base) and got[1:] == base[1:]
        assert base[0] < got[0] < 2 * base[0]


def test_xyzz_level_lowers_for_cuda_with_a_real_branch():
    """The XYZZ walk lowers to Triton on a CPU-only host, its doubling as a
    branch (``scf.if``: computed only when a lane of the block needs it),
    beside the conversion kernel to projective."""
    import contextlib
    import io

    import jax
    G1D = dataclasses.replace(G1, config=KernelConfig(debug=True))
    n = 1 << 12
    i32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.int32)
    u32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.uint32)

    def f(keys, nv, src, pay, buckets):
        return segsum.level(G1D, keys, nv, src, pay, 1 << 8, 1, buckets, xyzz=True)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.jit(f).trace(i32(n), i32(), u32(n, 24), u32(n), u32(1 << 8, 36)).lower(
            lowering_platforms=("cuda",))
    modules = buf.getvalue().split("The Triton module")[1:]
    assert len(modules) == 2 and modules[0].count("scf.if") == 1
    with pytest.raises(ValueError, match="XYZZ accumulation is for affine bases"):
        segsum.level(G1D, jnp.zeros(4, jnp.int32), 0, jnp.zeros((4, 36), jnp.uint32), None, 4, 3,
                     segsum.identity_pm(G1, 2), xyzz=True)


def test_running_sums_kernel_equals_the_definition(points):
    """``segsum.running_sums`` (the bucket reduction's running sums as one
    kernel, interpret mode): per lane R = Σ_t X_t and S = Σ_t (t + 1)·X_t
    over its g buckets, against the sums done point by point on the CPU
    (identities among the buckets, as empty buckets are); lanes not a
    multiple of the block size take a smaller block; a split curve and a
    misshapen array are refused."""
    rng = np.random.default_rng(3)
    lanes, g = 6, 5
    idx = rng.integers(0, N_PTS + 3, lanes * g)                 # ≥ N_PTS: the identity
    pts = G1.from_affine(points[..., np.minimum(idx, N_PTS - 1)])
    pts = jnp.where(jnp.asarray(idx < N_PTS), pts, G1.identity((lanes * g,)))
    R, S = segsum.running_sums(G1I, pts.reshape(-1, lanes * g).T, lanes, g)
    want_r, want_s = [], []
    for l in range(lanes):
        r = s = G1.identity((1,))
        for t in range(g):
            x = pts[..., l * g + t: l * g + t + 1]
            r = G1.add(r, x)
            for _ in range(t + 1):
                s = G1.add(s, x)
        want_r.append(r)
        want_s.append(s)
    assert _aff(R) == _aff(jnp.concatenate(want_r, -1))
    assert _aff(S) == _aff(jnp.concatenate(want_s, -1))
    with pytest.raises(ValueError, match="expected"):
        segsum.running_sums(G1I, pts.reshape(-1, lanes * g).T, lanes, g + 1)
    from ops.curve import G2
    with pytest.raises(ValueError, match="split"):
        segsum.running_sums(G2, jnp.zeros((4, 36), jnp.uint32), 2, 2)


def test_running_sums_lower_for_cuda():
    """The running-sums kernel lowers to ONE Triton kernel on a CPU-only host
    (its loop of runtime length g, two projective additions a step)."""
    from bench import kernel_size as K
    fn, shapes = K.kernels()["G1.running_sums"]
    irs = K.triton_modules(fn, *shapes)
    assert len(irs) == 1 and K._op_count(irs[0]) > 0
    assert "scf.for" in irs[0]
