"""Fq6 and Fq12: the rest of the BLS12-381 tower, where pairings take values.

    Fq2  = Fq[u]/(u² + 1)                 (ops.tower)
    Fq6  = Fq2[v]/(v³ − ξ),  ξ = 1 + u
    Fq12 = Fq6[w]/(w² − v)                (so w⁶ = ξ)

the tower of py_ecc's optimized code, blst, arkworks and zkcrypto.  An Fq6
element is c0 + c1·v + c2·v² (three Fq2 values), an Fq12 element c0 + c1·w
(two Fq6 values); in the basis 1, w, …, w⁵ over Fq2 the coefficient of
w^(2i+j) is c_j.c_i.

Formula layer: ``Fp6Arith`` (values are triples of Fq2 values) and
``Fp12Arith`` (pairs of Fq6 values).  Math:

* Fq6 mul: Karatsuba, 6 Fq2 products; square: Chung–Hasan SQR2 (2M + 3S);
  inverse: t0 = a0² − ξa1a2, t1 = ξa2² − a0a1, t2 = a1² − a0a2,
  N = a0t0 + ξ(a2t1 + a1t2) ∈ Fq2, a⁻¹ = (t0, t1, t2)/N.
* Fq12 mul: Karatsuba over Fq6 (3 Fq6 = 54 Fq products); square: complex
  method (2 Fq6 products); inverse (a0 − a1w)/(a0² − v·a1²); conjugate
  a0 − a1w = a^(p⁶), the inverse on the cyclotomic subgroup.
* Frobenius a ↦ a^(p^k): each Fq2 coefficient is conjugated k times and the
  basis elements pick up constants v^(p^k) = ξ^((p^k−1)/3)·v,
  w^(p^k) = ξ^((p^k−1)/6)·w, computed here from p (``frobenius_coeffs``).
* Sparse products with line values: ``mul_by_01`` (Fq6 by b0 + b1v),
  ``mul_by_1`` (Fq6 by b1v) and ``mul_by_014`` (Fq12 by c0 + c1·v + c4·vw,
  the shape of an M-twist line, 13 Fq2 products).
* Cyclotomic square (Granger–Scott 2010): for a with a^(p⁶+1) = 1 (after the
  easy part of the final exponentiation), viewing Fq12 as Fq4³ with
  Fq4 = Fq2[y]/(y² − ξ), y = w³; 6 Fq2 products.

Product rounds (``product_rounds``, the GPU path): a formula recorded with
symbolic values runs as rounds of independent Fq products, all in one small
Pallas kernel over a stacked batch, between small-integer linear maps done
in XLA, so no kernel grows with the formula (Pallas' compile time does).

Array API: ``Fq6`` and ``Fq12`` (``TowerField``), arrays of shape
``(3, 2, 12, *batch)`` and ``(2, 3, 2, 12, *batch)`` uint32 (coefficient axes
first, then the Montgomery limbs); host values are nested coefficient tuples
((c0, c1) pairs of ints for each Fq2 coefficient).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jax import lax

from ops.elementwise import KernelConfig, _broadcast, _flat, _nest, elementwise, x64
from ops.platform import by_platform
from ops.field import FieldOps, FpArith, Fq as _Fq, PrimeField, dots_by_products, pow_by_constant
from ops.limbs import Unroll, to_limbs
from ops.tower import Fp2Arith

XI = (1, 1)                      # ξ = 1 + u, the cubic and sextic non-residue of Fq2

# Kernel settings: an Fq12 product is 54 Fq products (4.5 G1 additions), so like G2's
# formulas (bench/NOTES.md) the tower kernels use rolled inner CIOS loops and emit each
# group of Fq products as a table loop, which keeps their Triton IR, and so their compile
# time, small.  (On the CPU the interpreter then runs ~4x slower than with unrolled loops.)
TOWER_CONFIG = KernelConfig(unroll=Unroll(inner=False, table=True))


# ---------------------------------------------------------------- host Fq2 (constants)
def _f2mul(a, b, p):
    return ((a[0] * b[0] - a[1] * b[1]) % p, (a[0] * b[1] + a[1] * b[0]) % p)


def _f2pow(a, e: int, p):
    r = (1, 0)
    for bit in bin(e)[2:]:
        r = _f2mul(r, r, p)
        if bit == "1":
            r = _f2mul(r, a, p)
    return r


@functools.lru_cache(maxsize=None)
def frobenius_coeffs(p: int, k: int) -> tuple:
    """(γ_v, γ_v², γ_w) ∈ Fq2 for a ↦ a^(p^k): v^(p^k) = γ_v·v,
    (v²)^(p^k) = γ_v²·v², w^(p^k) = γ_w·w, i.e. ξ^((p^k−1)/3),
    ξ^(2(p^k−1)/3), ξ^((p^k−1)/6) (p ≡ 1 mod 6, so the exponents are integers)."""
    if p % 6 != 1:
        raise ValueError("the Fq6/Fq12 tower needs p ≡ 1 mod 6")
    q = pow(p, k) - 1
    return (_f2pow(XI, q // 3, p), _f2pow(XI, 2 * q // 3, p), _f2pow(XI, q // 6, p))


def _mul_fp2_const(F2: Fp2Arith, a, c):
    """a · c for a constant c = (c0, c1) ∈ Fq2, with the cheap cases
    c = 1, c ∈ Fq and c ∈ Fq·u."""
    p = F2.p
    c = (c[0] % p, c[1] % p)
    if c == (1, 0):
        return a
    F = F2.base
    like = F2.like(a)
    if c[1] == 0:
        return F2.mul_base(a, F.const(c[0], like))
    if c[0] == 0:
        return F2.mul_by_u(F2.mul_base(a, F.const(c[1], like)))
    return F2.mul(a, F2.const(c, like))


# ---------------------------------------------------------------- formula layer
@dataclasses.dataclass(frozen=True)
class Fp6Arith:
    """Fq6 arithmetic on triples (c0, c1, c2) of Fq2 values."""
    F2: Fp2Arith

    @property
    def p(self):
        return self.F2.p

    def const(self, c, like):
        return tuple(self.F2.const(ci, like) for ci in c)

    def zero(self, like):
        return (self.F2.zero(like),) * 3

    def one(self, like):
        return (self.F2.one(like), self.F2.zero(like), self.F2.zero(like))

    def add(self, a, b):
        return tuple(self.F2.add(x, y) for x, y in zip(a, b))

    def sub(self, a, b):
        return tuple(self.F2.sub(x, y) for x, y in zip(a, b))

    def neg(self, a):
        return tuple(self.F2.neg(x) for x in a)

    def dbl(self, a):
        return self.add(a, a)

    def mul_by_nonresidue(self, a):
        """a · v = (ξa2, a0, a1)."""
        return (self.F2.mul_by_nonresidue(a[2]), a[0], a[1])

    def mul(self, a, b):
        """Karatsuba: 6 Fq2 products."""
        F2 = self.F2
        (a0, a1, a2), (b0, b1, b2) = a, b
        v0, v1, v2, t0, t1, t2 = F2.muls([
            (a0, b0), (a1, b1), (a2, b2), (F2.add(a1, a2), F2.add(b1, b2)),
            (F2.add(a0, a1), F2.add(b0, b1)), (F2.add(a0, a2), F2.add(b0, b2))])
        c0 = F2.add(v0, F2.mul_by_nonresidue(F2.sub(t0, F2.add(v1, v2))))
        c1 = F2.add(F2.sub(t1, F2.add(v0, v1)), F2.mul_by_nonresidue(v2))
        c2 = F2.add(F2.sub(t2, F2.add(v0, v2)), v1)
        return (c0, c1, c2)

    def sqr(self, a):
        """Chung–Hasan SQR2: 2 products and 3 squares in Fq2."""
        F2 = self.F2
        a0, a1, a2 = a
        s0 = F2.sqr(a0)
        s1 = F2.dbl(F2.mul(a0, a1))
        s2 = F2.sqr(F2.add(F2.sub(a0, a1), a2))
        s3 = F2.dbl(F2.mul(a1, a2))
        s4 = F2.sqr(a2)
        c0 = F2.add(s0, F2.mul_by_nonresidue(s3))
        c1 = F2.add(s1, F2.mul_by_nonresidue(s4))
        c2 = F2.sub(F2.add(F2.add(s1, s2), s3), F2.add(s0, s4))
        return (c0, c1, c2)

    def mul_by_01(self, a, b0, b1):
        """a · (b0 + b1·v): 5 Fq2 products."""
        F2 = self.F2
        a0, a1, a2 = a
        aa, bb, t1, t2, t3 = F2.muls([(a0, b0), (a1, b1), (F2.add(a1, a2), b1),
                                      (F2.add(a0, a1), F2.add(b0, b1)), (F2.add(a0, a2), b0)])
        c0 = F2.add(F2.mul_by_nonresidue(F2.sub(t1, bb)), aa)
        c1 = F2.sub(t2, F2.add(aa, bb))
        c2 = F2.add(F2.sub(t3, aa), bb)
        return (c0, c1, c2)

    def mul_by_1(self, a, b1):
        """a · (b1·v) = (ξa2b1, a0b1, a1b1)."""
        F2 = self.F2
        t0, t1, t2 = F2.muls([(a[2], b1), (a[0], b1), (a[1], b1)])
        return (F2.mul_by_nonresidue(t0), t1, t2)

    def inv(self, a):
        """(t0, t1, t2)/N (see the module docstring); 0 -> 0."""
        F2 = self.F2
        a0, a1, a2 = a
        s0, s1, s2, m01, m02, m12 = F2.muls([(a0, a0), (a1, a1), (a2, a2), (a0, a1), (a0, a2),
                                             (a1, a2)])
        t0 = F2.sub(s0, F2.mul_by_nonresidue(m12))
        t1 = F2.sub(F2.mul_by_nonresidue(s2), m01)
        t2 = F2.sub(s1, m02)
        n0, n1, n2 = F2.muls([(a0, t0), (a2, t1), (a1, t2)])
        ninv = F2.inv(F2.add(n0, F2.mul_by_nonresidue(F2.add(n1, n2))))
        return tuple(F2.muls([(t0, ninv), (t1, ninv), (t2, ninv)]))

    def frobenius(self, a, k: int):
        """a^(p^k)."""
        F2 = self.F2
        gv, gv2, _ = frobenius_coeffs(self.p, k % 6)
        c = [F2.conj(x) if k % 2 else x for x in a]
        return (c[0], _mul_fp2_const(F2, c[1], gv), _mul_fp2_const(F2, c[2], gv2))

    def is_zero(self, a):
        return self.F2.is_zero(a[0]) & self.F2.is_zero(a[1]) & self.F2.is_zero(a[2])

    def eq(self, a, b):
        return self.F2.eq(a[0], b[0]) & self.F2.eq(a[1], b[1]) & self.F2.eq(a[2], b[2])

    def select(self, c, a, b):
        return tuple(self.F2.select(c, x, y) for x, y in zip(a, b))

    # ---- control flow, delegated to the base arithmetic
    def like(self, v):
        return self.F2.like(v[0])

    def loop(self, n, body, init):
        return self.F2.loop(n, body, init)

    def exp_bit(self, bits, i):
        return self.F2.exp_bit(bits, i)

    def pow(self, a, e: int):
        return pow_by_constant(self, a, e)


@dataclasses.dataclass(frozen=True)
class Fp12Arith:
    """Fq12 arithmetic on pairs (c0, c1) of Fq6 values."""
    F6: Fp6Arith

    @property
    def p(self):
        return self.F6.p

    @property
    def F2(self) -> Fp2Arith:
        return self.F6.F2

    def const(self, c, like):
        return (self.F6.const(c[0], like), self.F6.const(c[1], like))

    def zero(self, like):
        return (self.F6.zero(like), self.F6.zero(like))

    def one(self, like):
        return (self.F6.one(like), self.F6.zero(like))

    def add(self, a, b):
        return (self.F6.add(a[0], b[0]), self.F6.add(a[1], b[1]))

    def sub(self, a, b):
        return (self.F6.sub(a[0], b[0]), self.F6.sub(a[1], b[1]))

    def neg(self, a):
        return (self.F6.neg(a[0]), self.F6.neg(a[1]))

    def dbl(self, a):
        return self.add(a, a)

    def conj(self, a):
        """a0 − a1·w = a^(p⁶)."""
        return (a[0], self.F6.neg(a[1]))

    def mul(self, a, b):
        """Karatsuba over Fq6: 3 Fq6 products (54 Fq products)."""
        F6 = self.F6
        aa = F6.mul(a[0], b[0])
        bb = F6.mul(a[1], b[1])
        t = F6.mul(F6.add(a[0], a[1]), F6.add(b[0], b[1]))
        return (F6.add(aa, F6.mul_by_nonresidue(bb)), F6.sub(t, F6.add(aa, bb)))

    def sqr(self, a):
        """Complex squaring: 2 Fq6 products."""
        F6 = self.F6
        a0, a1 = a
        ab = F6.mul(a0, a1)
        t = F6.mul(F6.add(a0, a1), F6.add(a0, F6.mul_by_nonresidue(a1)))
        return (F6.sub(t, F6.add(ab, F6.mul_by_nonresidue(ab))), F6.dbl(ab))

    def mul_by_014(self, a, c0, c1, c4):
        """a · (c0 + c1·v + c4·v·w) for c0, c1, c4 ∈ Fq2 (an M-twist line
        value): 13 Fq2 products."""
        F6 = self.F6
        aa = F6.mul_by_01(a[0], c0, c1)
        bb = F6.mul_by_1(a[1], c4)
        t = F6.mul_by_01(F6.add(a[0], a[1]), c0, self.F2.add(c1, c4))
        return (F6.add(F6.mul_by_nonresidue(bb), aa), F6.sub(t, F6.add(aa, bb)))

    def inv(self, a):
        """(a0 − a1w)/(a0² − v·a1²); 0 -> 0."""
        F6 = self.F6
        t = F6.inv(F6.sub(F6.sqr(a[0]), F6.mul_by_nonresidue(F6.sqr(a[1]))))
        return (F6.mul(a[0], t), F6.neg(F6.mul(a[1], t)))

    def frobenius(self, a, k: int):
        """a^(p^k): the Fq6 Frobenius of both halves, the w half times γ_w;
        each Fq2 coefficient is multiplied once, by its combined constant
        (1, γ_v, γ_v²)·(1 or γ_w), so the products form one independent group."""
        F2, p = self.F2, self.p
        gv, gv2 = frobenius_coeffs(p, k % 6)[:2]
        gw = frobenius_coeffs(p, k % 12)[2]
        consts = ((1, 0), gv, gv2)
        return tuple(tuple(_mul_fp2_const(F2, F2.conj(x) if k % 2 else x,
                                          _f2mul(c, gw, p) if j else c)
                           for x, c in zip(half, consts))
                     for j, half in enumerate(a))

    def cyclotomic_sqr(self, a):
        """a² for a in the cyclotomic subgroup (a^(p⁶+1) = 1), Granger–Scott:
        with y = w³ the pairs (z0, z1), (z2, z3), (z4, z5) below are Fq4
        elements whose squares A², B², C² give a² = (3A² − 2Ā, 3y·C² + 2B̄, 3B² − 2C̄)
        in the Fq4³ view (bars: Fq4 conjugates)."""
        F2 = self.F2
        (z0, z4, z3), (z2, z1, z5) = a

        def fq4_sqr(x, y):                      # (x + y·Y)², Y² = ξ
            t = F2.mul(x, y)
            s = F2.mul(F2.add(x, y), F2.add(F2.mul_by_nonresidue(y), x))
            return F2.sub(s, F2.add(t, F2.mul_by_nonresidue(t))), F2.dbl(t)

        t0, t1 = fq4_sqr(z0, z1)
        t2, t3 = fq4_sqr(z2, z3)
        t4, t5 = fq4_sqr(z4, z5)

        def minus(t, z):                        # 3t − 2z
            return F2.add(F2.dbl(F2.sub(t, z)), t)

        def plus(t, z):                         # 3t + 2z
            return F2.add(F2.dbl(F2.add(t, z)), t)

        z0, z1 = minus(t0, z0), plus(t1, z1)
        z2, z3 = plus(F2.mul_by_nonresidue(t5), z2), minus(t4, z3)
        z4, z5 = minus(t2, z4), plus(t3, z5)
        return ((z0, z4, z3), (z2, z1, z5))

    def is_zero(self, a):
        return self.F6.is_zero(a[0]) & self.F6.is_zero(a[1])

    def eq(self, a, b):
        return self.F6.eq(a[0], b[0]) & self.F6.eq(a[1], b[1])

    def select(self, c, a, b):
        return (self.F6.select(c, a[0], b[0]), self.F6.select(c, a[1], b[1]))

    def like(self, v):
        return self.F6.like(v[0])

    def loop(self, n, body, init):
        return self.F6.loop(n, body, init)

    def exp_bit(self, bits, i):
        return self.F6.exp_bit(bits, i)

    def pow(self, a, e: int):
        return pow_by_constant(self, a, e)


def fp6_over(ar) -> Fp6Arith:
    return Fp6Arith(Fp2Arith(ar))


def fp12_over(ar) -> Fp12Arith:
    return Fp12Arith(fp6_over(ar))


# ---------------------------------------------------------------- product rounds
# Pallas' compile time grows steeply with a kernel's Triton IR, and in an elementwise
# kernel every limb row loaded or stored costs ~20 IR ops: an Fq12 product (432 rows)
# cannot be one small kernel.  So a tower formula is run as *product rounds*: recorded
# once with symbolic values, it becomes
#     state = inputs ++ constants;  per round: operands = M_r · state (small integer
#     matrix, XLA), state ++= operand products (ONE Fq-product kernel over a stacked
#     batch) or inverses;  outputs = M_out · state
# where round r holds every product whose operands depend on products of rounds < r.
# Every Fq product of the pairing runs in the same tiny kernel (identical Triton IR at
# every call site); the additions, negations and small multiples are XLA array code.

class NotRoundFormula(NotImplementedError):
    """The formula uses an operation product rounds cannot express (select,
    comparison, data-dependent loop)."""


class RoundRecorder:
    """Stands in for ``FpArith`` while a formula is recorded: a value is a
    linear combination ``{symbol: int}`` of symbols (inputs, constants,
    products and inverses), so additions, negations and small multiples are
    bookkeeping and only products and inverses become work."""

    def __init__(self, p: int):
        self.p = p
        self.L = -(-p.bit_length() // 32)
        self.kinds: list[tuple] = []            # per symbol: ("in",) | ("const", x) | ("mul", a, b) | ("inv", a)
        self._consts: dict[int, dict] = {}

    def _sym(self, kind):
        self.kinds.append(kind)
        return {len(self.kinds) - 1: 1}

    def input(self):
        return self._sym(("in",))

    @staticmethod
    def _comb(*terms):
        out: dict = {}
        for c, a in terms:
            for s, k in a.items():
                out[s] = out.get(s, 0) + c * k
        return {s: k for s, k in out.items() if k}

    # ---- the FpArith interface
    def like(self, v):
        return None

    def const(self, x: int, like=None):
        x %= self.p
        if x == 0:
            return {}
        if x not in self._consts:
            self._consts[x] = self._sym(("const", x))
        return dict(self._consts[x])

    def zero(self, like=None):
        return {}

    def one(self, like=None):
        return self.const(1)

    def add(self, a, b):
        return self._comb((1, a), (1, b))

    def sub(self, a, b):
        return self._comb((1, a), (-1, b))

    def neg(self, a):
        return self._comb((-1, a))

    def dbl(self, a):
        return self._comb((2, a))

    def mul_small(self, a, k: int):
        if k < 1:
            raise ValueError("mul_small needs k >= 1")
        return self._comb((k, a))

    def mul(self, a, b):
        if not a or not b:
            return {}
        return self._sym(("mul", a, b))

    def sqr(self, a):
        return self.mul(a, a)

    def muls(self, pairs):
        return [self.mul(x, y) for x, y in pairs]

    dot_terms = 1       # a sum of products is recorded as its products and sums

    def dots(self, groups):
        return dots_by_products(self, groups)

    def inv(self, a):
        return self._sym(("inv", a)) if a else {}

    def _unsupported(self, *args, **kwargs):
        raise NotRoundFormula("not expressible as product rounds (selects, comparisons and "
                              "loops need an elementwise kernel)")

    select = is_zero = eq = loop = exp_bit = scalar_bit = pow = sqrt = _unsupported


@dataclasses.dataclass(frozen=True)
class RoundPlan:
    """A recorded formula as data.  State rows: the ``n_in`` inputs, then
    ``consts`` (Montgomery limbs ``(n_c, L)``), then each round's results.
    rounds: ``(kind, idx, coef)`` with kind "mul" (operand rows ``idx``/``coef``
    ``(2K, t)``: K left operands then K right operands) or "inv" (``(K, t)``);
    out: ``(idx, coef)`` of the outputs.  Row i of a map is
    Σ_j coef[i, j]·state[idx[i, j]] mod p."""
    p: int
    n_in: int
    consts: np.ndarray
    rounds: tuple
    out: tuple


def _map(lins, pos) -> tuple:
    t = max(1, max(len(c) for c in lins))
    idx = np.zeros((len(lins), t), np.int32)
    coef = np.zeros((len(lins), t), np.int64)
    for i, c in enumerate(lins):
        for j, (s, k) in enumerate(sorted(c.items())):
            idx[i, j], coef[i, j] = pos[s], k
    return idx, coef


def record_rounds(formula, in_prefixes, out_prefixes, p: int) -> RoundPlan:
    """Record ``formula(ar, *values)`` (values nested as ``ops.elementwise``
    passes them) into a ``RoundPlan``; raises ``NotRoundFormula`` if it
    selects, compares or loops."""
    rec = RoundRecorder(p)
    vals = []
    n_in = 0
    for pre in in_prefixes:
        k = math.prod(pre[:-1])
        vals.append(_nest([rec.input() for _ in range(k)], pre[:-1]))
        n_in += k
    outs = formula(rec, *vals)
    outs = [outs] if len(out_prefixes) == 1 else list(outs)
    out_lins = [v for o, pre in zip(outs, out_prefixes) for v in _flat(o, pre[:-1])]
    kinds = rec.kinds
    live = [False] * len(kinds)                 # symbols the outputs need
    for c in out_lins:
        for s in c:
            live[s] = True
    for s in reversed(range(len(kinds))):
        if live[s] and kinds[s][0] in ("mul", "inv"):
            for c in kinds[s][1:]:
                for u in c:
                    live[u] = True
    level = [0] * len(kinds)
    for s, kd in enumerate(kinds):
        if kd[0] in ("mul", "inv"):
            level[s] = 1 + max(level[u] for c in kd[1:] for u in c)
    pos = {s: s for s in range(n_in)}           # inputs are symbols 0..n_in-1
    consts = [s for s in range(len(kinds)) if kinds[s][0] == "const" and live[s]]
    for s in consts:
        pos[s] = len(pos)
    rounds = []
    for lv in range(1, max(level, default=0) + 1):
        for kind in ("mul", "inv"):
            syms = [s for s in range(len(kinds)) if live[s] and level[s] == lv and kinds[s][0] == kind]
            if not syms:
                continue
            lins = ([kinds[s][1] for s in syms] + [kinds[s][2] for s in syms] if kind == "mul"
                    else [kinds[s][1] for s in syms])
            rounds.append((kind,) + _map(lins, pos))
            for s in syms:
                pos[s] = len(pos)
    L = rec.L
    const_limbs = np.array([to_limbs(kinds[s][1] * (1 << 32 * L) % p, L) for s in consts],
                           np.uint32).reshape(len(consts), L)
    return RoundPlan(p, n_in, const_limbs, tuple(rounds), _map(out_lins, pos))


def _lincomb(state, idx, coef, p: int):
    """Rows Σ_j coef[i, j]·state[:, idx[i, j]] mod p: state ``(L, S, *b)``
    canonical uint32 -> ``(L, m, *b)``.  Exact: the signed sum plus N·p
    (N = the sum of the negative coefficients' sizes) is formed per limb in
    int64, carried into L + 1 limbs (a value in [0, K·p], K = Σ|coef|; K·p
    itself for −0), and reduced by conditional subtraction of 2^j·p for
    j = s−1, …, 0, s the bit length of K."""
    L = state.shape[0]
    if np.all((coef == 1).sum(1) == 1) and np.all((coef != 0).sum(1) == 1):
        return state[:, idx[np.arange(len(idx)), np.argmax(coef, 1)]]       # plain copies
    nb = state.ndim - 2
    pl = np.array(to_limbs(p, L), np.int64)
    neg = np.maximum(-coef, 0).sum(1)
    k_max = int((np.abs(coef).sum(1)).max())
    with x64():
        mask = jnp.int64(0xFFFFFFFF)
        x = state[:, idx].astype(jnp.int64)                                     # (L, m, t, *b)
        d = jnp.sum(x * jnp.asarray(coef).reshape(coef.shape + (1,) * nb), axis=2)
        d = d + jnp.asarray(pl[:, None] * neg[None, :]).reshape((L, len(idx)) + (1,) * nb)
        limbs, carry = [], 0
        for j in range(L):
            t = d[j] + carry
            limbs.append(t & mask)
            carry = t >> 32
        limbs.append(carry)
        steps = k_max.bit_length()               # v <= K·p < 2^steps·p
        qs = jnp.asarray(np.array([to_limbs(p << j, L + 1) for j in reversed(range(steps))],
                                  np.int64).reshape(steps, L + 1))

        def reduce(i, limbs):                    # v -= 2^j·p where v >= 2^j·p
            w, borrow = [], 0
            for v, qj in zip(limbs, qs[i]):
                t = v - qj - borrow
                borrow = (t < 0).astype(jnp.int64)
                w.append(t + (borrow << 32))
            return [jnp.where(borrow == 0, a, b) for a, b in zip(w, limbs)]

        limbs = lax.fori_loop(0, steps, reduce, limbs) if steps > 1 else (
            reduce(0, limbs) if steps else limbs)
        return jnp.stack(limbs[:L]).astype(jnp.uint32)


def _products(a, b, p: int, config: KernelConfig):
    """Montgomery products of Fq rows ``(L, K, *b)``: one elementwise kernel
    (a Pallas kernel on CUDA, the interpreter elsewhere)."""
    ar = FpArith(p, config.unroll)
    return elementwise(lambda r, x, y: r.mul(x, y), [(ar.L,)] * 2, [((ar.L,), jnp.uint32)], ar,
                       config, name="Fq_products")(a, b)


def _inverses(a, p: int, config: KernelConfig):
    ar = FpArith(p, config.unroll)
    return elementwise(lambda r, x: r.inv(x), [(ar.L,)], [((ar.L,), jnp.uint32)], ar, config,
                       name="Fq_inverses")(a)


def run_rounds(plan: RoundPlan, x, config: KernelConfig):
    """Execute ``plan`` on the input rows x ``(L, n_in, *batch)`` -> output
    rows ``(L, n_out, *batch)``."""
    L, batch = x.shape[0], x.shape[2:]
    if len(plan.consts):
        c = jnp.asarray(plan.consts.T).reshape((L, len(plan.consts)) + (1,) * len(batch))
        x = jnp.concatenate([x, jnp.broadcast_to(c, (L, len(plan.consts)) + batch)], axis=1)
    for kind, idx, coef in plan.rounds:
        ops = _lincomb(x, idx, coef, plan.p)
        if kind == "mul":
            k = len(idx) // 2
            r = _products(ops[:, :k], ops[:, k:], plan.p, config)
        else:
            r = _inverses(ops, plan.p, config)
        x = jnp.concatenate([x, r], axis=1)
    return _lincomb(x, *plan.out, plan.p)


def product_rounds(formula, in_prefixes, out_prefixes, p: int, config: KernelConfig,
                   name: str = "formula"):
    """The array function of ``formula`` run as product rounds (see above):
    arguments ``(*prefix, *batch)`` uint32 Montgomery (every prefix ends with
    the L limbs), batch shapes broadcast; returns the outputs (a tuple if
    more than one).  Raises ``NotRoundFormula`` when called if the formula
    selects, compares or loops."""
    in_prefixes = [tuple(q) for q in in_prefixes]
    out_prefixes = [tuple(q) for q in out_prefixes]

    def f(*args):
        args = [jnp.asarray(a) for a in args]
        for a, pre in zip(args, in_prefixes):
            if a.dtype != jnp.uint32 or tuple(a.shape[:len(pre)]) != pre:
                raise ValueError(f"{name}: expected uint32 {pre + ('...',)}, got {a.dtype} {a.shape}")
        plan = record_rounds(formula, in_prefixes, out_prefixes, p)
        batch = jnp.broadcast_shapes(*[a.shape[len(pre):] for a, pre in zip(args, in_prefixes)])
        rows = [jnp.moveaxis(_broadcast(a, pre, batch).reshape((-1, pre[-1]) + batch), 1, 0)
                for a, pre in zip(args, in_prefixes)]
        out = run_rounds(plan, jnp.concatenate(rows, axis=1), config)
        res, i = [], 0
        for pre in out_prefixes:
            k = math.prod(pre[:-1])
            res.append(jnp.moveaxis(out[:, i:i + k], 0, 1).reshape(pre + batch))
            i += k
        return res[0] if len(res) == 1 else tuple(res)

    f.__name__ = name
    return f


def dispatch_rounds(formula, in_prefixes, out_prefixes, p: int, config: KernelConfig, kernel,
                    rounds: str = "cuda", name: str = "formula"):
    """``formula`` as product rounds where the computation is lowered for
    CUDA (rounds="cuda"; every product then picks its Pallas kernel) or
    always (rounds="always"), else ``kernel`` (its elementwise kernel: on the
    CPU one interpreter program, which XLA:CPU compiles and runs much faster
    than the rounds' array code); formulas that are not product rounds always
    use ``kernel``.  In a process without CUDA, or for a computation placed
    on the CPU (the engine's verification on the host CPU of a GPU machine),
    only ``kernel`` is traced, for one placed on a GPU only the rounds;
    otherwise the choice is made per lowering platform
    (``ops.platform.by_platform``)."""
    if rounds not in ("cuda", "always"):
        raise ValueError(f"rounds must be 'cuda' or 'always', got {rounds!r}")
    f = product_rounds(formula, in_prefixes, out_prefixes, p, config, name)

    def g(*args):
        try:
            if rounds == "always" or config.debug:
                return f(*args)
            return by_platform(*args, default=kernel, cuda=f)
        except NotRoundFormula:
            return kernel(*args)

    g.__name__ = name
    return g


# ---------------------------------------------------------------- array API
@dataclasses.dataclass(frozen=True)
class TowerField(FieldOps):
    """Fq6 or Fq12 as an array API: elements ``(*coeff_shape, 12, *batch)``
    uint32 with coeff_shape (3, 2) for Fq6 and (2, 3, 2) for Fq12.  Host
    values are nested coefficient tuples of that shape (ints in [0, p)); a
    batch is a numpy object array ``(*batch, *coeff_shape)`` or nested lists.
    Every device method is jitted; with CUDA (``rounds="cuda"``) or always
    (``rounds="always"``) the product formulas run as product rounds, else
    each method is one elementwise kernel."""
    name: str
    coeff_shape: tuple
    base_field: PrimeField = _Fq
    config: KernelConfig = TOWER_CONFIG
    rounds: str = "cuda"

    def __repr__(self):
        return f"TowerField({self.name})"

    @property
    def p(self) -> int:
        return self.base_field.p

    @property
    def L(self) -> int:
        return self.base_field.L

    @property
    def prefix(self) -> tuple:
        return tuple(self.coeff_shape) + (self.L,)

    @functools.cached_property
    def base_arith(self) -> FpArith:
        return FpArith(self.p, self.config.unroll)

    def lift(self, ar):
        return fp12_over(ar) if len(self.coeff_shape) == 3 else fp6_over(ar)

    @functools.cached_property
    def arith(self):
        return self.lift(self.base_arith)

    @property
    def _base(self) -> PrimeField:
        return dataclasses.replace(self.base_field, config=self.config)

    # ---------------------------------------------------------- host side
    def from_int(self, xs) -> np.ndarray:
        """Coefficient tuple(s) -> ``(*coeff_shape, 12, *shape)`` uint32."""
        arr = np.asarray(xs, dtype=object)
        k = len(self.coeff_shape)
        if arr.shape[arr.ndim - k:] != tuple(self.coeff_shape):
            raise ValueError(f"{self.name}.from_int: expected coefficients of shape "
                             f"{self.coeff_shape} (innermost), got shape {arr.shape}")
        batch_nd = arr.ndim - k
        limbs = self.base_field.from_int(arr)                 # (12, *batch, *coeff)
        return np.ascontiguousarray(np.moveaxis(limbs, list(range(1 + batch_nd, 1 + arr.ndim)),
                                                list(range(k))))

    def to_int(self, arr):
        """-> numpy object array ``(*batch, *coeff_shape)`` of ints; nested
        tuples for a single element."""
        arr = np.asarray(arr)
        k = len(self.coeff_shape)
        if arr.shape[:k + 1] != self.prefix:
            raise ValueError(f"{self.name}: expected shape {self.prefix + ('...',)}, got {arr.shape}")
        moved = np.moveaxis(arr, list(range(k)), list(range(arr.ndim - k, arr.ndim)))
        ints = np.asarray(self.base_field.to_int(moved), dtype=object)
        if ints.ndim == k:
            return _nested_tuple(ints)
        return ints

    def random_ints(self, n: int, rng=None) -> list:
        """n uniform elements as nested tuples (``secrets`` unless a
        ``random.Random`` is given)."""
        size = int(np.prod(self.coeff_shape))
        flat = self.base_field.random_ints(n * size, rng)
        arr = np.array(flat, dtype=object).reshape((n,) + tuple(self.coeff_shape))
        return [_nested_tuple(a) for a in arr]

    def zeros(self, shape=()):
        return jnp.zeros(self.prefix + tuple(shape), jnp.uint32)

    def ones(self, shape=()):
        return self.zeros(shape).at[(0,) * len(self.coeff_shape)].set(self._base.ones(shape))

    def constant(self, c, shape=()):
        """The element with coefficients c (nested tuple) broadcast to ``shape``."""
        v = jnp.asarray(self.from_int(c))
        return jnp.broadcast_to(v.reshape(v.shape + (1,) * len(shape)), v.shape + tuple(shape))

    def sqrt(self, a):
        raise NotImplementedError(f"{self.name}: square roots are not implemented")

    def _ew(self, op, n_in, out="e", name=None, extra_in=()):
        """Formulas with field-element outputs run as product rounds
        (``product_rounds``) with CUDA (``rounds="cuda"``) or always
        (``rounds="always"``, for tests); elsewhere, and for formulas that
        select, compare or loop (eq, is_zero, pow, sqrt), as one elementwise
        kernel (on the CPU: one interpreter program, which XLA:CPU compiles
        much faster than the rounds' array code)."""
        kernel = super()._ew(op, n_in, out, name, extra_in)
        if "b" in out:
            return kernel
        f = op if callable(op) else (lambda ar, *xs: getattr(self.lift(ar), op)(*xs))
        outs = [tuple(self.prefix) if o == "e" else (self.L,) for o in out]
        return dispatch_rounds(f, [tuple(self.prefix)] * n_in + list(extra_in), outs, self.p,
                               self.config, kernel, self.rounds, name=f"{self.name}_{name or op}")

    def _only(self, degree: int, op: str):
        if len(self.coeff_shape) != (3 if degree == 12 else 2):
            raise TypeError(f"{self.name}.{op} is defined on Fq{degree} only")

    # ---------------------------------------------------------- device side
    @functools.partial(jax.jit, static_argnums=0)
    def conjugate(self, a):
        """Fq12: a0 − a1w (= a^(p⁶), the inverse of a unitary element)."""
        self._only(12, "conjugate")
        return self._ew("conj", 1)(a)

    @functools.partial(jax.jit, static_argnums=(0, 2))
    def frobenius(self, a, k: int = 1):
        """a^(p^k)."""
        return self._ew(lambda ar, x: self.lift(ar).frobenius(x, k), 1, name=f"frob{k}")(a)

    @functools.partial(jax.jit, static_argnums=0)
    def mul_by_nonresidue(self, a):
        """Fq6: a·v."""
        self._only(6, "mul_by_nonresidue")
        return self._ew("mul_by_nonresidue", 1)(a)

    @functools.partial(jax.jit, static_argnums=0)
    def mul_by_01(self, a, b0, b1):
        """Fq6: a·(b0 + b1·v) for Fq2 arrays b0, b1 ``(2, 12, *batch)``."""
        self._only(6, "mul_by_01")
        f2 = (2, self.L)
        return self._ew("mul_by_01", 1, extra_in=[f2, f2])(a, b0, b1)

    @functools.partial(jax.jit, static_argnums=0)
    def mul_by_014(self, a, line):
        """Fq12: a·(c0 + c1·v + c4·vw) for a line ``(3, 2, 12, *batch)`` = (c0, c1, c4)."""
        self._only(12, "mul_by_014")
        return self._ew(lambda ar, x, l: self.lift(ar).mul_by_014(x, *l), 1, name="mul_by_014",
                        extra_in=[(3, 2, self.L)])(a, line)

    @functools.partial(jax.jit, static_argnums=0)
    def cyclotomic_square(self, a):
        """Fq12: a² for a in the cyclotomic subgroup (Granger–Scott)."""
        self._only(12, "cyclotomic_square")
        return self._ew("cyclotomic_sqr", 1)(a)


def _nested_tuple(a):
    if isinstance(a, np.ndarray):
        return tuple(_nested_tuple(x) for x in a)
    return int(a)


Fq6 = TowerField("Fq6", (3, 2))
Fq12 = TowerField("Fq12", (2, 3, 2))
