"""NTT over Fr against the O(n^2) evaluation with Python ints."""
import random

import jax.numpy as jnp
import numpy as np
import pytest

from ops import ntt as N
from ops.field import Fr

P = Fr.p


@pytest.fixture(scope="module", params=[0, 1, 3, 5])
def case(request):
    k = request.param
    rng = random.Random(100 + k)
    n = 1 << k
    xs = [Fr.random_ints(n, rng) for _ in range(2)]
    xs[1][: min(n, 2)] = [0, P - 1][: min(n, 2)]            # edge values
    x = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))  # (8, 2, n): a batch of two
    return k, xs, x, N.domain(k)


def rows(a):
    return [[int(v) for v in r] for r in Fr.to_int(a)]


def test_root_of_unity_has_exact_order():
    for k in (1, 5, 32):
        w = N.root_of_unity(k)
        assert pow(w, 1 << k, P) == 1 and pow(w, 1 << (k - 1), P) != 1
    with pytest.raises(ValueError):
        N.root_of_unity(33)


def test_ntt_equals_naive_evaluation(case):
    k, xs, x, dom = case
    w = N.root_of_unity(k)
    assert rows(N.ntt(x, dom)) == [N.naive_ntt(r, w) for r in xs]


def test_intt_inverts_ntt(case):
    _, xs, x, dom = case
    assert rows(N.intt(N.ntt(x, dom), dom)) == xs
    assert rows(N.ntt(N.intt(x, dom), dom)) == xs


def test_coset_ntt_evaluates_on_shifted_domain(case):
    k, xs, x, dom = case
    w = N.root_of_unity(k)
    pts = [N.GENERATOR * pow(w, j, P) % P for j in range(1 << k)]
    want = [[sum(c * pow(z, i, P) for i, c in enumerate(r)) % P for z in pts] for r in xs]
    X = N.coset_ntt(x, dom)
    assert rows(X) == want
    assert rows(N.coset_intt(X, dom)) == xs


@pytest.mark.parametrize("log_n,batch,chunk", [(0, 1, 4), (5, 1, 4), (5, 3, 8), (6, 2, 1 << 22)])
def test_scale_by_powers_equals_python_powers(log_n, batch, chunk):
    """x_i·base^i·scale from the two short tables, chunk by chunk (small
    chunks: the in-place loop; a large one: one product), against ints."""
    rng = random.Random(log_n * 10 + batch)
    n, base, scale = 1 << log_n, rng.randrange(2, P), rng.randrange(1, P)
    xs = [Fr.random_ints(n, rng) for _ in range(batch)]
    x = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))     # (8, batch, n)
    table = N.power_table(base, log_n, scale)
    assert table.lo.shape[1] * table.hi.shape[1] == n and table.lo.shape[1] >= table.hi.shape[1]
    got = rows(N.scale_by_powers(x, table, chunk))
    assert got == [[v * pow(base, i, P) * scale % P for i, v in enumerate(r)] for r in xs]


def test_domain_holds_no_length_n_coset_vectors():
    """A 2^12 domain's coset data is O(√n) (at 2^27 the old length-n coset
    vectors were 8 GiB of a resident proof's device memory)."""
    dom = N.domain(12)
    assert dom.twiddles.shape == (8, 1 << 11)
    sizes = [a.shape[-1] for a in (*dom.coset, *dom.inv_coset)]
    assert sizes == [64, 64, 64, 64]


def test_bad_input_is_named():
    dom = N.domain(2)
    with pytest.raises(ValueError, match="domain has 4"):
        N.ntt(jnp.zeros((8, 8), jnp.uint32), dom)
    with pytest.raises(ValueError, match="Fr elements"):
        N.ntt(jnp.zeros((12, 4), jnp.uint32), dom)
    for f in (N.coset_ntt, N.coset_intt, N.coset_ntt_from_bitrev, N.coset_intt_to_bitrev, N.to_coset):
        with pytest.raises(ValueError, match=f"{f.__name__}: the domain was built with cosets=False"):
            f(jnp.zeros((8, 4), jnp.uint32), N.domain(2, cosets=False))


