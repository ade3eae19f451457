"""ops.transfer: device -> host fetches through pinned memory give the same
values as the plain fetch, and the out-of-core code that reads them (the
four-step sweeps, whose fetched blocks are read-only views) still works."""
from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ops import four_step as FS
from ops import ntt as N
from ops import transfer as T
from ops.field import Fr

HAS_PINNED = T.pinned_sharding(jnp.zeros(1), pinned=True) is not None


def test_plain_fetch_on_the_cpu_and_of_numpy():
    x = jnp.arange(12, dtype=jnp.uint32).reshape(3, 4)
    assert T.pinned_sharding(x) is None or jax.devices()[0].platform == "gpu"
    assert T.pinned_sharding(x, pinned=False) is None
    assert T.pinned_sharding(np.ones(3), pinned=True) is None        # not a device array
    assert np.array_equal(T.fetch(x, pinned=False), np.arange(12).reshape(3, 4))
    y = np.arange(5)
    assert T.fetch(y) is y


@pytest.mark.parametrize("threads", [4, 0])
@pytest.mark.parametrize("in_flight", [1, 3])
def test_put_planes_holds_the_vector_once(monkeypatch, in_flight, threads):
    """``put_planes`` writes each piece into its result as it arrives: while
    it runs, the device holds the result plus at most ``in_flight`` pieces
    (+ the one being written), never the planes beside a stack of them."""
    from concurrent.futures import ThreadPoolExecutor
    x = np.random.default_rng(2).integers(0, 2**32, (8, 2, 1000), dtype=np.uint32)
    piece = 1000                                       # bytes: 250 elements, 4 per plane
    base = sum(a.nbytes for a in jax.live_arrays())
    peak, seen, set_piece = [0], [], T._set_piece

    def watched(out, at, p):
        peak[0] = max(peak[0], sum(a.nbytes for a in jax.live_arrays()) - base)
        seen.append(p.nbytes)
        return set_piece(out, at, p)

    monkeypatch.setattr(T, "_set_piece", watched)
    with ThreadPoolExecutor(max(threads, 1)) as pool:
        got = T.put_planes(x, pool if threads else None, in_flight=in_flight, piece_bytes=piece)
    assert np.array_equal(np.asarray(got), x)
    assert seen == [piece] * 64
    assert x.nbytes < peak[0] <= x.nbytes + (in_flight + 1) * piece, (peak[0], x.nbytes)
    with pytest.raises(ValueError, match="in_flight"):
        T.put_planes(x, None, in_flight=0)


def test_put_planes_into_a_given_buffer():
    """``put_planes(out=)`` writes x into out's own buffer (donated), whatever
    out held; an out of another shape or dtype is refused by name."""
    x = np.random.default_rng(3).integers(0, 2**32, (8, 2, 300), dtype=np.uint32)
    out = jnp.full(x.shape, 7, x.dtype)
    at = out.unsafe_buffer_pointer()
    got = T.put_planes(x, None, piece_bytes=400, out=out)
    assert np.array_equal(np.asarray(got), x)
    assert got.unsafe_buffer_pointer() == at and out.is_deleted()
    for bad in (jnp.zeros((8, 2, 299), x.dtype), jnp.zeros(x.shape, jnp.int32)):
        with pytest.raises(ValueError, match="out is"):
            T.put_planes(x, None, out=bad)


