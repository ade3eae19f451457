"""ops.msm against independent references.

Bases are chosen as k_i·G with known k_i, so Σ s_i·P_i = (Σ s_i·k_i mod r)·G
is ONE py_ecc multiplication (independent of ops).  Small windows and tiny
lane counts force every path of the accumulation on a few points: buckets
inside one lane, buckets spanning lanes (partial sums, several levels of
their reduction), negative digits, skipped zero digits.
"""
from __future__ import annotations

import dataclasses

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import R, ob
from ops import msm as M
from ops.curve import G1, G2
from ops.field import Fr

N = 32
CFG = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4)


def _g1(k):
    if k % R == 0:
        return None
    x, y = ob.normalize(ob.multiply(ob.G1, k))
    return int(x), int(y)


def _g2(k):
    if k % R == 0:
        return None
    x, y = ob.normalize(ob.multiply(ob.G2, k))
    return (int(x.coeffs[0]), int(x.coeffs[1])), (int(y.coeffs[0]), int(y.coeffs[1]))


@pytest.fixture(scope="module")
def g1_bases():
    rng = random.Random(7)
    ks = [rng.randrange(1, R) for _ in range(N)]
    ks[5] = 0                       # the identity as a base
    ks[6] = ks[7] = ks[8]           # repeated bases
    return ks, G1.from_affine_ints([_g1(k) for k in ks])


def _expected(ks, scalars, point=_g1):
    return point(sum(k * s for k, s in zip(ks, scalars)) % R)


def _run(bases, scalar_lists, curve=G1, cfg=CFG):
    s = jnp.asarray(Fr.from_int(np.array(scalar_lists, dtype=object)))
    if s.ndim == 2:
        s = s[:, None, :]
        out = M.msm(curve, bases, s, cfg)[..., 0]
        return curve.to_affine_ints(out)
    return curve.to_affine_ints(M.msm(curve, bases, s, cfg))


def test_signed_digits_recompose():
    rng = random.Random(1)
    ks = [0, 1, R - 1, 2**254, (1 << 255) - 1] + [rng.randrange(R) for _ in range(27)]
    limbs = np.array([[(k >> (32 * i)) & 0xFFFFFFFF for k in ks] for i in range(8)], np.uint32)
    for c in (1, 3, 4, 7, 13, 16, 17, 20, 24):      # above 16: MSMConfig.window only
        d = np.asarray(M.signed_digits(jnp.asarray(limbs), c)).astype(object)
        assert d.shape == (M.num_windows(c), len(ks))
        assert np.all(np.abs(d.astype(np.int64)) <= 1 << (c - 1))
        assert np.all(d.astype(np.int64) > -(1 << (c - 1)))
        for j, k in enumerate(ks):
            assert sum(int(d[w, j]) << (c * w) for w in range(d.shape[0])) == k


def test_msm_random_and_special_scalars(g1_bases):
    ks, bases = g1_bases
    rng = random.Random(2)
    sc = [rng.randrange(R) for _ in range(N)]
    sc[:6] = [0, 1, R - 1, 5, 1 << 200, 2]
    assert _run(bases, sc) == _expected(ks, sc)


@pytest.mark.parametrize("kind", ["zero", "one", "bits75", "same"])
def test_msm_structured_scalars(g1_bases, kind):
    ks, bases = g1_bases
    rng = random.Random(3)
    if kind == "zero":
        sc = [0] * N
    elif kind == "one":
        sc = [1] * N
    elif kind == "same":            # one heavy bucket per window
        sc = [0xDEADBEEF] * N
    else:                           # 75% bits (0/1), the rest random
        sc = [rng.randrange(2) if rng.random() < 0.75 else rng.randrange(R) for _ in range(N)]
    assert _run(bases, sc) == _expected(ks, sc)


