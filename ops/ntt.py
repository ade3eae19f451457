"""Number-theoretic transforms over BLS12-381 Fr, batched over leading axes.

For n = 2^k (k ≤ 32, Fr's two-adicity) and ω a primitive n-th root of unity
(ω = 7^((r−1)/2^k), 7 generating Fr*):

    ntt(x)[j]        = Σ_i x_i ω^(ij)                  (natural order in and out)
    intt(X)[i]       = n⁻¹ Σ_j X_j ω^(−ij)
    coset_ntt(x)[j]  = Σ_i x_i (g ω^j)^i  = ntt(g^i · x_i)[j]     (g = 7)
    coset_intt(X)[i] = g^(−i) · intt(X)[i]

Arrays are Fr elements ``(8, *batch, n)``: the transform runs along the last
axis, every leading batch axis is transformed independently (Groth16 runs a,
b, c together).  Domain data (twiddles, coset powers, n⁻¹) lives in a
``Domain`` pytree that the caller builds once per size and passes in, so it is
device-resident and never baked into a compiled program as a constant.

Structure: iterative radix-2 Cooley–Tukey (DIT) after a bit-reversal gather;
each of the k stages splits the array into butterfly halves by a reshape and
a slice (no gathers or scatters), calls one butterfly kernel
(a + w·b, a − w·b) and interleaves the results back, so one kernel is compiled
per size.  (A four-step split into cache-sized passes is the
planned optimisation: bench/NOTES.md.)
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from ops.elementwise import elementwise
from ops.field import Fr

TWO_ADICITY = 32
GENERATOR = 7                      # generates Fr*; also the coset shift g


def root_of_unity(log_n: int) -> int:
    """A primitive 2^log_n-th root of unity in Fr."""
    if not 0 <= log_n <= TWO_ADICITY:
        raise ValueError(f"Fr has roots of unity of order 2^k only for k <= {TWO_ADICITY}, got {log_n}")
    return pow(GENERATOR, (Fr.p - 1) >> log_n, Fr.p)


def _powers(base: int, count: int) -> jnp.ndarray:
    """[base^0, ..., base^(count-1)] as Fr ``(8, count)``: host powers of two
    short ladders (base^j for j < b2, and base^(b2·i) for i < b1) and one
    device product of their outer combination (b1·b2 = count)."""
    p = Fr.p
    b2 = 1 << ((count.bit_length() - 1 + 1) // 2) if count > 1 else 1
    b1 = -(-count // b2)
    small, big = [1], [1]
    for _ in range(b2 - 1):
        small.append(small[-1] * base % p)
    step = pow(base, b2, p)
    for _ in range(b1 - 1):
        big.append(big[-1] * step % p)
    lo = jnp.asarray(Fr.from_int(small))[:, None, :]             # (8, 1, b2)
    hi = jnp.asarray(Fr.from_int(big))[:, :, None]               # (8, b1, 1)
    return Fr.mul(hi, lo).reshape(8, b1 * b2)[:, :count]


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["twiddles", "inv_twiddles", "n_inv", "coset", "inv_coset"],
                   meta_fields=["log_n"])
@dataclasses.dataclass(frozen=True)
class Domain:
    """Evaluation domain of size 2^log_n.

    twiddles / inv_twiddles: ω^j / ω^(−j) for j < n/2, ``(8, n/2)``;
    n_inv: ``(8,)``; coset / inv_coset: g^i and g^(−i)·n⁻¹ for i < n, ``(8, n)``
    (or None when built without cosets)."""
    log_n: int
    twiddles: jnp.ndarray
    inv_twiddles: jnp.ndarray
    n_inv: jnp.ndarray
    coset: jnp.ndarray | None
    inv_coset: jnp.ndarray | None

    @property
    def n(self) -> int:
        return 1 << self.log_n


def domain(log_n: int, cosets: bool = True) -> Domain:
    """Build the domain data for n = 2^log_n on the default device."""
    n = 1 << log_n
    w = root_of_unity(log_n)
    half = max(n // 2, 1)
    tw = _powers(w, half)
    itw = _powers(pow(w, -1, Fr.p), half)
    n_inv = pow(n, -1, Fr.p)
    co = ico = None
    if cosets:
        co = _powers(GENERATOR, n)
        ico = Fr.mul(_powers(pow(GENERATOR, -1, Fr.p), n), Fr.constant(n_inv, (1,)))
    return Domain(log_n, tw, itw, jnp.asarray(Fr.from_int(n_inv)), co, ico)


def _butterfly(ar, a, b, w):
    """(a + w·b, a − w·b) over Fr."""
    t = ar.mul(w, b)
    return ar.add(a, t), ar.sub(a, t)


def _bit_reverse(i, k: int):
    r = jnp.zeros_like(i)
    for s in range(k):
        r = r | (((i >> s) & 1) << (k - 1 - s))
    return r


def _check(x, dom: Domain, name: str):
    if x.ndim < 2 or x.shape[0] != Fr.L:
        raise ValueError(f"{name}: expected Fr elements (8, *batch, n), got shape {x.shape}")
    if x.shape[-1] != dom.n:
        raise ValueError(f"{name}: last axis has {x.shape[-1]} elements, the domain has {dom.n}")


def _transform(x, tw, log_n: int):
    """Radix-2 DIT over the last axis with twiddles tw[j] = ω_n^j (j < n/2).

    After one bit-reversal gather, stage s (block size m = 2^s) views the
    array as ``(*lead, n/m, 2, m/2)``: the two halves of every block are
    the butterfly inputs a, b, the twiddle of position j < m/2 is
    ω_n^(j·n/m).  Only reshapes and slices between stages (XLA fuses the
    interleave of one stage with the split of the next), and every stage
    calls the same butterfly kernel on ``(8, *batch, n/2)`` arrays, so one
    kernel is compiled per size."""
    n = 1 << log_n
    if log_n == 0:
        return x
    lead = x.shape[:-1]
    idx = jnp.arange(n, dtype=jnp.int32)
    x = jnp.take(x, _bit_reverse(idx, log_n), axis=-1)
    bfly = elementwise(_butterfly, [(8,)] * 3, [((8,), jnp.uint32)] * 2, Fr.arith, Fr.config,
                       name="Fr_butterfly")
    for s in range(1, log_n + 1):
        m = 1 << s
        xb = x.reshape(lead + (n // m, 2, m // 2))
        a, b = xb[..., 0, :], xb[..., 1, :]
        w = tw[:, ::n // m][:, :m // 2]                          # ω_n^(j·n/m), j < m/2
        w = jnp.broadcast_to(w.reshape((8,) + (1,) * (len(lead) - 1) + (1, m // 2)), a.shape)
        u, v = bfly(a.reshape(lead + (n // 2,)), b.reshape(lead + (n // 2,)),
                    w.reshape(lead + (n // 2,)))
        x = jnp.stack([u.reshape(a.shape), v.reshape(a.shape)], axis=-2).reshape(lead + (n,))
    return x


@jax.jit
def ntt(x, dom: Domain):
    """Forward NTT along the last axis (natural order in and out)."""
    _check(x, dom, "ntt")
    return _transform(x, dom.twiddles, dom.log_n)


@jax.jit
def intt(X, dom: Domain):
    """Inverse NTT along the last axis."""
    _check(X, dom, "intt")
    return Fr.mul(_transform(X, dom.inv_twiddles, dom.log_n), dom.n_inv)


@jax.jit
def coset_ntt(x, dom: Domain):
    """Evaluations on the coset g·⟨ω⟩: ntt(g^i · x_i)."""
    _check(x, dom, "coset_ntt")
    if dom.coset is None:
        raise ValueError("coset_ntt: the domain was built with cosets=False")
    return _transform(Fr.mul(x, dom.coset), dom.twiddles, dom.log_n)


@jax.jit
def coset_intt(X, dom: Domain):
    """Inverse of coset_ntt: g^(−i) · intt(X)_i."""
    _check(X, dom, "coset_intt")
    if dom.inv_coset is None:
        raise ValueError("coset_intt: the domain was built with cosets=False")
    return Fr.mul(_transform(X, dom.inv_twiddles, dom.log_n), dom.inv_coset)


def naive_ntt(xs: list[int], omega: int) -> list[int]:
    """O(n²) reference evaluation Σ_i x_i ω^(ij) with Python ints (tests)."""
    p, n = Fr.p, len(xs)
    return [sum(x * pow(omega, i * j, p) for i, x in enumerate(xs)) % p for j in range(n)]