def test_put_planes_of_int64_puts_them_as_device_put_does():
    """Host int64 (index arrays) go up as ``jax.device_put`` puts them (int32
    without x64), with no "int64 not available" warning (the 32GiB 16 GB
    mode's MSMs printed one per proof, bench/NOTES.md session 41)."""
    import warnings
    x = np.arange(8 * 300, dtype=np.int64).reshape(8, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = T.put_planes(x, None, piece_bytes=400)
    assert got.dtype == jax.device_put(x).dtype and np.array_equal(np.asarray(got), x)


@pytest.mark.skipif(not HAS_PINNED, reason="no pinned_host memory kind on this device")
def test_pinned_fetch_equals_the_plain_one():
    x = jnp.asarray(np.random.default_rng(0).integers(0, 2**32, (8, 3, 100), dtype=np.uint32))
    y = T.start_fetch(x, pinned=True)
    assert y.sharding.memory_kind == T.PINNED and y is not x
    assert np.array_equal(np.asarray(y), np.asarray(x))
    assert T.pinned_sharding(y, pinned=True) is None             # already there: no second copy
    assert np.array_equal(T.fetch(x[:, 1], pinned=True), np.asarray(x)[:, 1])


@pytest.mark.skipif(not HAS_PINNED, reason="no pinned_host memory kind on this device")
def test_fetch_held_keeps_the_pinned_copy_for_one_dma_back():
    """``fetch_held`` (hypothesis 91): where the copy is pinned, a ``PinnedView``
    whose values are x's and whose ``held`` copy ``put_held`` puts back on
    the device (default memory, equal); its slices, reshapes and ufunc
    results hold no copy; without pinned memory, or of numpy, plain numpy."""
    x = jnp.arange(24, dtype=jnp.uint32).reshape(2, 3, 4)
    v = T.fetch_held(x, pinned=True)
    assert isinstance(v, T.PinnedView) and np.array_equal(v, np.asarray(x))
    h = T.held(v)
    assert h is not None and h.sharding.memory_kind == T.PINNED
    back = T.put_held(h)
    assert back.sharding.memory_kind != T.PINNED and np.array_equal(np.asarray(back), np.asarray(x))
    assert T.held(v[:, 1:]) is None and T.held(v.reshape(6, 4)) is None and T.held(v + 1) is None
    for plain in (T.fetch_held(x, pinned=False), T.fetch_held(np.asarray(x))):
        assert type(plain) is np.ndarray and np.array_equal(plain, np.asarray(x))
        assert T.held(plain) is None


def test_host_ntt_through_pinned_fetches(monkeypatch):
    """ops.four_step's sweeps with every block fetched through pinned memory
    (the GPU's path, forced here): the out-of-core coset NTT equals the
    device one, and the input is not touched."""
    fetched = []
    real = T.start_fetch

    def pinned(x, pinned=None):
        y = real(x, pinned=True)
        fetched.append(y.sharding.memory_kind)
        return y
    monkeypatch.setattr(T, "start_fetch", pinned)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2**32, (Fr.L, 2, 16), dtype=np.uint32)
    x[-1] &= 0x0FFFFFFF
    keep = x.copy()
    budget = FS.step_bytes(2, 2, 1, 2, 4, 2)             # blocks of 2 lines: 2+ per sweep
    got = FS.ntt_host(x, budget, coset=True, log_n1=2)
    assert np.array_equal(got, np.asarray(N.coset_ntt(jnp.asarray(x), N.domain(4))))
    assert np.array_equal(x, keep)
    assert len(fetched) >= 4 and set(fetched) == {T.PINNED}


@pytest.mark.parametrize("piece_bytes", [T.PIECE_BYTES, 40, 1])
def test_put_planes_of_a_strided_slice(piece_bytes):
    """``put_planes``: a strided host slice put in pieces, one per thread,
    equals ``jnp.asarray`` of it, planes of 1 or 2 axes, whole or in pieces
    of rows (a row at least, also where one row is over ``piece_bytes``)."""
    from concurrent.futures import ThreadPoolExecutor
    x = np.random.default_rng(1).integers(0, 2**32, (8, 3, 40), dtype=np.uint32)
    with ThreadPoolExecutor(4) as pool:
        for view, nd in ((x[:, :, 5:29], 1), (x[:, 1:, ::3], 1), (x.reshape(8, 3, 5, 8)[..., 2:6], 2)):
            got = T.put_planes(view, pool, plane_ndim=nd, piece_bytes=piece_bytes)
            assert isinstance(got, jax.Array) and np.array_equal(np.asarray(got), view)
    got = T.put_planes(x[:, 2, 1:], None, piece_bytes=piece_bytes)          # no pool
    assert np.array_equal(np.asarray(got), x[:, 2, 1:])


@pytest.mark.skipif(not HAS_PINNED, reason="no pinned_host memory kind on this device")
def test_to_pinned_then_put():
    """``to_pinned`` places a tree's numpy leaves in pinned host memory (on a
    GPU by default, forced here); ``put`` brings them to the device."""
    dev = jax.devices()[0]
    tree = {"a": np.arange(10, dtype=np.uint32), "b": np.ones((2, 3), np.int32)}
    assert T.to_pinned(tree, dev, pinned=False) is tree
    held = T.to_pinned(tree, dev, pinned=True)
    assert {x.sharding.memory_kind for x in jax.tree.leaves(held)} == {T.PINNED}
    back = T.put(held, dev)
    for k in tree:
        assert back[k].sharding.memory_kind != T.PINNED
        assert np.array_equal(np.asarray(back[k]), tree[k])