def test_bits_sum_and_split(g1_bases):
    """bits_sum = Σ of the selected bases (batched, with an all-zero row);
    msm_split = msm when the declared bit positions hold 0/1 (the identity
    and repeated bases among them), the rest random."""
    ks, bases = g1_bases
    rng = random.Random(8)
    rows = [[rng.randrange(2) for _ in range(N)], [0] * N, [1] * N]
    got = G1.to_affine_ints(M.bits_sum(G1, bases, jnp.asarray(np.array(rows, bool)), CFG))
    assert got == [_expected(ks, r) for r in rows]
    bit_pos = np.array(sorted(rng.sample(range(N), 24)))
    sc = [rng.randrange(R) for _ in range(N)]
    for i in bit_pos:
        sc[i] = rng.randrange(2)
    s = jnp.asarray(Fr.from_int(np.array([sc], dtype=object)))
    out = M.msm_split(G1, bases, s, bit_pos, CFG)
    assert G1.to_affine_ints(out[..., 0]) == _expected(ks, sc)
    # a view instead of the scalars: after 3 others (Groth16's L over the witness's aux
    # part; a nonzero ahead of the offset must not count) and with the last 2 as a tail
    # (A and B over w ‖ r), whole and presplit bases, bit positions in the tail too
    bit_pos = np.union1d(bit_pos, [N - 1])
    sc[N - 1] = 1
    s = jnp.asarray(Fr.from_int(np.array([sc], dtype=object)))
    ahead = jnp.asarray(Fr.from_int(np.array([[R - 1, 1, 5]], dtype=object)))
    longer = jnp.concatenate([ahead, s], axis=-1)
    tail = s[..., N - 2:]
    pos = M.positions(N, bit_pos, device=False)
    for b in (bases, M.split_bases(np.asarray(bases), pos)):
        for view in ((longer, 3, None), (s[..., :N - 2], 0, tail),
                     (longer[..., :N + 1], 3, tail)):
            out = M.msm_split(G1, b, view[0], pos, CFG, offset=view[1], tail=view[2])
            assert G1.to_affine_ints(out[..., 0]) == _expected(ks, sc)
    with pytest.raises(ValueError, match="from offset 2"):
        M.msm_split(G1, bases, longer, pos, CFG, offset=2)
    with pytest.raises(ValueError, match="a tail of shape"):
        M.msm_split(G1, bases, s[..., :N - 2], pos, CFG, tail=tail[0])
    with pytest.raises(ValueError, match="bits must be"):
        M.bits_sum(G1, bases, jnp.ones((N + 1,), bool), CFG)


def test_positions_leave_out_terms(g1_bases):
    """Positions that list only some of the N positions (``positions(keep=)``:
    a query's density) sum only those: msm_split over whole and presplit
    bases (with and without bits, and none kept: the identity) and msm_many
    equal the sum over the kept terms, computed with Python integers."""
    ks, bases = g1_bases
    rng = random.Random(11)
    sc = [rng.randrange(R) for _ in range(N)]
    bit_pos = np.arange(0, N, 3)
    for i in bit_pos:
        sc[i] = rng.randrange(2)
    s = jnp.asarray(Fr.from_int(np.array([sc], dtype=object)))
    keep = np.array([rng.random() < 0.4 for _ in range(N)])
    keep[[0, 1]] = True, False                         # a kept bit and a left-out one
    for bits, mask in ((bit_pos, keep), (None, keep), (bit_pos, np.zeros(N, bool))):
        pos = M.positions(N, bits, keep=mask)
        assert len(pos.dense) + len(pos.bits) == mask.sum()
        want = _expected(ks, [x if k else 0 for x, k in zip(sc, mask)])
        assert G1.to_affine_ints(M.msm_split(G1, bases, s, pos, CFG)[..., 0]) == want
        host = M.positions(N, bits, device=False, keep=mask)
        split = M.split_bases(np.asarray(bases), host)
        assert G1.to_affine_ints(M.msm_split(G1, split, s, host, CFG)[..., 0]) == want
        many = M.msm_many(G1, [M.Part(bases, s, 0, pos)], CFG)[..., 0, 0]
        assert G1.to_affine_ints(many) == want
    with pytest.raises(ValueError, match="keep must be a bool mask"):
        M.positions(N, None, keep=np.ones(N - 1, bool))


def test_bits_sum_in_chunks_within_a_budget(g1_bases, monkeypatch):
    """bits_sum under a budget: device and host bases in power-of-two chunks
    (each within the budget, with CHUNKS_HELD chunks' copies for host bases) give
    the sums of the whole vector."""
    ks, bases = g1_bases
    rng = random.Random(18)
    rows = [[rng.randrange(2) for _ in range(N)], [1] * N]
    bits = jnp.asarray(np.array(rows, bool))
    chunks = []
    real = M._bits_add_jit
    monkeypatch.setattr(M, "_bits_add_jit",
                        lambda c, b, f, cfg, acc: chunks.append(b.shape[-1]) or real(c, b, f, cfg, acc))
    budget = M.bits_working_set_bytes(G1, 8, 2, CFG)
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    want = [_expected(ks, r) for r in rows]
    assert G1.to_affine_ints(M.bits_sum(G1, jnp.asarray(bases), bits, cfg)) == want
    assert chunks == [8] * 4
    chunks.clear()
    assert G1.to_affine_ints(M.bits_sum(G1, np.asarray(bases), bits, cfg)) == want
    held = M.CHUNKS_HELD     # the running chunk's copy, the next one's and one put ahead
    assert chunks == [2] * 16 and M.bits_working_set_bytes(G1, 2, 2, CFG) \
        + held * M._bases_bytes(G1, 2) <= budget < M.bits_working_set_bytes(G1, 4, 2, CFG) \
        + held * M._bases_bytes(G1, 4)
    with pytest.raises(ValueError, match="bits_sum: budget of 100 bytes"):
        M.bits_sum(G1, bases, bits, M.MSMConfig(window=4, lanes=8, budget_bytes=100))