def test_unknown_bit_reverse_form_is_named(monkeypatch):
    monkeypatch.setattr(N, "BIT_REVERSE", "tild")
    with pytest.raises(ValueError, match="BIT_REVERSE must be one of"):
        N._bit_reverse_last(jnp.zeros((8, 4), jnp.uint32), 2)   # where ntt reads it, traced


@pytest.mark.parametrize("k,batch,loaded", [(1, 1, False), (3, 2, False), (4, 3, False),
                                             (7, 2, True)])
def test_inplace_passes_equal_the_naive_transform(k, batch, loaded):
    """``_inplace`` (one Pallas kernel per group of stages, reading and
    writing the strided slices in place; here in interpret mode, with 16
    lanes per program so that a pass spans several programs along both grid
    axes) against the O(n²) evaluation, forward and inverse, over a batch;
    ``loaded``: every twiddle loaded from the table (groups of 3, 3 and 1
    stages at k = 7, h up to 64 over 16-lane tiles)."""
    from ops.elementwise import KernelConfig
    rng = random.Random(300 + k)
    n = 1 << k
    xs = [Fr.random_ints(n, rng) for _ in range(batch)]
    x = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))
    dom = N.domain(k)
    xb = jnp.take(x, N._bit_reverse(jnp.arange(n, dtype=jnp.int32), k), axis=-1)
    cfg = KernelConfig(bn=16, interpret=True)
    w = N.root_of_unity(k)
    assert rows(N._inplace(xb, dom.twiddles, k, False, cfg, loaded=loaded)) == \
        [N.naive_ntt(r, w) for r in xs]
    inv = rows(N._inplace(xb, dom.inv_twiddles, k, True, cfg, loaded=loaded))  # unscaled: no 1/n
    assert inv == [N.naive_ntt(r, pow(w, -1, P)) for r in xs]


def test_radix8_block_products():
    """Products per radix-8 block: 12 butterflies, plus 6 to derive the
    twiddles from W (2 squarings, 4 distinct products by constants: W²·ω₄
    once, not once per butterfly) or none when they are loaded
    (hypothesis 54); in the first pass (h = 1, twiddles constant) the 7
    butterflies whose twiddle is 1 skip their product."""
    class Count:
        def __init__(self):
            self.products = 0

        def mul(self, a, b):
            self.products += 1
            return a

        def sqr(self, a):
            self.products += 1
            return a

        add = sub = lambda self, a, b: a
        const = lambda self, v, like: v
        like = lambda self, a: a

    for dif in (False, True):
        derived, loaded, first = Count(), Count(), Count()
        N._radix_formula(3, False, dif)(derived, *range(8), "W")
        N._radix_formula(3, False, dif, "loaded")(loaded, *range(8), lambda t, e: (t, e))
        N._radix_formula(3, False, dif, "first")(first, *range(8), "W")
        assert (derived.products, loaded.products, first.products) == (18, 12, 5)
    with pytest.raises(ValueError, match="twiddles must be one of"):
        N._radix_formula(3, False, False, "cached")


def test_pass_blocks_divide_the_pass():
    for m, h, lanes in [(1, 1, 128), (3 << 10, 1, 128), (24, 64, 128), (8, 1 << 20, 128),
                        (6, 4, 16)]:
        bm, bh = N._pass_blocks(m, h, lanes)
        assert m % bm == 0 and h % bh == 0 and bm * bh <= lanes
        assert bh == min(h, lanes) and (bm * bh == lanes or bm == m & -m)


def test_inplace_pass_lowers_for_cuda():
    """The in-place pass's Pallas kernel lowers to Triton (4-D blocks read
    with integer indices), checked on a CPU-only host: one kernel per group
    of stages, 4 groups for 2^12, DIT and DIF."""
    import jax
    from ops.elementwise import KernelConfig
    k = 12
    x = jnp.zeros((8, 3, 1 << k), jnp.uint32)
    dom = N.domain(k, cosets=False)
    for dif in (False, True):                       # and the DIF passes (hypothesis 34)
        for loaded in (False, True):                # and the twiddles loaded (hypothesis 54)
            f = jax.jit(lambda x, tw: N._inplace(x, tw, k, False, KernelConfig(), dif, loaded))
            text = f.trace(x, dom.twiddles).lower(lowering_platforms=("cuda",)).as_text()
            assert text.count("__gpu$xla.gpu.triton") == 4


