"""Poseidon over BLS12-381 Fr as Filecoin uses it (neptune, ``Strength::Standard``).

Parameters (neptune src/{poseidon,round_numbers,round_constants,mds,preprocessing}.rs):

* width t = arity + 1, S-box x^5, R_F = 8 full rounds (4 before, 4 after the
  R_P partial rounds); R_P from the security inequalities of the Poseidon paper
  (M = 128, n = 256) plus neptune's margin (R_F + 2, ⌈1.075·R_P⌉), evaluated
  in float32 as neptune does: 55 / 56 / 57 / 57 for t = 3 / 5 / 9 / 12.
* round constants: the Grain LFSR of ``create_rcs_grain.sage`` (80-bit state
  field=1, sbox=1, n=255, t, R_F, R_P, thirty 1s; feedback
  b[i+80] = b[i+62]⊕b[i+51]⊕b[i+38]⊕b[i+23]⊕b[i+13]⊕b[i]; 160 bits discarded;
  self-shrinking pairs; 255-bit MSB-first candidates, rejected if ≥ r).
* MDS: the Cauchy matrix M[i][j] = 1/(i + t + j) (symmetric).
* state[0] is the domain tag (MerkleTree: 2^arity − 1; Custom(id): id·2^40;
  ConstantLength(n): n·2^64), the preimage fills state[1..]; the hash is
  state[1] after the permutation.

The permutation is computed in neptune's *optimized static* form, the form
its legacy circuit gadget follows (so the intermediates here are the gadget's
witness): the first round constants are added before the first S-boxes, the
compressed constants after each S-box, the last full round of the first half
multiplies by the pre-sparse matrix and partial round k by the sparse matrix
M''_k (dense first row and column, identity elsewhere).  Its output equals
the plain round-by-round Poseidon.

Arrays: a state is an Fr array ``(8, *S, t)`` (limb-major, Montgomery, any
batch shape S).  Inside the permutation it is ``(t, 8, *S)`` and a round is
ONE elementwise kernel over the ``(t, 8)`` element layout (``ops.elementwise``:
a Pallas kernel on CUDA, the register-machine interpreter on the CPU): a full
round is the t S-boxes plus the constant matrix as a rolled loop over its
rows (t products per step, the constants picked by select chains; the CPU
recorder unrolls it into t² products by constants); a partial round is one
S-box and the 2t − 1 products of its sparse matrix (ŵ, v passed as
arguments).  The round keys are arguments, so each group of rounds (3 full,
the pre-sparse one, R_P partial, 4 full) is one ``lax.scan`` over a single
jitted kernel: a permutation is a program of four kernels (CPU compile time
is per kernel site).

API: ``constants(arity)`` (cached), ``permutation_trace(state) -> Trace``,
``permutation(state)``, ``hash(preimage, tag=None)``, ``with_tag``,
``merkle_tag``, ``custom_tag``, ``constant_length_tag``, ``round_numbers(t)``,
``grain_round_constants(t, r_f, r_p)``, ``mds_matrix(t)``,
``compress_round_constants``, ``sparse_factors``.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ops.elementwise import KernelConfig, elementwise
from ops.field import R_FR, Fr

P = R_FR
SECURITY_BITS = 128         # M
PRIME_BITLEN = 256          # n as neptune's round_numbers.rs uses it
FIELD_BITS = 255            # the Grain LFSR's field size (r's bit length)


# ---------------------------------------------------------------- domain tags
def merkle_tag(arity: int) -> int:
    """HashType::MerkleTree: 2^arity − 1."""
    return (1 << arity) - 1


def custom_tag(ident: int) -> int:
    """HashType::Custom(CType::Arbitrary(id)): id·2^40 (id > 0)."""
    if ident <= 0:
        raise ValueError(f"custom_tag: the id must be positive, got {ident}")
    return ident << 40


def constant_length_tag(length: int) -> int:
    """HashType::ConstantLength(n): n·2^64."""
    return length << 64


# ---------------------------------------------------------------- round numbers
def _f32(x) -> np.float32:
    return np.float32(x)


def _secure_rf_min(t: int, rp: int) -> int:
    """The smallest R_F with (t, R_F, R_P) secure (round_numbers_are_secure,
    in float32 like neptune)."""
    n, m, tt, rpf = _f32(PRIME_BITLEN), _f32(SECURITY_BITS), _f32(t), _f32(rp)
    rf_stat = _f32(6.0) if m <= (n - _f32(3.0)) * (tt + _f32(1.0)) else _f32(10.0)
    rf_interp = _f32(0.43) * m + np.log2(tt) - rpf
    rf_grob_1 = _f32(0.21) * n - rpf
    rf_grob_2 = (_f32(0.14) * n - _f32(1.0) - rpf) / (tt - _f32(1.0))
    # Rust's `ceil(x) as usize` saturates negative values at 0
    return max(max(int(np.ceil(v)), 0) for v in (rf_stat, rf_interp, rf_grob_1, rf_grob_2))


@functools.lru_cache(maxsize=None)
def round_numbers(t: int) -> tuple[int, int]:
    """(R_F, R_P) for width t with neptune's security margin: among the secure
    (R_F even in 2..1000, R_P in 4..199), after R_F += 2 and
    R_P = ⌈1.075·R_P⌉, the fewest S-boxes t·R_F + R_P, ties to the smaller R_F
    (then the smaller R_P, the search order)."""
    if t < 2:
        raise ValueError(f"round_numbers: width t = {t} must be at least 2")
    best = None
    for rp in range(4, 200):
        rf = max(2, _secure_rf_min(t, rp))
        rf += rf % 2
        if rf > 1000:
            continue
        rf_m = rf + 2
        rp_m = int(np.ceil(_f32(1.075) * _f32(rp)))
        key = (t * rf_m + rp_m, rf_m)
        if best is None or key < best[0]:
            best = (key, (rf_m, rp_m))
    return best[1]


# ---------------------------------------------------------------- round constants
def grain_round_constants(t: int, r_f: int, r_p: int) -> list[int]:
    """The (R_F + R_P)·t round constants of the Grain LFSR (module docstring)."""
    init = (1 << 78) | (1 << 74) | (FIELD_BITS << 62) | (t << 50) | (r_f << 40) \
        | (r_p << 30) | ((1 << 30) - 1)
    b = [(init >> (79 - i)) & 1 for i in range(80)]      # b0 is the MSB

    def gen():
        i = len(b) - 80
        b.append(b[i + 62] ^ b[i + 51] ^ b[i + 38] ^ b[i + 23] ^ b[i + 13] ^ b[i])
        return b[-1]

    for _ in range(160):
        gen()

    def out_bit():
        while True:
            if gen():
                return gen()
            gen()

    consts = []
    while len(consts) < (r_f + r_p) * t:
        v = 0
        for _ in range(FIELD_BITS):
            v = (v << 1) | out_bit()
        if v < P:
            consts.append(v)
        if len(b) > 1 << 16:                              # keep the bit list short
            del b[:len(b) - 80]
    return consts


# ---------------------------------------------------------------- matrices mod r
def mds_matrix(t: int) -> list[list[int]]:
    """The Cauchy matrix M[i][j] = 1/(x_i + y_j), x = 0..t−1, y = t..2t−1."""
    return [[pow(i + t + j, -1, P) for j in range(t)] for i in range(t)]


def _mat_mul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) % P for j in range(len(b[0]))]
            for i in range(len(a))]


def _apply(m, v):
    """M·v (neptune's apply_matrix)."""
    return [sum(x * y for x, y in zip(row, v)) % P for row in m]


def _minor(m, i, j):
    return [[x for c, x in enumerate(row) if c != j] for r, row in enumerate(m) if r != i]


def _mat_inv(m):
    """Inverse mod r by Gauss–Jordan elimination."""
    n = len(m)
    a = [list(row) + [int(i == j) for j in range(n)] for i, row in enumerate(m)]
    for col in range(n):
        piv = next(r for r in range(col, n) if a[r][col] % P)
        a[col], a[piv] = a[piv], a[col]
        inv = pow(a[col][col], -1, P)
        a[col] = [x * inv % P for x in a[col]]
        for r in range(n):
            if r != col and a[r][col]:
                f = a[r][col]
                a[r] = [(x - f * y) % P for x, y in zip(a[r], a[col])]
    return [row[n:] for row in a]


def _factor(m):
    """(M', M'') with M = M'·M'' (neptune derive_mds_matrices): M' keeps M's
    minor with a unit corner, M'' is sparse: first row (M00, v), first column
    (M00, ŵ = M̂⁻¹·w), identity below."""
    t = len(m)
    m_hat_inv = _mat_inv(_minor(m, 0, 0))
    v = m[0][1:]
    w = [m[i][0] for i in range(1, t)]
    w_hat = _apply(m_hat_inv, w)
    m_prime = [[int(j == 0) for j in range(t)]] + [[0] + m[i][1:] for i in range(1, t)]
    m_dprime = [[m[0][0]] + v] + [[w_hat[i - 1]] + [int(j == i) for j in range(1, t)]
                                  for i in range(1, t)]
    return m_prime, m_dprime


def sparse_factors(m, n: int):
    """neptune factor_to_sparse_matrixes(M, n): (pre-sparse matrix, n sparse
    matrices as (ŵ = first column, v_rest = first row without its corner)),
    in the order the partial rounds use them."""
    cur, acc = m, []
    for _ in range(n):
        m_prime, m_dprime = _factor(cur)
        acc.append(m_dprime)
        cur = _mat_mul(m, m_prime)
    acc.reverse()
    sparse = [(tuple(row[0] for row in s), tuple(s[0][1:])) for s in acc]
    return cur, sparse


def compress_round_constants(t: int, r_f: int, r_p: int, rc: list[int], m_inv) -> list[int]:
    """neptune compress_round_constants with every partial round preprocessed:
    the first round's constants, then per S-box layer the constants added
    after it (full rounds: M⁻¹·next round's; partial rounds: one each, pushed
    back through M⁻¹), R_F·t + R_P in all."""
    keys = lambda r: rc[r * t:(r + 1) * t]
    h = r_f // 2
    res = list(keys(0))
    for i in range(h - 1):
        res += _apply(m_inv, keys(i + 1))
    final = h + r_p
    acc, partial = list(keys(final)), []
    for i in range(r_p):
        inv = _apply(m_inv, acc)
        partial.append(inv[0])
        inv[0] = 0
        acc = [(x + y) % P for x, y in zip(keys(final - i - 1), inv)]
    res += _apply(m_inv, acc)
    res += partial[::-1]
    for i in range(1, h):
        res += _apply(m_inv, keys(i + h + r_p))
    return res


class PoseidonConstants(NamedTuple):
    """All constants of one arity (canonical ints mod r)."""
    arity: int
    width: int
    full_rounds: int
    partial_rounds: int
    round_constants: tuple          # (R_F + R_P)·t, Grain order
    mds: tuple                      # t x t
    compressed: tuple               # R_F·t + R_P
    pre_sparse: tuple               # t x t
    sparse: tuple                   # R_P x (ŵ (t,), v_rest (t−1,))


@functools.lru_cache(maxsize=None)
def constants(arity: int) -> PoseidonConstants:
    """neptune's PoseidonConstants::<Fr, U{arity}> (Strength::Standard)."""
    if not isinstance(arity, int) or arity < 1:
        raise ValueError(f"poseidon: arity must be a positive int, got {arity!r}")
    t = arity + 1
    r_f, r_p = round_numbers(t)
    rc = grain_round_constants(t, r_f, r_p)
    m = mds_matrix(t)
    m_inv = _mat_inv(m)
    crc = compress_round_constants(t, r_f, r_p, rc, m_inv)
    pre, sparse = sparse_factors(m, r_p)
    assert len(crc) == r_f * t + r_p
    return PoseidonConstants(arity, t, r_f, r_p, tuple(rc), tuple(map(tuple, m)), tuple(crc),
                             tuple(map(tuple, pre)), tuple(sparse))


# ---------------------------------------------------------------- the permutation
def _sbox(ar, x, post=None):
    """(x², x⁴, x⁵ (+ post)) of one element."""
    l2, l4, l5 = _sboxes(ar, [x], [post])
    return l2[0], l4[0], l5[0]


def _sboxes(ar, xs, posts):
    """``_sbox`` of every element of a state (posts: a key each, or None),
    each power as ONE group of independent products (``ar.muls``: one rolled
    product in a table-mode kernel instead of t).  Returns the lists
    (x², x⁴, x⁵ + post)."""
    l2 = ar.muls([(x, x) for x in xs])
    l4 = ar.muls([(a, a) for a in l2])
    l5 = ar.muls(list(zip(xs, l4)))
    return l2, l4, [a if b is None else ar.add(a, b) for a, b in zip(l5, posts)]


def _pick(ar, i, values, like=None, const=False):
    """values[i]: i a Python int (the CPU recorder unrolls loops) or a traced
    loop index (a select chain); ``values`` are elements, or constant ints
    (``const``, shaped like ``like``)."""
    get = (lambda s: ar.const(values[s], like)) if const else (lambda s: values[s])
    if isinstance(i, int):
        return get(i)
    out = get(0)
    for s in range(1, len(values)):
        out = ar.select(i == s, get(s), out)
    return out


def _vec_mat(ar, v, m):
    """y_j = Σ_i v_i·m[i][j] for a constant matrix m (neptune's
    product_mds_with_matrix: the state as a row vector), as ONE loop over i
    (``ar.loop``: rolled in a kernel, and a step's t products one group, so
    a table-mode kernel holds one product, not t²; unrolled with constant
    operands on the CPU)."""
    like = ar.like(v[0])
    t = len(m)
    cols = [[m[i][j] % P for i in range(t)] for j in range(t)]

    def body(i, acc):
        vi = _pick(ar, i, v)
        terms = ar.muls([(vi, _pick(ar, i, cols[j], like, const=True)) for j in range(t)])
        return terms if acc is None else [ar.add(a, b) for a, b in zip(acc, terms)]

    return ar.loop(t - 1, lambda k, acc: body(k + 1, acc), body(0, None))


@functools.lru_cache(maxsize=None)
def _full_round_kernel(arity: int, matrix: str, config: KernelConfig = Fr.config):
    """One full round on states (t, 8, *S): every element's S-box plus its
    key (``post`` (t, 8), an argument), then the state times the constant
    matrix ``matrix`` ('mds' or 'pre_sparse').  Returns (x², x⁴, x⁵ + post,
    new state), each (t, 8, *S).  Jitted, so a shape is traced once."""
    c = constants(arity)
    t = c.width
    mat = c.mds if matrix == "mds" else c.pre_sparse

    def formula(ar, x, post):
        l2, l4, l5 = _sboxes(ar, x, post)
        return l2, l4, l5, _vec_mat(ar, l5, mat)

    lay = (t, Fr.L)
    return jax.jit(elementwise(formula, [lay, lay], [(lay, jnp.uint32)] * 4, _table_arith(),
                               config, name=f"poseidon{arity}_full_{matrix}"))


@functools.lru_cache(maxsize=None)
def _partial_round_kernel(arity: int, config: KernelConfig = Fr.config):
    """One partial round on states (t, 8, *S): element 0's S-box plus its key
    (8,), then the sparse matrix given as arguments ŵ (t, 8), v (t−1, 8):
    y_0 = Σ_i ŵ_i·x_i, y_j = x_j + v_j·x_0 (x_0 the S-box output).  Returns
    (x², x⁴, x⁵ + key) (8, *S) each and the new state (t, 8, *S)."""
    t = arity + 1

    def formula(ar, x, key, w_hat, v):
        l2, l4, l5 = _sbox(ar, x[0], key)
        xs = [l5] + list(x[1:])
        prods = ar.muls([(w_hat[i], xs[i]) for i in range(t)] +
                        [(v[j - 1], l5) for j in range(1, t)])
        y0 = prods[0]
        for i in range(1, t):
            y0 = ar.add(y0, prods[i])
        return l2, l4, l5, [y0] + [ar.add(x[j], prods[t + j - 1]) for j in range(1, t)]

    el = (Fr.L,)
    return jax.jit(elementwise(formula, [(t, Fr.L), el, (t, Fr.L), (t - 1, Fr.L)],
                               [(el, jnp.uint32)] * 3 + [((t, Fr.L), jnp.uint32)],
                               _table_arith(), config, name=f"poseidon{arity}_partial"))


def _table_arith():
    """Fr's formula layer with ``Unroll.table``: each group of independent
    products is one rolled loop, so a round kernel holds a few Montgomery
    products instead of up to 45 (Triton ops of Poseidon-8's full round
    25,031 -> 15,938, partial 12,373 -> 8,718; its witness program compiled
    for ~3 min on the H200: bench/NOTES.md hypothesis 21)."""
    base = Fr.base_arith
    return dataclasses.replace(base, unroll=dataclasses.replace(base.unroll, table=True))


@functools.lru_cache(maxsize=None)
def _device_constants(arity: int):
    """One arity's round data as Montgomery limb arrays (numpy): the first
    round's keys (8, t); the keys added after the S-boxes of the full rounds
    of the first half (R_F/2, t, 8) and of the second half but the last
    (R_F/2 − 1, t, 8); per partial round the key (R_P, 8), ŵ (R_P, t, 8) and
    v (R_P, t−1, 8)."""
    c = constants(arity)
    t, h, rp = c.width, c.full_rounds // 2, c.partial_rounds
    crc = list(c.compressed)
    vec = lambda xs: np.ascontiguousarray(Fr.from_int(np.asarray(xs, dtype=object)).T)
    pre = Fr.from_int(np.asarray(crc[:t], dtype=object))
    off = t
    post1 = np.stack([vec(crc[off + r * t: off + (r + 1) * t]) for r in range(h)])
    off += h * t
    keys = vec(crc[off:off + rp])
    off += rp
    post2 = np.stack([vec(crc[off + r * t: off + (r + 1) * t]) for r in range(h - 1)])
    w_hat = np.stack([vec(w) for w, _ in c.sparse])
    v = np.stack([vec(v) for _, v in c.sparse])
    return pre, post1, keys, w_hat, v, post2


class Trace(NamedTuple):
    """The intermediates of one optimized-static permutation, in the gadget's
    round order; ``S`` is the batch shape, t the width.

    first:   (3, 8, *S, t)        round 0: s², s⁴, s⁵ + c' with s = x + c
    full:    (R_F−1, 4, 8, *S, t) the other full rounds: x, x², x⁴, x⁵ (+ c')
    partial: (R_P, 4, 8, *S)      element 0 of each partial round: x, x², x⁴, x⁵ + c
    out:     (8, *S, t)           the final state (out[..., 1] is the hash)
    """
    first: jax.Array
    full: jax.Array
    partial: jax.Array
    out: jax.Array


def _full_round(kernel, x, post):
    l2, l4, l5, y = kernel(x, post)
    return y, jnp.stack([x, l2, l4, l5])


def _scan_full(kernel, x, posts):
    """Full rounds with the same matrix as one ``lax.scan`` over their keys."""
    return jax.lax.scan(lambda x, k: _full_round(kernel, x, k), x, jnp.asarray(posts))


def _trace_impl(state, arity):
    pre, post1, keys, w_hat, v, post2 = _device_constants(arity)
    c = constants(arity)
    h = c.full_rounds // 2
    full_m = _full_round_kernel(arity, "mds")
    x = jnp.moveaxis(Fr.add(state, pre), -1, 0)                     # (t, 8, *S)
    x, ys1 = _scan_full(full_m, x, post1[:h - 1])
    x, ys2 = _full_round(_full_round_kernel(arity, "pre_sparse"), x, post1[h - 1])
    pk = _partial_round_kernel(arity)

    def pstep(x, kwv):
        l2, l4, l5, y = pk(x, *kwv)
        return y, jnp.stack([x[0], l2, l4, l5])
    x, part = jax.lax.scan(pstep, x, (jnp.asarray(keys), jnp.asarray(w_hat), jnp.asarray(v)))
    # the second half: R_F/2 − 1 rounds with keys, the last one without
    zero = np.zeros((1,) + post2.shape[1:], np.uint32)
    x, ys3 = _scan_full(full_m, x, np.concatenate([post2, zero]))
    full = jnp.concatenate([ys1, ys2[None], ys3])                    # (R_F, 4, t, 8, *S)
    full = jnp.moveaxis(full, 2, -1)                                 # (R_F, 4, 8, *S, t)
    return Trace(full[0, 1:], full[1:], part, jnp.moveaxis(x, 0, -1))


_trace = jax.jit(_trace_impl, static_argnums=1)
# the hash alone: the intermediates are dead code inside this jit (no trace kept)
_hash = jax.jit(lambda state, arity: _trace_impl(state, arity).out[..., 1], static_argnums=1)


def _check_state(state, what: str):
    state = jnp.asarray(state)
    if state.dtype != jnp.uint32 or state.ndim < 2 or state.shape[0] != Fr.L:
        raise ValueError(f"poseidon: {what} must be an Fr array (8, *S, n) of uint32, got "
                         f"{state.dtype} {state.shape}")
    return state


def permutation_trace(state) -> Trace:
    """The optimized-static permutation of states ``(8, *S, t)`` (t − 1 an
    arity, state[..., 0] the domain tag) with its intermediates."""
    state = _check_state(state, "the state")
    return _trace(state, state.shape[-1] - 1)


def permutation(state):
    """Permuted states ``(8, *S, t)``."""
    return permutation_trace(state).out


def with_tag(preimage, tag: int):
    """The initial state: Fr ``(8, *S, arity)`` -> ``(8, *S, arity + 1)``
    with the constant domain tag in front."""
    pre = jnp.asarray(preimage)
    t0 = jnp.broadcast_to(Fr.constant(tag, (1,)).reshape((Fr.L,) + (1,) * (pre.ndim - 1)),
                          pre.shape[:-1] + (1,))
    return jnp.concatenate([t0, pre], -1)


def hash(preimage, tag: int | None = None):  # noqa: A001 - neptune's name
    """Poseidon hash of preimages Fr ``(8, *S, arity)`` -> Fr ``(8, *S)``;
    ``tag`` defaults to the MerkleTree tag 2^arity − 1."""
    preimage = _check_state(preimage, "the preimage")
    arity = preimage.shape[-1]
    tag = merkle_tag(arity) if tag is None else tag
    return _hash(with_tag(preimage, tag), arity)