@pytest.mark.parametrize("piece_bytes", [2 * 96, 16 * 96])
def test_pinned_bases_stream_as_host_bases(g1_bases, piece_bytes):
    """Bases held as a ``transfer.PinnedVector`` (the 16 GB mode's pinned key,
    hypothesis 84) in pieces smaller than a chunk (whole pieces per chunk) or
    larger (a piece's window per chunk): the chunked msm, bits_sum and
    msm_split over split bases whose parts are pinned give the sums of the
    whole vector."""
    from ops import transfer as T
    ks, bases = g1_bases
    dev = jax.devices()[0]
    pinned = T.pin_vector(np.asarray(bases), dev, piece_bytes=piece_bytes)
    rng = random.Random(23)
    rows = [[rng.randrange(R) for _ in range(N)], [rng.randrange(2) for _ in range(N)]]
    s = np.asarray(Fr.from_int(np.array(rows, dtype=object)))
    want = [_expected(ks, r) for r in rows]
    c = M.check_window(CFG.window, 2)
    budget = M.working_set_bytes(G1, 8, 2, c, CFG) + 2 * 2 * 8 * 32 + 2 * M._bases_bytes(G1, 8)
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    tuples, real = [], T.put_pieces      # chunks of whole pieces go as tuples (hypothesis 96)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(T, "put_pieces", lambda *a: tuples.append(real(*a)) or tuples[-1])
        assert G1.to_affine_ints(M.msm(G1, pinned, s, cfg)) == want
    assert tuples and all(isinstance(t, tuple) for t in tuples) == (piece_bytes < 8 * 96)
    assert G1.to_affine_ints(M.msm(G1, pinned, s, CFG)) == want            # unchunked
    bits = jnp.asarray(np.array([[rng.randrange(2) for _ in range(N)]], bool))
    bcfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4,
                       budget_bytes=M.bits_working_set_bytes(G1, 8, 1, CFG)
                       + 2 * M._bases_bytes(G1, 8))
    bw = [_expected(ks, [int(b) for b in np.asarray(bits[0])])]
    assert G1.to_affine_ints(M.bits_sum(G1, pinned, bits, bcfg)) == bw
    bit_pos = np.array(sorted(rng.sample(range(N), 12)))
    for sc in rows:
        for i in bit_pos:
            sc[i] = rng.randrange(2)
    s = jnp.asarray(Fr.from_int(np.array(rows, dtype=object)))
    pos = M.positions(N, bit_pos)
    split = M.split_bases(np.asarray(bases), pos, dense_size=32)
    split = split._replace(bits=T.pin_vector(split.bits, dev, piece_bytes=piece_bytes),
                           dense=T.pin_vector(split.dense, dev, piece_bytes=piece_bytes))
    got = G1.to_affine_ints(M.msm_split(G1, split, s, pos, cfg))
    assert got == [_expected(ks, sc) for sc in rows]


def test_msm_host_scalars_go_to_the_device_a_chunk_at_a_time(g1_bases, monkeypatch):
    """msm under a budget with host scalars (the out-of-core H, its
    coefficients in host memory): each chunk's scalars are put with its
    bases, so the whole scalar vector is never on the device (staged whole
    it was a 4 GiB vector beside the budget at 2^27); the chunk size counts
    CHUNKS_HELD chunks' scalars on the device; the sum is that of the whole vector."""
    ks, bases = g1_bases
    rng = random.Random(19)
    rows = [[rng.randrange(R) for _ in range(N)], [rng.randrange(2) for _ in range(N)]]
    s = np.asarray(Fr.from_int(np.array(rows, dtype=object)))               # (8, 2, N)
    chunks, real = [], M._chunk_jit

    def spy(curve, b, sc, c, cfg, acc):
        assert not any(a.shape == s.shape for a in jax.live_arrays()), "scalars staged whole"
        chunks.append(sc.shape[-1])
        return real(curve, b, sc, c, cfg, acc)

    monkeypatch.setattr(M, "_chunk_jit", spy)
    c = M.check_window(CFG.window, 2)
    ws = lambda k: M.working_set_bytes(G1, k, 2, c, CFG)                # noqa: E731
    held = M.CHUNKS_HELD     # chunks whose copies are on the device at once
    budget = ws(8) + held * (2 * 8 * 32 + M._bases_bytes(G1, 8))
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    want = [_expected(ks, r) for r in rows]
    got = G1.to_affine_ints(M.msm(G1, np.asarray(bases), s, cfg))
    assert got == want and chunks == [8] * 4
    chunks.clear()                  # device bases: the scalars' in-flight copy still counted
    budget = ws(8) + held * 2 * 8 * 32
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget - 1)
    assert G1.to_affine_ints(M.msm(G1, jnp.asarray(bases), s, cfg)) == want
    assert chunks == [4] * 8 and ws(4) + held * 2 * 4 * 32 < budget - 1 < ws(8) + held * 2 * 8 * 32


