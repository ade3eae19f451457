"""Multi-precision modular arithmetic on *limb lists*.

A field element of L limbs is a Python list of L arrays ("rows") of one common
shape, least significant limb first, each row ``uint32`` holding 32 bits.  The
rows are whatever the caller has: ``(BN,)`` blocks inside a Pallas kernel, or
whole ``(*batch)`` arrays on the XLA path.  Every function here is therefore
elementwise over the rows, and the same code is the GPU kernel body and the CPU
path (see ``ops.elementwise``).

Words: a limb product-accumulate ``t + x*y + c`` is formed in ``uint64`` and
split back into two ``uint32`` halves, so these functions must be traced with
64-bit types enabled (``ops.elementwise`` does that locally, never globally).

Montgomery form: an element x is stored as x·R mod p with R = 2^(32L).  The
product is the "no-carry" CIOS of Koç–Acar–Kaliski (valid because the top limb
of p is below 2^31 - 1, true for both BLS12-381 primes), followed by one
conditional subtraction, so every result is canonical in [0, p).

Loops: carry chains (add, sub, conditional subtraction) and the outer CIOS loop
can be emitted *rolled* (one ``lax.fori_loop`` over the limbs, the rows rotating
through the loop carry, so no dynamic indexing is needed) or *unrolled*
(straight-line code).  Rolled code keeps Triton's MLIR small, which is what
bounds Pallas compile time (research/arith-prototype: compile time grows with
roughly the cube of the kernel's op count); the backend compiler may still
unroll the loops when it pays.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

u32, u64 = jnp.uint32, jnp.uint64
Row = jnp.ndarray
Limbs = list  # list[Row]


@dataclasses.dataclass(frozen=True)
class Unroll:
    """How loops over limbs are emitted (static; part of a kernel's identity).

    chains: unroll the carry chains of add/sub/conditional subtraction.
    mul: unroll the outer loop of the CIOS multiplication.
    table: emit each group of independent products (``FpArith.muls``) as one
      loop whose step selects its operands, so the product code appears once
      per group instead of once per product (smaller kernels, some speed lost).
    inner: unroll the inner (limb) loop of each CIOS step; rolled, a
      multiplication is two nested loops of a few operations each.
    mul_rows: CIOS rows per step of the rolled outer loop where the product
      is inline PTX (``ops.ptx.montgomery_mul``; the largest even divisor of
      the limb count not above max(mul_rows, 2): the even/odd accumulators
      swap roles every row): each step ends by rotating b's limbs through
      the loop carry, L register moves, so k rows per step pay L/k moves a
      row (bench/NOTES.md hypothesis 59; 1 and 2: two rows a step).
    """
    chains: bool = False
    mul: bool = False
    table: bool = False
    inner: bool = True
    mul_rows: int = 1

    def __post_init__(self):
        if not isinstance(self.mul_rows, int) or isinstance(self.mul_rows, bool) \
                or self.mul_rows < 1:
            raise ValueError(f"Unroll.mul_rows must be a positive int, got {self.mul_rows!r}")


ROLLED = Unroll(False, False)


def to_limbs(x: int, n: int) -> list[int]:
    """Little-endian 32-bit limbs of a non-negative Python int."""
    return [(x >> (32 * i)) & 0xFFFFFFFF for i in range(n)]


# ---------------------------------------------------------------- words
def _u64(v):
    if isinstance(v, (int, np.integer)):
        return u64(int(v))
    return v.astype(u64)


def _split(v):
    return v.astype(u32), (v >> 32).astype(u32)


def mac(t, x, y, c):
    """t + x*y + c as (low word, high word); fits in 64 bits for 32-bit inputs."""
    return _split(_u64(t) + _u64(x) * _u64(y) + _u64(c))


def adc(x, y, c):
    """x + y + c (c in {0,1}) as (sum word, carry)."""
    return _split(_u64(x) + _u64(y) + _u64(c))


def sbb(x, y, b):
    """x - y - b (b in {0,1}) as (difference word, borrow)."""
    v = _u64(x) - _u64(y) - _u64(b)
    return v.astype(u32), (v >> 63).astype(u32)


# ---------------------------------------------------------------- limb loops
def limb_scan(step: Callable, seqs: Sequence[Sequence], carry, rolled: bool):
    """Run ``carry, y_j = step(carry, *(s[j] for s in seqs))`` for j = 0..L-1.

    Returns (carry, [y_0, ..., y_{L-1}]).  Rolled: one fori_loop; the input
    sequences rotate through the loop carry so step j always reads element 0.
    Entries of ``seqs`` may be rows or Python/numpy ints (constants).
    """
    L = len(seqs[0])
    if not rolled:
        ys = []
        for j in range(L):
            carry, y = step(carry, *(s[j] for s in seqs))
            ys.append(y)
        return carry, ys
    like = next(v for s in seqs for v in s if hasattr(v, "shape"))
    seqs = [[v if hasattr(v, "shape") else u32(int(v)) for v in s] for s in seqs]
    ys0 = [jnp.zeros_like(like)] * L

    def body(_, state):
        c, ss, ys = state
        c, y = step(c, *(s[0] for s in ss))
        return c, [s[1:] + s[:1] for s in ss], ys[1:] + [y]

    carry, _, ys = lax.fori_loop(0, L, body, (carry, [list(s) for s in seqs], ys0))
    return carry, ys


def _zero_word(like):
    return jnp.zeros_like(like)


def add_raw(a: Limbs, b: Limbs, rolled=False):
    """Plain addition a + b, returns (sum limbs, carry out)."""
    return _swap(limb_scan(lambda c, x, y: _flip(adc(x, y, c)), [a, b], _zero_word(a[0]), rolled))


def sub_raw(a: Limbs, b, rolled=False):
    """Plain subtraction a - b, returns (difference limbs, borrow out)."""
    return _swap(limb_scan(lambda c, x, y: _flip(sbb(x, y, c)), [a, b], _zero_word(a[0]), rolled))


def _flip(pair):
    s, c = pair
    return c, s


def _swap(pair):
    c, s = pair
    return s, c


def select(cond, a: Limbs, b: Limbs) -> Limbs:
    """Per lane: a where cond else b."""
    return [jnp.where(cond, x, y) for x, y in zip(a, b)]


def is_zero(a: Limbs):
    acc = a[0]
    for x in a[1:]:
        acc = acc | x
    return acc == 0


def eq(a: Limbs, b: Limbs):
    acc = a[0] ^ b[0]
    for x, y in zip(a[1:], b[1:]):
        acc = acc | (x ^ y)
    return acc == 0


# ---------------------------------------------------------------- modular ops
def cond_sub(a: Limbs, p: Sequence[int], rolled=False) -> Limbs:
    """a in [0, 2p) -> a mod p."""
    d, borrow = sub_raw(a, p, rolled)
    return select(borrow != 0, a, d)


def add_mod(a: Limbs, b: Limbs, p: Sequence[int], rolled=False) -> Limbs:
    """(a + b) mod p for canonical a, b (2p < 2^(32L): no carry out)."""
    s, _ = add_raw(a, b, rolled)
    return cond_sub(s, p, rolled)


def sub_mod(a: Limbs, b: Limbs, p: Sequence[int], rolled=False) -> Limbs:
    """(a - b) mod p for canonical a, b: subtract, then add p back where it borrowed."""
    d, borrow = sub_raw(a, b, rolled)
    mask = u32(0) - borrow                       # 0 or 0xFFFFFFFF
    s, _ = add_raw(d, [mask & u32(int(pj)) for pj in p], rolled)
    return s


def neg_mod(a: Limbs, p: Sequence[int], rolled=False) -> Limbs:
    """(-a) mod p, with -0 = 0."""
    d, _ = sub_raw([u32(int(pj)) + jnp.zeros_like(a[0]) for pj in p], a, rolled)
    nz = ~is_zero(a)
    return [jnp.where(nz, x, u32(0)) for x in d]


def _cios_row(t: Limbs, a: Limbs, bi, p: Sequence, n0: int, rolled: bool = False) -> Limbs:
    """One outer CIOS step: t <- (t + a*bi + m*p) / 2^32, m = t0 * n0 mod 2^32."""
    t0, A = mac(t[0], a[0], bi, 0)
    m = t0 * u32(n0)
    _, C = mac(t0, m, p[0], 0)                   # low word vanishes by choice of m

    def step(carry, tj, aj, pj):
        A, C = carry
        tj, A = mac(tj, aj, bi, A)
        nj, C = mac(tj, m, pj, C)
        return (A, C), nj

    (A, C), new = limb_scan(step, [t[1:], a[1:], p[1:]], (A, C), rolled)
    return new + [C + A]


def montgomery_mul(a: Limbs, b: Limbs, p: Sequence[int], n0: int,
                   unroll: Unroll = ROLLED) -> Limbs:
    """a·b·R⁻¹ mod p (no-carry CIOS + one conditional subtraction).

    a, b canonical (< p); result canonical.  ``n0 = -p⁻¹ mod 2^32``.
    """
    L = len(a)
    pc = [u32(int(x)) for x in p]
    if unroll.mul:
        t = [_zero_word(a[0])] * L
        for i in range(L):
            t = _cios_row(t, a, b[i], pc, n0, not unroll.inner)
    else:
        def step(_, tb):
            t, bb = tb
            return _cios_row(t, a, bb[0], pc, n0, not unroll.inner), bb[1:] + bb[:1]
        t, _ = lax.fori_loop(0, L, step, ([_zero_word(a[0])] * L, list(b)))
    return cond_sub(t, p, not unroll.chains)
