"""Shared test helpers for the arithmetic core (ops/).

Every test compares ops against an *independent* reference: Python integers
(Fr, Fq, Fq2 by hand) or py_ecc (Fq2, G1, G2, point compression).

Compile-time discipline (CI is a 2-core CPU box): each distinct (kernel,
batch shape) pair costs a compile, so the files stick to a few batch sizes:
``N_FIELD`` lanes for Fr/Fq, ``N_EXT`` for Fq2 and ``N_CURVE`` for G1/G2
(shared with the encoding tests, whose decode path runs sqrt/in_subgroup on
the same shapes).  ``lanes()`` chunks longer host lists into such batches.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from bench import maps  # noqa: E402  (the process's memory mappings)
try:
    from py_ecc import bls12_381 as b  # noqa: E402
    from py_ecc import optimized_bls12_381 as ob  # noqa: E402
    from py_ecc.bls import point_compression as pc  # noqa: E402
except ImportError:     # the GPU machine has no py_ecc: only gpu-marked tests run there
    b = ob = pc = None

# Independent constants (from py_ecc, not from ops; the published BLS12-381 moduli without it).
P = int(b.field_modulus) if b else int(
    "1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab",
    16)
R = int(b.curve_order) if b else int(
    "73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001", 16)

N_FIELD = 64
N_EXT = 16
N_CURVE = 16


# ---------------------------------------------------------------- pytest plumbing
def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow (long on the CPU)")
    parser.addoption("--jax-cache", action="store_true", default=False,
                     help="use JAX's persistent compilation cache (jaxprove.cache: "
                          "$JAXPROVE_CACHE or ~/.cache/jaxprove/xla); off by default")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped elsewhere)")
    config.addinivalue_line("markers", "slow: long on the CPU; run with --runslow")
    if config.getoption("--jax-cache"):
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()


def _has_gpu() -> bool:
    try:
        return jax.devices()[0].platform == "gpu"
    except RuntimeError:  # pragma: no cover
        return False


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.  One pytest process
    compiles thousands of XLA:CPU programs; kept alive they accumulate JIT code
    mappings, and late in a full run XLA's CPU compiler crashed (SIGSEGV /
    abort inside backend_compile) in tests that pass when run alone, which
    points at that (vm.max_map_count is 65530 here)."""
    yield
    jax.clear_caches()


_MAP_LIMIT = maps.map_limit()


@pytest.fixture(autouse=True)
def _release_before_the_map_limit():
    """Drop JAX's compiled programs after a test that leaves the process with
    more than half of ``vm.max_map_count`` memory mappings.  XLA:CPU's JIT
    maps three pages per compiled kernel (~1,900 mappings per MSM program
    in interpret mode), so test_msm.py alone reached 64,138 of 65,530 and
    the next compile aborted inside backend_compile_and_load (session 49:
    the per-module release above is not enough for one large module)."""
    yield
    if _MAP_LIMIT and (maps.mappings() or 0) > _MAP_LIMIT // 2:
        jax.clear_caches()


def pytest_collection_modifyitems(config, items):
    run_slow = config.getoption("--runslow")
    gpu = _has_gpu()
    skip_slow = pytest.mark.skip(reason="slow: pass --runslow to run")
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_oracle = pytest.mark.skip(reason="py_ecc is not installed: only gpu-marked tests run")
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not gpu:
            item.add_marker(skip_gpu)
        if ob is None and "gpu" not in item.keywords:
            item.add_marker(skip_oracle)


# ---------------------------------------------------------------- batching
def chunked(xs, n):
    return [xs[i:i + n] for i in range(0, len(xs), n)]