def test_passes_are_named():
    with pytest.raises(ValueError, match="passes must be one of"):
        N.ntt(jnp.zeros((8, 4), jnp.uint32), N.domain(2), passes="fast")


def test_bitrev_order_transforms_skip_the_gathers():
    """Hypothesis 34's transforms against the natural-order ones (themselves
    checked against the O(n²) evaluation above): the DIF inverse gives
    bit-reversed coefficients, the coset DIT takes them, the coset DIF
    inverse gives them back — the round trip of Groth16's h with no gather
    in between (k = 5: two groups of passes, the last of 2 stages; one size
    only, the suite's time is spent on compiles)."""
    k = 5
    rng = random.Random(500)
    xs = [Fr.random_ints(1 << k, rng) for _ in range(2)]
    xs[1][:2] = [0, P - 1]
    x = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))
    dom = N.domain(k)
    brev = lambda a: [[r[int(N._bit_reverse(jnp.uint32(i), k))] for i in range(1 << k)] for r in a]
    coef = N.intt_to_bitrev(x, dom)
    assert rows(coef) == brev(rows(N.intt(x, dom)))
    ev = N.coset_ntt_from_bitrev(coef, dom)
    assert rows(ev) == rows(N.coset_ntt(N.intt(x, dom), dom))
    assert rows(N.to_coset(x, dom)) == rows(ev)      # n⁻¹ folded into the coset powers
    back = N.coset_intt_to_bitrev(ev, dom)
    assert rows(back) == rows(coef)
    assert rows(N.bit_reverse(back)) == rows(N.intt(x, dom))


@pytest.mark.parametrize("k,batch", [(7, 2)])     # groups of 3, 3, 1 stages, reversed
@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_inplace_dif_passes_are_the_transpose(k, batch):
    """``_inplace(dif=True)`` (the DIT passes transposed: groups reversed,
    Gentleman–Sande blocks; interpret mode, 16 lanes per program) maps
    natural order to the bit-reversed transform, forward and inverse; equal
    to the "parts" form."""
    from ops.elementwise import KernelConfig
    rng = random.Random(400 + k)
    n = 1 << k
    xs = [Fr.random_ints(n, rng) for _ in range(batch)]
    x = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))
    dom = N.domain(k)
    cfg = KernelConfig(bn=16, interpret=True)
    w = N.root_of_unity(k)
    rev = [int(v) for v in N._bit_reverse(jnp.arange(n, dtype=jnp.int32), k)]
    for tw, root, inverse in ((dom.twiddles, w, False), (dom.inv_twiddles, pow(w, -1, P), True)):
        want = [[t[rev[i]] for i in range(n)] for t in (N.naive_ntt(r, root) for r in xs)]
        for loaded in (False, True):
            assert rows(N._inplace(x, tw, k, inverse, cfg, dif=True, loaded=loaded)) == want
        assert rows(N._parts(x, tw, k, inverse, dif=True)) == want


def test_scale_by_powers_in_bit_reversed_order():
    """``bitrev=True``: x_i·base^rev(i), chunked and whole; a length that is
    not a power of two is refused by name."""
    rng = random.Random(7)
    log_n, base = 6, rng.randrange(2, P)
    n = 1 << log_n
    xs = [Fr.random_ints(n, rng)]
    x = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))
    table = N.power_table(base, log_n)
    rev = [int(v) for v in N._bit_reverse(jnp.arange(n, dtype=jnp.int32), log_n)]
    want = [[v * pow(base, rev[i], P) % P for i, v in enumerate(xs[0])]]
    assert rows(N.scale_by_powers(x, table, 8, bitrev=True)) == want
    assert rows(N.scale_by_powers(x, table, 1 << 22, bitrev=True)) == want
    with pytest.raises(ValueError, match="power-of-two length"):
        N.scale_by_powers(x[..., :48], table, bitrev=True)