def test_put_with_a_pool_puts_large_numpy_leaves_in_pieces(monkeypatch):
    """``put(tree, dev, pool)``: numpy leaves above ``PIECE_BYTES`` (any rank
    and dtype) go by ``put_planes`` on the pool, the rest (small ones, jax
    arrays) by one ``device_put``; every leaf arrives whole on dev."""
    from concurrent.futures import ThreadPoolExecutor
    dev = jax.devices()[0]
    monkeypatch.setattr(T, "PIECE_BYTES", 256)
    rng = np.random.default_rng(5)
    tree = {"big": rng.integers(0, 2**32, (3, 70), dtype=np.uint32),
            "flat": rng.integers(-9, 9, 500).astype(np.int8),
            "small": np.arange(10, dtype=np.int32), "dev": jnp.arange(100, dtype=jnp.uint32)}
    seen, real = [], T.put_planes
    monkeypatch.setattr(T, "put_planes", lambda x, pool, **kw: seen.append(
        (x.shape, kw["plane_ndim"])) or real(x, pool, **kw))
    with ThreadPoolExecutor(3) as pool:
        got = T.put(tree, dev, pool)
    assert sorted(seen) == [((3, 70), 2), ((500,), 1)]
    for k, x in tree.items():
        assert isinstance(got[k], jax.Array) and got[k].dtype == x.dtype
        assert got[k].devices() == {dev} and np.array_equal(np.asarray(got[k]), np.asarray(x))
    seen.clear()
    assert np.array_equal(np.asarray(T.put(tree, dev)["big"]), tree["big"]) and seen == []


def test_put_planes_follows_the_default_device():
    """Without ``dev``, ``put_planes`` puts on the default device, a
    ``jax.default_device`` context's too (the engine's workers on other GPUs
    rely on it); with ``dev``, on dev; with ``out``, on out's device (an out
    on two devices refused by name).  Two CPU devices, in a process of its own."""
    code = """
import jax, jax.numpy as jnp, numpy as np
from concurrent.futures import ThreadPoolExecutor
from ops import transfer as T
d0, d1 = jax.devices()
x = np.arange(8 * 300, dtype=np.uint32).reshape(8, 300)
with ThreadPoolExecutor(2) as pool:
    for p in (pool, None):
        with jax.default_device(d1):
            y = T.put_planes(x, p, piece_bytes=400)
        z = T.put_planes(x, p, dev=d1, piece_bytes=400)
        w = T.put_planes(x, p)
        assert (y.devices(), z.devices(), w.devices()) == ({d1}, {d1}, {d0}), (y.devices(), w.devices())
        assert all(np.array_equal(np.asarray(a), x) for a in (y, z, w))
        o = T.put_planes(x, p, piece_bytes=400, out=jnp.zeros(x.shape, x.dtype, device=d1))
        assert o.devices() == {d1} and np.array_equal(np.asarray(o), x)   # out's device
mesh = jax.sharding.Mesh(np.array([d0, d1]), ("d",))
spread = jax.device_put(jnp.zeros(x.shape, x.dtype),
                        jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "d")))
try:
    T.put_planes(x, None, out=spread)
    raise SystemExit("no error for an out on two devices")
except ValueError as e:
    assert "out must live on one device, not 2" in str(e), e
print("ok")
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=root,
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300, cwd=root)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr


def test_pinned_vector_puts_any_range(monkeypatch):
    """``pin_vector`` holds x in power-of-two pieces (the last zero-padded);
    ``put_range`` gives x[..., lo:hi] zero-padded to the size asked for:
    piece-aligned ranges from whole pieces (exactly one piece: its own put,
    no device program), a range within one piece from its window, any other
    range gathered; bad ranges are refused."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2**32, size=(2, 12, 1000), dtype=np.uint32)
    v = T.pin_vector(x, jax.devices()[0], piece_bytes=96 * 100)
    assert v.piece == 64 and len(v.pieces) == 16 and v.shape == x.shape
    assert v.nbytes == x.nbytes and v.ndim == 3 and v.dtype == x.dtype
    assert np.array_equal(np.concatenate([np.asarray(p) for p in v.pieces], -1)[..., :1000], x)

    def want(lo, hi, size):
        w = np.zeros((2, 12, size), np.uint32)
        w[..., :hi - lo] = x[..., lo:hi]
        return w

    for lo, hi, size in [(0, 1000, 1024), (0, 64, 64), (64, 128, 64), (128, 256, 128),
                         (960, 1000, 64), (896, 1000, 128), (10, 20, 10), (10, 20, 16),
                         (0, 1000, 1000), (30, 100, 70), (0, 0, 0)]:
        assert np.array_equal(np.asarray(T.put_range(v, lo, hi, size)), want(lo, hi, size))
    with monkeypatch.context() as mp:               # one whole piece: no _set_piece
        mp.setattr(T, "_set_piece", None)
        for lo, hi in [(0, 64), (64, 128), (960, 1000)]:
            got = T.put_range(v, lo, hi, 64)
            assert isinstance(got, jax.Array) and np.array_equal(np.asarray(got), want(lo, hi, 64))
    before = T._piece_window._cache_size()           # windows of one size: one program
    for lo in (3, 17, 40):
        assert np.array_equal(np.asarray(T.put_range(v, lo, lo + 9, 9)), want(lo, lo + 9, 9))
    assert T._piece_window._cache_size() == before + 1
    for lo, hi, size in [(0, 1001, 1001), (5, 4, 4), (0, 10, 5)]:
        with pytest.raises(ValueError, match="put_range"):
            T.put_range(v, lo, hi, size)
    assert T.pin_vector(x[..., :1], jax.devices()[0]).piece >= 1