def pad(xs, n, fill):
    """Pad a list to a multiple of n lanes (keeps the compiled shapes fixed)."""
    k = -(-len(xs) // n) * n if xs else n
    return list(xs) + [fill] * (k - len(xs))


def lanes(F, fn, *cols, n=N_FIELD, fill=0, out=None):
    """Apply a device function lane-wise to host int columns of equal length,
    in fixed batches of n lanes.  ``out`` converts each output array back to a
    host list (default ``F.to_int``); returns a list (or a tuple of lists for
    several outputs) with the padding dropped."""
    m = len(cols[0])
    assert all(len(c) == m for c in cols)
    cols = [pad(c, n, fill) for c in cols]
    results = None
    for start in range(0, len(cols[0]), n):
        args = [jnp.asarray(F.from_int(c[start:start + n])) for c in cols]
        res = fn(*args)
        multi = isinstance(res, tuple)
        res = res if multi else (res,)
        conv = out or [F.to_int] * len(res)
        if not isinstance(conv, (list, tuple)):
            conv = [conv] * len(res)
        vals = [list(np.asarray(c(r)).reshape(-1).tolist()) for c, r in zip(conv, res)]
        if results is None:
            results = [[] for _ in vals]
            was_multi = multi
        for acc, v in zip(results, vals):
            acc.extend(v)
    results = [[int(v) if not isinstance(v, (bool, np.bool_)) else bool(v) for v in r[:m]]
               for r in results]
    return tuple(results) if was_multi else results[0]


def to_bool_list(x):
    return [bool(v) for v in np.asarray(x).reshape(-1)]


# ---------------------------------------------------------------- edge values
def edge_values(p: int) -> list[int]:
    """0, 1, 2, p-1, p-2, (p-1)/2, (p+1)/2, limb boundaries 2^(32k)-1, 2^(32k),
    2^(32k)+1 below p, values near p at limb boundaries, and the elements
    whose *Montgomery form* sits at limb boundaries."""
    L = -(-p.bit_length() // 32)
    Rm = pow(2, 32 * L, p)
    Rinv = pow(Rm, -1, p)
    vals = [0, 1, 2, 3, p - 1, p - 2, p - 3, (p - 1) // 2, (p + 1) // 2, (p - 3) // 2]
    for k in range(1, L + 1):
        for v in (2 ** (32 * k) - 1, 2 ** (32 * k), 2 ** (32 * k) + 1, p - 2 ** (32 * (k - 1))):
            if 0 <= v < p:
                vals.append(v)
    vals.append(2 ** (p.bit_length() - 1))          # top bit only
    vals.append(2 ** (p.bit_length() - 1) - 1)
    # elements whose Montgomery representation is 1, 2^(32k)-1, p-1, ...
    for raw in [1, p - 1, Rm, Rm - 1] + [2 ** (32 * k) - 1 for k in range(1, L)]:
        vals.append(raw % p * Rinv % p)
    out, seen = [], set()
    for v in vals:
        v %= p
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


# ---------------------------------------------------------------- Fq2 by hand (u^2 = -1)
def f2(c0, c1=0):
    return (c0 % P, c1 % P)


def f2add(a, b_):
    return ((a[0] + b_[0]) % P, (a[1] + b_[1]) % P)


def f2sub(a, b_):
    return ((a[0] - b_[0]) % P, (a[1] - b_[1]) % P)


def f2neg(a):
    return ((-a[0]) % P, (-a[1]) % P)


def f2mul(a, b_):
    return ((a[0] * b_[0] - a[1] * b_[1]) % P, (a[0] * b_[1] + a[1] * b_[0]) % P)


def f2pow(a, e):
    r, base = (1, 0), a
    while e:
        if e & 1:
            r = f2mul(r, base)
        base = f2mul(base, base)
        e >>= 1
    return r


def f2inv(a):
    n = (a[0] * a[0] + a[1] * a[1]) % P
    t = pow(n, P - 2, P)
    return (a[0] * t % P, (-a[1]) * t % P)


def f2_is_square(a) -> bool:
    """a is a square in Fq2 iff its norm is a square in Fq (0 counts)."""
    n = (a[0] * a[0] + a[1] * a[1]) % P
    return n == 0 or pow(n, (P - 1) // 2, P) == 1


# ---------------------------------------------------------------- py_ecc conversions
def pe_fq2(c):
    return b.FQ2([int(c[0]), int(c[1])])


def from_pe_fq2(x):
    return tuple(int(c) for c in x.coeffs)


def to_pyecc(C, pt):
    """Host affine point (ops convention) -> py_ecc (non-optimized) point."""
    if pt is None:
        return None
    x, y = pt
    if is_g2(C):
        return (pe_fq2(x), pe_fq2(y))
    return (b.FQ(x), b.FQ(y))


def from_pyecc(C, pt):
    if pt is None:
        return None
    x, y = pt
    if is_g2(C):
        return (from_pe_fq2(x), from_pe_fq2(y))
    return (int(x), int(y))


def to_optimized(C, pt):
    """Host affine point -> py_ecc optimized (projective) point."""
    if pt is None:
        return ob.Z2 if is_g2(C) else ob.Z1
    x, y = pt
    if is_g2(C):
        return (ob.FQ2(list(x)), ob.FQ2(list(y)), ob.FQ2.one())
    return (ob.FQ(x), ob.FQ(y), ob.FQ.one())


def pyecc_compress(C, pt) -> bytes:
    """py_ecc's compressed encoding as bytes (G2: z1 = c1 with flags, then z2 = c0)."""
    if is_g2(C):
        z1, z2 = pc.compress_G2(to_optimized(C, pt))
        return int(z1).to_bytes(48, "big") + int(z2).to_bytes(48, "big")
    return int(pc.compress_G1(to_optimized(C, pt))).to_bytes(48, "big")


def pyecc_decompress(C, data: bytes):
    if is_g2(C):
        z1, z2 = int.from_bytes(data[:48], "big"), int.from_bytes(data[48:], "big")
        pt = pc.decompress_G2((z1, z2))
    else:
        pt = pc.decompress_G1(int.from_bytes(data, "big"))
    if ob.is_inf(pt):
        return None
    x, y = ob.normalize(pt)
    if is_g2(C):
        return (tuple(int(c) for c in x.coeffs), tuple(int(c) for c in y.coeffs))
    return (int(x), int(y))


def is_g2(C) -> bool:
    return C.name == "G2"


def pe_gen(C):
    return b.G2 if is_g2(C) else b.G1


def curve_b(C):
    """The curve constant b as an independent value (py_ecc)."""
    return from_pe_fq2(b.b2) if is_g2(C) else int(b.b)


def on_curve_host(C, pt) -> bool:
    if pt is None:
        return True
    x, y = pt
    if is_g2(C):
        return f2sub(f2mul(y, y), f2add(f2mul(f2mul(x, x), x), curve_b(C))) == (0, 0)
    return (y * y - x ** 3 - curve_b(C)) % P == 0


def host_neg(C, pt):
    if pt is None:
        return None
    x, y = pt
    return (x, f2neg(y)) if is_g2(C) else (x, (-y) % P)


def pe_mul(C, pt, k):
    """k·pt via py_ecc (independent reference), host points in and out."""
    return from_pyecc(C, b.multiply(to_pyecc(C, pt), k % R) if k % R else None)


def pe_mul_raw(C, pt, k):
    """k·pt via py_ecc without reducing k mod r (for non-subgroup points)."""
    if k == 0:
        return None
    return from_pyecc(C, b.multiply(to_pyecc(C, pt), k))


def pe_add(C, p1, p2):
    return from_pyecc(C, b.add(to_pyecc(C, p1), to_pyecc(C, p2)))


# ---------------------------------------------------------------- device points
def field_of(C):
    from ops.field import Fq
    from ops.tower import Fq2
    return Fq2 if is_g2(C) else Fq


def _coord_array(C, vals):
    F = field_of(C)
    if is_g2(C):
        return F.from_int(np.array([tuple(v) for v in vals], dtype=object).reshape(len(vals), 2))
    return F.from_int(np.array(vals, dtype=object).reshape(len(vals)))


def rand_nonzero(C, rng):
    if is_g2(C):
        while True:
            z = (rng.randrange(P), rng.randrange(P))
            if z != (0, 0):
                return z
    return rng.randrange(1, P)


def projective_array(C, pts, rng, scale=True):
    """Host affine points -> a projective device array (3, *fp, k) with a
    random Z per point (identity as (0 : λ : 0)), built by hand."""
    mul = f2mul if is_g2(C) else (lambda a, c: a * c % P)
    one = (1, 0) if is_g2(C) else 1
    zero = (0, 0) if is_g2(C) else 0
    X, Y, Z = [], [], []
    for pt in pts:
        lam = rand_nonzero(C, rng) if scale else one
        if pt is None:
            X.append(zero), Y.append(lam), Z.append(zero)
        else:
            X.append(mul(pt[0], lam)), Y.append(mul(pt[1], lam)), Z.append(lam)
    return jnp.asarray(np.stack([_coord_array(C, X), _coord_array(C, Y), _coord_array(C, Z)]))


def raw_projective_array(C, coords):
    """(X, Y, Z) host coordinate triples -> projective device array, no checks."""
    X, Y, Z = zip(*coords)
    return jnp.asarray(np.stack([_coord_array(C, list(X)), _coord_array(C, list(Y)),
                                 _coord_array(C, list(Z))]))


def affine_array(C, pts):
    """Host affine points (None -> (0, 0)) -> affine device array, built by hand
    (no on-curve check, so bad points can be made)."""
    zero = (0, 0) if is_g2(C) else 0
    xs = [zero if pt is None else pt[0] for pt in pts]
    ys = [zero if pt is None else pt[1] for pt in pts]
    return jnp.asarray(np.stack([_coord_array(C, xs), _coord_array(C, ys)]))


def read_projective(C, arr):
    """Projective device array -> host affine points (None = identity) by
    host arithmetic only (independent of ops' to_affine)."""
    F = field_of(C)
    arr = np.asarray(arr)
    cs = [F.to_int(arr[i]) for i in range(3)]
    out = []
    for X, Y, Z in zip(*[list(c) for c in cs]):
        if is_g2(C):
            X, Y, Z = tuple(map(int, X)), tuple(map(int, Y)), tuple(map(int, Z))
            if Z == (0, 0):
                assert X == (0, 0) and Y != (0, 0), f"bad identity encoding {(X, Y, Z)}"
                out.append(None)
                continue
            zi = f2inv(Z)
            out.append((f2mul(X, zi), f2mul(Y, zi)))
        else:
            X, Y, Z = int(X), int(Y), int(Z)
            if Z == 0:
                assert X == 0 and Y != 0, f"bad identity encoding {(X, Y, Z)}"
                out.append(None)
                continue
            zi = pow(Z, P - 2, P)
            out.append((X * zi % P, Y * zi % P))
    return out


def read_affine(C, arr):
    F = field_of(C)
    arr = np.asarray(arr)
    xs, ys = F.to_int(arr[0]), F.to_int(arr[1])
    out = []
    for x, y in zip(list(xs), list(ys)):
        if is_g2(C):
            x, y = tuple(map(int, x)), tuple(map(int, y))
            out.append(None if x == (0, 0) and y == (0, 0) else (x, y))
        else:
            x, y = int(x), int(y)
            out.append(None if x == 0 and y == 0 else (x, y))
    return out


# ---------------------------------------------------------------- reference data
def _fq2_sqrt(a):
    r = pc.modular_squareroot_in_FQ2(ob.FQ2([a[0], a[1]]))
    if r is None:
        return None
    r = tuple(int(c) for c in r.coeffs)
    assert f2mul(r, r) == (a[0] % P, a[1] % P)
    return r


def find_non_subgroup_points(C, count):
    """Points on the curve but outside the order-r subgroup: x = 0, 1, 2, ...
    (G2: x = i + u) until x^3 + b is a square; membership is checked with
    py_ecc (r·Q != O)."""
    found = []
    i = 0
    while len(found) < count:
        if is_g2(C):
            x = (i, 1)
            rhs = f2add(f2mul(f2mul(x, x), x), curve_b(C))
            y = _fq2_sqrt(rhs)
        else:
            x = i
            rhs = (x ** 3 + curve_b(C)) % P
            y = pow(rhs, (P + 1) // 4, P)
            y = y if y * y % P == rhs else None
        i += 1
        if y is None:
            continue
        pt = (x, y)
        assert on_curve_host(C, pt)
        if pe_mul_raw(C, pt, R) is not None:      # r·Q != O: not in the subgroup
            found.append(pt)
    return found


@pytest.fixture(scope="session")
def curve_refs():
    """Per curve: random scalars and their multiples of the generator (py_ecc),
    plus points outside the subgroup.  Built once per session."""
    from ops.curve import G1, G2
    rng = random.Random(20240601)
    refs = {}
    for C in (G1, G2):
        ks = [rng.randrange(1, R) for _ in range(N_CURVE)]
        pts = [pe_mul(C, from_pyecc(C, pe_gen(C)), k) for k in ks]
        refs[C.name] = {"scalars": ks, "points": pts,
                        "bad": find_non_subgroup_points(C, 3)}
    return refs


@pytest.fixture
def rng():
    return random.Random(12345)