@pytest.mark.parametrize("shape", [(2, 12, 40), (2, 2, 12, 40)])
def test_to_device_copies_host_slices_row_by_row(shape):
    """_to_device: a strided last-axis slice of host bases (G1 and G2 shapes)
    arrives whole and in order; device arrays pass through."""
    x = np.random.default_rng(3).integers(0, 2**32, shape, dtype=np.uint32)
    view = x[..., 8:24]
    assert not view.flags.c_contiguous
    got = M._to_device(view)
    assert isinstance(got, jax.Array) and got.shape == view.shape
    assert np.array_equal(np.asarray(got), view)
    assert np.array_equal(np.asarray(M._to_device(jnp.asarray(view))), view)


def test_in_chunks_keeps_at_most_two_in_flight_and_puts_one_ahead(monkeypatch):
    """_in_chunks waits for chunk k − 2 before dispatching chunk k, and puts
    chunk k + 1's inputs before it dispatches chunk k (hypothesis 97)."""
    events = []
    monkeypatch.setattr(M.jax, "block_until_ready", lambda x: events.append(("wait", x)))

    def put(lo, hi):
        events.append(("put", lo, hi))
        return lo

    def run(inputs, acc):
        events.append(("run", inputs))
        return inputs

    assert M._in_chunks(9, 2, put, run, None) == 8
    assert events == [("put", 0, 2), ("put", 2, 4), ("run", 0), ("put", 4, 6), ("run", 2),
                      ("wait", 0), ("put", 6, 8), ("run", 4), ("wait", 2), ("put", 8, 9),
                      ("run", 6), ("wait", 4), ("run", 8)]
    events.clear()           # the interruption point: before every chunk but the first
    assert M._in_chunks(6, 2, put, run, None, lambda: events.append(("yield",))) == 4
    assert events == [("put", 0, 2), ("put", 2, 4), ("run", 0), ("yield",), ("put", 4, 6),
                      ("run", 2), ("yield",), ("wait", 0), ("run", 4)]
    events.clear()
    assert M._in_chunks(0, 2, put, run, "acc") == "acc" and events == []
    events.clear()           # without put_ahead: each put just before its run
    assert M._in_chunks(5, 2, put, run, None, put_ahead=False) == 4
    assert events == [("put", 0, 2), ("run", 0), ("put", 2, 4), ("run", 2), ("wait", 0),
                      ("put", 4, 5), ("run", 4)]


def test_split_scalar_gathers_stay_small():
    """The bit flags of ``msm_split`` are one compiled program: for 2^20
    positions of one vector its temporaries and output are under a quarter
    of the scalars' bytes (the eager gather of the limbs before it was 8·4
    bytes a position: session 39's out-of-memory at PoRep 32GiB), and its
    flags are right at an offset."""
    n = 1 << 20
    spec = jax.ShapeDtypeStruct((8, 1, n), jnp.uint32)
    index = jax.ShapeDtypeStruct((n - 16,), jnp.int32)
    mem = M._nonzero_at.lower(spec, None, index, 16, n).compile().memory_analysis()
    if mem is None:
        pytest.skip("this backend reports no memory analysis")
    assert mem.temp_size_in_bytes + mem.output_size_in_bytes < 8 * 4 * n / 4
    s = np.zeros((8, 2, 12), np.uint32)
    s[3, 0, 5], s[0, 1, 11], s[7, 0, 2] = 1, 9, 4
    got = M._nonzero_at(jnp.asarray(s), None, jnp.asarray([0, 3, 9, 1], jnp.int32), 2, 6)
    assert np.asarray(got).tolist() == [[True, True, False, False, False, False],
                                        [False, False, True, False, False, False]]


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_msm_split_over_presplit_host_bases(g1_bases):
    """Host bases split once (``split_bases``, the streaming key's form) give
    the same sums as the unsplit vector, for a batch of two scalar vectors
    and a padded dense part; positions other than the split's are refused."""
    ks, bases = g1_bases
    rng = random.Random(9)
    bit_pos = np.array(sorted(rng.sample(range(N), 20)))
    rows = [[rng.randrange(R) for _ in range(N)] for _ in range(2)]
    for sc in rows:
        for i in bit_pos:
            sc[i] = rng.randrange(2)
    s = jnp.asarray(Fr.from_int(np.array(rows, dtype=object)))             # (8, 2, N)
    pos = M.positions(N, bit_pos)
    host = np.asarray(bases)
    split = M.split_bases(host, pos, dense_size=16)
    assert isinstance(split.dense, np.ndarray) and split.shape == host.shape
    assert split.bits.shape[-1] == 32 and split.dense.shape[-1] == 16  # padded: 2^5, 16
    got = G1.to_affine_ints(M.msm_split(G1, split, s, pos, CFG))
    assert got == [_expected(ks, sc) for sc in rows]
    with pytest.raises(ValueError, match="Positions they were split by"):
        M.msm_split(G1, split, s, bit_pos, CFG)
    with pytest.raises(ValueError, match="positions"):
        M.msm_split(G1, split, s[..., :N - 1], M.positions(N - 1, bit_pos[:-1]), CFG)