def test_pipeline_puts_one_ahead_and_keeps_two_in_flight():
    """``pipeline``: step k + 1's put before step k's run (hypothesis 97),
    step k − 2 waited for before step k is dispatched, ``on_step`` before
    every step but the first; without put_ahead each put just before its
    run."""
    events = []
    put = lambda k: events.append(("put", k)) or f"x{k}"                    # noqa: E731
    run = lambda k, x: events.append(("run", k, x)) or k                    # noqa: E731
    wait = lambda out: events.append(("wait", out))                          # noqa: E731
    T.pipeline(4, put, run, lambda: events.append(("step",)), wait=wait)
    assert events == [("put", 0), ("put", 1), ("run", 0, "x0"), ("step",), ("put", 2),
                      ("run", 1, "x1"), ("step",), ("wait", 0), ("put", 3), ("run", 2, "x2"),
                      ("step",), ("wait", 1), ("run", 3, "x3")]
    events.clear()
    T.pipeline(3, put, run, put_ahead=False, wait=wait)
    assert events == [("put", 0), ("run", 0, "x0"), ("put", 1), ("run", 1, "x1"), ("wait", 0),
                      ("put", 2), ("run", 2, "x2")]
    events.clear()
    T.pipeline(0, put, run, wait=wait)
    assert events == []


def test_put_pieces_gives_whole_pieces_or_none(monkeypatch):
    """``put_pieces``: a range of whole pieces (zero pieces past hi up to the
    size) as a tuple whose concatenation is x[..., lo:hi] zero-padded, put
    without any device program (hypothesis 96); None for ranges that are not
    whole pieces (``put_range`` serves them); bad ranges refused."""
    rng = np.random.default_rng(2)
    x = rng.integers(0, 2**32, size=(2, 12, 1000), dtype=np.uint32)
    v = T.pin_vector(x, jax.devices()[0], piece_bytes=96 * 100)
    assert v.piece == 64

    def want(lo, hi, size):
        w = np.zeros((2, 12, size), np.uint32)
        w[..., :hi - lo] = x[..., lo:hi]
        return w

    monkeypatch.setattr(T, "_set_piece", None)      # no assembly program
    for lo, hi, size in [(0, 64, 64), (64, 256, 192), (128, 256, 256), (896, 1000, 128),
                         (768, 1000, 512), (0, 1000, 1024)]:
        got = T.put_pieces(v, lo, hi, size)
        assert isinstance(got, tuple) and len(got) == size // 64
        assert all(isinstance(p, jax.Array) and p.shape == (2, 12, 64) for p in got)
        assert np.array_equal(np.concatenate([np.asarray(p) for p in got], -1),
                              want(lo, hi, size))
    for lo, hi, size in [(10, 20, 10), (0, 100, 100), (0, 100, 128), (32, 96, 64),
                         (0, 0, 0)]:
        assert T.put_pieces(v, lo, hi, size) is None
    for lo, hi, size in [(0, 1001, 1024), (5, 4, 64), (0, 128, 64)]:
        with pytest.raises(ValueError, match="put_pieces"):
            T.put_pieces(v, lo, hi, size)