@pytest.mark.parametrize("log_n,batch,lanes", [(6, 2, 16), (3, 3, 16), (7, 1, 32)])
def test_scale_pass_kernel_equals_python_powers(log_n, batch, lanes):
    """``_scale_pass`` (the factors loaded from the table inside ONE Pallas
    kernel, hypothesis 70; interpret mode): natural and bit-reversed
    exponents against Python ints, with programs inside one vector (n >
    lanes) and a vector per program (n < lanes); a table longer than x (the
    exponents read modulo neither of its halves)."""
    from ops.elementwise import KernelConfig
    rng = random.Random(700 + log_n)
    n, base, scale = 1 << log_n, rng.randrange(2, P), rng.randrange(1, P)
    xs = [Fr.random_ints(n, rng) for _ in range(batch)]
    x = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))
    cfg = KernelConfig(bn=lanes, interpret=True)
    rev = [int(v) for v in N._bit_reverse(jnp.arange(n, dtype=jnp.int32), log_n)]
    for table_log in (log_n, log_n + 3):
        table = N.power_table(base, table_log, scale)
        for bitrev in (False, True):
            e = rev if bitrev else list(range(n))
            want = [[v * pow(base, e[i], P) * scale % P for i, v in enumerate(r)] for r in xs]
            assert rows(N._scale_pass(jnp.copy(x), table, bitrev, cfg)) == want


def test_scale_pass_lowers_for_cuda_and_forms_are_named():
    """The kernel lowers to one Triton call (gathers from the tables by
    computed indices), both orders; an unknown form or a table too short is
    refused by name."""
    import jax
    from ops.elementwise import KernelConfig
    x = jnp.zeros((8, 3, 1 << 12), jnp.uint32)
    table = N.power_table(N.GENERATOR, 12)
    for bitrev in (False, True):
        f = jax.jit(lambda x, t: N._scale_pass(x, t, bitrev, KernelConfig()))
        text = f.trace(x, table).lower(lowering_platforms=("cuda",)).as_text()
        assert text.count("__gpu$xla.gpu.triton") == 1
    with pytest.raises(ValueError, match="form must be one of"):
        N.scale_by_powers(x, table, form="fast")
    with pytest.raises(ValueError, match="the table has powers for 2048"):
        N.scale_by_powers(x, N.power_table(N.GENERATOR, 11))


@pytest.mark.parametrize("log_n,t,batch", [(6, 3, 2), (7, 2, 1), (4, 2, 3)])
def test_tiled_bit_reverse_equals_the_gather(log_n, t, batch):
    """``_tiled_bit_reverse`` (hypothesis 72: 2^t × 2^t tiles, the reversal
    of their 2t index bits inside a program; interpret mode) against the
    gather and against rev computed with Python ints, batch axes kept."""
    from ops.elementwise import KernelConfig
    n = 1 << log_n
    x = jnp.arange(8 * batch * n, dtype=jnp.uint32).reshape(8, batch, n)
    got = N._tiled_bit_reverse(x, log_n, t, KernelConfig(interpret=True))
    rev = [int(format(i, f"0{log_n}b")[::-1], 2) for i in range(n)]
    assert np.array_equal(np.asarray(got), np.asarray(x)[..., rev])
    assert np.array_equal(np.asarray(got), np.asarray(N._gather_bit_reverse(x, log_n)))


def test_tiled_bit_reverse_lowers_for_cuda():
    import jax
    from ops.elementwise import KernelConfig
    x = jnp.zeros((8, 3, 1 << 12), jnp.uint32)
    f = jax.jit(lambda x: N._tiled_bit_reverse(x, 12, N.TILE_LOG, KernelConfig()))
    assert f.trace(x).lower(lowering_platforms=("cuda",)).as_text().count(
        "__gpu$xla.gpu.triton") == 1