@pytest.fixture
def split_spy(monkeypatch):
    """Records (number of 1s in the bit part, padded size of the dense part)
    of every 0/1 split msm makes."""
    calls = []
    real = M._split_sum

    def spy(curve, bb, bits, db, ds, cfg, on_chunk=None):
        calls.append((None if bits is None else int(jnp.sum(bits)),
                      None if ds is None else ds.shape[-1]))
        return real(curve, bb, bits, db, ds, cfg, on_chunk)

    monkeypatch.setattr(M, "_split_sum", spy)
    return calls


def _bits_mix(rng, n, frac):
    """Scalars with round(frac·n) positions 0/1 (both present), the rest
    random >= 2 (so exactly those positions count as bits)."""
    pos = set(rng.sample(range(n), round(frac * n)))
    sc = [rng.randrange(2, R) for _ in range(n)]
    for i, p in enumerate(sorted(pos)):
        sc[p] = i % 2 if i < 2 else rng.randrange(2)
    return sc, pos


def test_auto_split_75_percent_bits(g1_bases, split_spy):
    ks, bases = g1_bases
    sc, pos = _bits_mix(random.Random(11), N, 0.75)
    assert _run(bases, sc) == _expected(ks, sc)
    ones = sum(sc[p] for p in pos)
    assert split_spy == [(ones, 8)]              # 24 bit positions summed, 8 -> Pippenger


def test_auto_split_all_bits_and_none(g1_bases, split_spy):
    ks, bases = g1_bases
    rng = random.Random(12)
    bits = [rng.randrange(2) for _ in range(N)]
    assert _run(bases, bits) == _expected(ks, bits)
    assert split_spy == [(sum(bits), None)]      # no Pippenger part at all
    dense = [rng.randrange(2, R) for _ in range(N)]
    assert _run(bases, dense) == _expected(ks, dense)
    assert len(split_spy) == 1                   # no 0/1 position: the plain path


def test_auto_split_batched_positions_differ(g1_bases, split_spy):
    """Only positions that are 0/1 in EVERY vector are split off."""
    ks, bases = g1_bases
    rng = random.Random(13)
    a, pa = _bits_mix(rng, N, 0.875)
    b, pb = _bits_mix(rng, N, 0.875)
    common = pa & pb
    assert N // 2 <= len(common) < len(pa)       # overlapping, not equal
    assert _run(bases, [a, b]) == [_expected(ks, a), _expected(ks, b)]
    ((nbits, dense),) = split_spy
    assert nbits == sum(a[p] + b[p] for p in common)         # the 1s of both vectors there
    assert dense == 1 << (N - len(common) - 1).bit_length()


def test_auto_split_threshold_none_is_plain(g1_bases, split_spy):
    ks, bases = g1_bases
    sc, _ = _bits_mix(random.Random(14), N, 0.75)
    off = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, split_threshold=None)
    high = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, split_threshold=0.9)
    assert _run(bases, sc, cfg=off) == _run(bases, sc, cfg=high) == _expected(ks, sc)
    assert split_spy == []


def test_auto_split_host_bases_streamed(g1_bases, split_spy):
    """Host bases under a budget: the split's gathers run on the host."""
    ks, bases = g1_bases
    sc, pos = _bits_mix(random.Random(15), N, 0.75)
    budget = M.working_set_bytes(G1, 8, 1, 4, CFG)
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    assert _run(np.asarray(bases), sc, cfg=cfg) == _expected(ks, sc)
    assert split_spy == [(sum(sc[p] for p in pos), 8)]


def test_msm_batched_equals_each(g1_bases):
    ks, bases = g1_bases
    rng = random.Random(4)
    rows = [[rng.randrange(R) for _ in range(N)], [1] * N,
            [rng.randrange(3) for _ in range(N)]]
    got = _run(bases, rows)
    assert got == [_expected(ks, r) for r in rows]


def test_msm_chunked_equals_unchunked(g1_bases):
    ks, bases = g1_bases
    rng = random.Random(5)
    sc = [rng.randrange(R) for _ in range(N)]
    budget = M.working_set_bytes(G1, 8, 1, 4, CFG)
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=4, min_steps=4, budget_bytes=budget)
    host_bases = np.asarray(bases)                 # streamed from host memory
    assert _run(host_bases, sc, cfg=cfg) == _expected(ks, sc) == _run(bases, sc)
    calls = []         # between chunks: host chunks of 4 (8 and their copies exceed the budget)
    s = jnp.asarray(Fr.from_int(np.array([sc], dtype=object)))
    got = M.msm(G1, host_bases, s, cfg, lambda: calls.append(1))[..., 0]
    assert G1.to_affine_ints(got) == _expected(ks, sc) and len(calls) == N // 4 - 1


@pytest.mark.parametrize("p", [2, 3])
def test_msm_over_shifted_bases(g1_bases, p):
    """``shift_bases``: p copies, copy t = 2^(c·t·⌈W/p⌉)·P (checked by
    py_ecc), and ``msm`` over them equals the plain MSM's py_ecc value,
    batched, with r − 1 scalars, the identity and repeated bases (c = 4:
    W = 64, so p = 3 leaves ⌈64/3⌉·3 − 64 = 2 padding windows)."""
    ks, bases = g1_bases
    c = 4
    sb = M.shift_bases(G1, bases, c, p)
    assert (sb.window, sb.factor) == (c, p) and sb.points.shape == (2, 12, p * N)
    shift = 1 << (c * M.shifted_windows(c, p))
    for t in range(p):
        got = G1.to_affine_ints(sb.points[..., t * N:(t + 1) * N], projective=False)
        assert got == [_g1(k * shift ** t % R) for k in ks]
    rng = random.Random(75 + p)
    rows = [[rng.randrange(R) for _ in range(N)], [R - 1] * 4 + [rng.randrange(R) for _ in range(N - 4)]]
    assert _run(sb, rows) == [_expected(ks, r) for r in rows]
    assert _run(sb, rows[0]) == _expected(ks, rows[0])


def test_deal_digits_recompose():
    """Σ over the dealt digits of 2^(c·w')·d·2^(c·t·⌈W/p⌉) gives back each scalar."""
    c, p = 5, 3
    rng = random.Random(76)
    vals = [rng.randrange(R) for _ in range(6)] + [R - 1, 0]
    limbs = np.array([[(k >> (32 * i)) & 0xFFFFFFFF for k in vals] for i in range(8)], np.uint32)
    d = M.signed_digits(jnp.asarray(limbs), c)
    dealt = np.asarray(M.deal_digits(d[:, None, :].transpose(1, 0, 2), p))[0]
    Wp, n = M.shifted_windows(c, p), len(vals)
    assert dealt.shape == (Wp, p * n)
    for i, v in enumerate(vals):
        assert sum(int(dealt[w, t * n + i]) << (c * (w + t * Wp))
                   for w in range(Wp) for t in range(p)) == v


def test_shifted_bases_bad_input(g1_bases):
    ks, bases = g1_bases
    sb = M.shift_bases(G1, bases, 4, 2)
    s = jnp.asarray(Fr.from_int(np.array([[1] * N], dtype=object)))
    with pytest.raises(ValueError, match="shifted for 4-bit windows"):
        M.msm(G1, sb, s, dataclasses.replace(CFG, window=5))
    with pytest.raises(ValueError, match=f"16 scalars for {N} bases"):
        M.msm(G1, sb, s[..., :16], CFG)
    with pytest.raises(ValueError, match="shifted 2 times hold p·N points, got 5"):
        M.msm(G1, sb._replace(points=sb.points[..., :5]), s, CFG)
    with pytest.raises(TypeError, match="uint32 limb arrays"):
        M.msm(G1, sb, s.astype(jnp.int32), CFG)
    with pytest.raises(ValueError, match="factor must be an int >= 1"):
        M.shift_bases(G1, bases, 4, 0)
    with pytest.raises(ValueError, match="bases must be affine G1"):
        M.shift_bases(G1, bases[:1], 4, 2)
    with pytest.raises(ValueError, match="exceed the budget"):
        M.msm(G1, sb, s, dataclasses.replace(CFG, budget_bytes=1000))


def test_msm_g2():
    rng = random.Random(6)
    n = 8
    ks = [rng.randrange(1, R) for _ in range(n)]
    ks[3] = 0
    bases = G2.from_affine_ints([_g2(k) for k in ks])
    sc = [rng.randrange(R) for _ in range(n)]
    sc[0], sc[1] = 0, 1
    cfg = M.MSMConfig(window=5, lanes=8, small_lanes=4, min_steps=4)
    assert _run(bases, sc, G2, cfg) == _expected(ks, sc, _g2)


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_msm_horner_g1_groups(g1_bases):
    """The CPU window combination (``horner``): group sums combined per
    window (lanes=256 gives ng = 2 groups of 4 buckets at c = 4), then
    Horner over the 64 windows; batched, against py_ecc and msm_reference."""
    ks, bases = g1_bases
    rng = random.Random(16)
    rows = [[rng.randrange(R) for _ in range(N)], [R - 1] * 4 + [rng.randrange(R) for _ in range(N - 4)]]
    cfg = M.MSMConfig(window=4, lanes=256, small_lanes=4, min_steps=4, horner=True,
                      split_threshold=None)
    got = _run(bases, rows, cfg=cfg)
    assert got == [_expected(ks, r) for r in rows]
    ref = M.msm_reference(G1, jnp.asarray(bases), jnp.asarray(Fr.from_int(rows[0])))
    assert G1.to_affine_ints(ref) == got[0]


@pytest.mark.parametrize("small_lanes", [4, 256])
def test_msm_small_weights(g1_bases, small_lanes):
    """``MSMConfig.small_weights``: R_grp weighted by grp·g alone, the group
    sums added per window, then Horner over the windows.  small_lanes=256 at
    c = 4 gives ng = 4 groups of 2 buckets in each of the 64 windows (G·W·ng
    = 256 lanes for one vector, 2 vectors: ng = 2); 4 gives ng = 1 (every R
    weighted by 0).  Batched, with r − 1 scalars, against py_ecc."""
    ks, bases = g1_bases
    rng = random.Random(74)
    rows = [[rng.randrange(R) for _ in range(N)], [R - 1] * 4 + [rng.randrange(R) for _ in range(N - 4)]]
    cfg = M.MSMConfig(window=4, lanes=8, small_lanes=small_lanes, min_steps=4, small_weights=True,
                      split_threshold=None)
    assert _run(bases, rows, cfg=cfg) == [_expected(ks, r) for r in rows]
    assert _run(bases, rows[0], cfg=cfg) == _expected(ks, rows[0])


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_msm_horner_g2():
    """Horner's window combination on G2 (no groups: ng = 1), against py_ecc
    and msm_reference."""
    rng = random.Random(17)
    n = 8
    ks = [rng.randrange(1, R) for _ in range(n)]
    bases = G2.from_affine_ints([_g2(k) for k in ks])
    sc = [rng.randrange(R) for _ in range(n)]
    sc[0] = 1
    cfg = M.MSMConfig(window=5, lanes=8, small_lanes=4, min_steps=4, horner=True)
    got = _run(bases, sc, G2, cfg)
    assert got == _expected(ks, sc, _g2)
    ref = M.msm_reference(G2, jnp.asarray(bases), jnp.asarray(Fr.from_int(sc)))
    assert G2.to_affine_ints(ref) == got


def test_msm_reference_matches_py_ecc():
    rng = random.Random(8)
    ks = [rng.randrange(1, R) for _ in range(4)]
    bases = G1.from_affine_ints([_g1(k) for k in ks])
    sc = [rng.randrange(R) for _ in range(4)]
    out = M.msm_reference(G1, jnp.asarray(bases), jnp.asarray(Fr.from_int(sc)))
    assert G1.to_affine_ints(out) == _expected(ks, sc)


def test_msm_bad_input(g1_bases):
    _, bases = g1_bases
    s = jnp.asarray(Fr.from_int([1] * N))[:, None, :]
    with pytest.raises(ValueError, match="scalars for"):
        M.msm(G1, bases[..., :-1], s, CFG)
    with pytest.raises(ValueError, match="affine G1"):
        M.msm(G1, bases[0], s, CFG)
    with pytest.raises(ValueError, match="Fr elements"):
        M.msm(G1, bases, s[:4], CFG)
    with pytest.raises(ValueError, match="outside"):
        Fr.from_int([R])                           # scalars >= r are rejected at the edge
    with pytest.raises(ValueError, match="budget"):
        M.msm(G1, bases, s, M.MSMConfig(window=4, lanes=8, small_lanes=4, budget_bytes=1000,
                                        split_threshold=None))


def test_windows_above_16_bits(g1_bases):
    """``MSMConfig.window`` above ``choose_window``'s 16 bits (hypothesis 36:
    fewer windows, fewer additions at 2^24 and above): a 17-bit window
    (2^16 buckets per window, digits straddling two limbs) against py_ecc;
    windows past ``MAX_WINDOW``, or too many buckets for int32 keys, are
    refused by name."""
    ks, bases = g1_bases
    rng = random.Random(17)
    scalars = [rng.randrange(R) for _ in ks]
    cfg = M.MSMConfig(window=17, lanes=8, small_lanes=1 << 8, min_steps=4)
    assert _run(bases, scalars, cfg=cfg) == _expected(ks, scalars)
    s = jnp.asarray(Fr.from_int(np.array(scalars, dtype=object)))[:, None, :]
    with pytest.raises(ValueError, match=r"window must be in \[1, 24\], got 25"):
        M.msm(G1, bases, s, M.MSMConfig(window=25))
    assert M.check_window(24, 23) == 24
    with pytest.raises(ValueError, match="24 scalar vectors with 24-bit windows need"):
        M.check_window(24, 24)


def test_choose_window_grows_with_n():
    """The width of least cost grows with N and shrinks with the chunks
    (each chunk pays a pass over the bucket array); the session-35 H100
    fit's choices: 16 bits at 2^20 and 2^22, 20 at 2^27 in 4 chunks (each
    the measured best of its size)."""
    cs = [M.choose_window(1 << k) for k in range(4, 28)]
    assert cs == sorted(cs) and 2 <= cs[0] and cs[-1] <= M.WIDEST_CHOICE
    assert (M.choose_window(1 << 20), M.choose_window(1 << 22)) == (16, 16)
    assert M.choose_window(1 << 27, chunks=4) == 20
    assert M.choose_window(1 << 27, chunks=32) < 20
    # widths whose bucket keys would overflow int32 for G scalar vectors are not chosen
    c = M.choose_window(1 << 27, chunks=4, G=512)          # 512·13·2^19 ≥ 2^31
    assert c < 20 and 512 * M.num_windows(c) << (c - 1) < 1 << 31
    # the cost is n·W plus a bucket weight per pass over W·2^(c−1) buckets
    assert M.window_cost(1 << 10, 8, 3, 2.0) == (1 << 10) * 32 + 2.0 * 32 * 128 * 4
    # the old weight (before the bucket passes' copies went) chose 13 bits at 2^20
    assert M.choose_window(1 << 20, bucket_weight=7.67) == 13


def test_plan_chooses_the_width_with_its_chunks():
    """``plan``: the chunk is the largest power of two whose working set fits
    the budget and whose sort entries stay int32; the width is chosen with
    the chunks it leaves (a narrow budget means many chunks, so fewer
    buckets); an explicit window is kept; a budget below one point's
    working set is refused."""
    cfg = M.GPU_CONFIG
    gib = lambda g: dataclasses.replace(cfg, budget_bytes=g << 30)
    assert M.plan(G1, 1 << 27, 1, gib(44)) == (20, 1 << 25)     # the H100 measurement's
    c, k = M.plan(G1, 1 << 27, 1, gib(5))                        # the 16 GB mode's msm_h
    assert c == 16 and k < 1 << 25 and M.working_set_bytes(G1, k, 1, c, cfg) <= 5 << 30
    # no budget: the whole vector unless its entries overflow int32 (16·2^27 = 2^31 at c=16)
    assert M.plan(G1, 1 << 24, 1, cfg) == (19, 1 << 24)
    c, k = M.plan(G1, 1 << 27, 1, dataclasses.replace(cfg, window=16))
    assert (c, k) == (16, 1 << 26)
    assert M.plan(G1, 1 << 10, 1, dataclasses.replace(gib(1), window=9)) == (9, 1 << 10)
    with pytest.raises(ValueError, match="below the fixed working set"):
        M.plan(G1, 1 << 10, 1, dataclasses.replace(cfg, budget_bytes=1000))
    # the bucket's weight is the curve's (G2: not measured, the old widths kept) unless set
    from ops.curve import G2
    assert M.bucket_weight(G1, cfg) == M.BUCKET_WEIGHTS["G1"]
    assert M.plan(G2, 1 << 20, 1, cfg) == (16, 1 << 20)
    assert M.plan(G1, 1 << 20, 1, cfg)[0] == 16
    assert M.plan(G1, 1 << 20, 1, dataclasses.replace(cfg, bucket_weight=7.67))[0] == 13


def test_default_config_follows_where_the_msm_runs(monkeypatch):
    """In a GPU process (default backend 'gpu', simulated here) an MSM placed
    on the host CPU gets the CPU's configuration: by its committed arrays or
    a ``jax.default_device`` context.  The engine's verification (its IC sum
    is an MSM on the host CPU) ran with the GPU's lane counts, ~100x slower
    (bench/NOTES.md, session 13)."""
    from jaxprove import groth16 as G
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    cpu = jax.devices("cpu")[0]
    on_cpu = jax.device_put(jnp.zeros((2, 12, 3), jnp.uint32), cpu)
    assert M.default_config() is M.GPU_CONFIG
    assert M.default_config(np.zeros(3)) is M.GPU_CONFIG          # host data: where the default runs
    assert M.default_config(on_cpu) is M.CPU_CONFIG
    assert M.default_config([None, {"b": on_cpu}]) is M.CPU_CONFIG
    with jax.default_device(cpu):
        assert M.default_config() is M.CPU_CONFIG
    with jax.default_device("cpu"):
        assert M.default_config() is M.CPU_CONFIG
    seen = []

    class Seen(Exception):
        pass

    def msm(curve, bases, scalars, cfg):
        seen.append(cfg)
        raise Seen

    monkeypatch.setattr(M, "msm", msm)
    with pytest.raises(Seen):
        G._ic_sum(on_cpu, jnp.zeros((8, 2), jnp.uint32))
    assert seen[0].lanes == M.CPU_CONFIG.lanes and seen[0].split_threshold is None


def test_every_top_level_program_with_the_bucket_loop_takes_command_buffers():
    """The programs that run ``bucket_sums``' while loop (directly or through a helper)
    compile with ``COMMAND_BUFFER`` (hypothesis 87): a new one without it would hold the
    dispatching thread for its device time on the GPU again.  Nested programs run with
    the outer one's options."""
    import inspect
    calls = ("bucket_sums(", "_msm_core(", "_bits_jit(")
    holders = {name for name, f in vars(M).items()
               if hasattr(f, "jitted") and hasattr(f, "compiler_options")
               and any(c in inspect.getsource(inspect.unwrap(f)) for c in calls)}
    assert {"_msm_jit", "_msm_shifted_jit", "_chunk_jit", "_bits_jit", "_bits_add_jit",
            "_many_jit"} <= holders
    for name in holders:
        assert getattr(M, name).compiler_options == M.COMMAND_BUFFER, name
    assert "WHILE" in M.COMMAND_BUFFER["xla_gpu_enable_command_buffer"].split(",")
