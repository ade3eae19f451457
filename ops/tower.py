"""Fq2 = Fq[u]/(u² + 1): the quadratic extension that carries G2.

Formula layer ``Fp2Arith`` (values are pairs (c0, c1) of Fq limb lists, the
element c0 + c1·u) and array API ``QuadraticField`` (arrays of shape
``(2, 12, *batch)``: axis 0 is (c0, c1), axis 1 the Montgomery limbs of each).

Math: (a0 + a1u)(b0 + b1u) = (a0b0 − a1b1) + ((a0+a1)(b0+b1) − a0b0 − a1b1)u
(Karatsuba, 3 Fq products); (a0 + a1u)² = (a0+a1)(a0−a1) + 2a0a1·u (2 products);
conjugate and Frobenius (a^p = conj(a), since p ≡ 3 mod 4); inverse
conj(a)/(a0² + a1²); square root by Adj–Rodríguez-Henríquez, Algorithm 9
(p ≡ 3 mod 4): a1 = a^((p−3)/4), α = a1²a, x0 = a1·a; α = −1 → x = u·x0, else
x = (1 + α)^((p−1)/2)·x0; it exists iff x² = a.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from ops.elementwise import DEFAULT, KernelConfig
from ops.field import FieldOps, FpArith, PrimeField, Fq as _Fq, dots_by_products, \
    pow_by_constant, term_sign


@dataclasses.dataclass(frozen=True)
class Fp2Arith:
    """Fq2 arithmetic on pairs of limb lists (the formula layer)."""
    base: FpArith

    @property
    def p(self):
        return self.base.p

    def const(self, c, like):
        """c = (c0, c1) integers."""
        return (self.base.const(c[0], like), self.base.const(c[1], like))

    def zero(self, like):
        return (self.base.zero(like), self.base.zero(like))

    def one(self, like):
        return (self.base.one(like), self.base.zero(like))

    def add(self, a, b):
        F = self.base
        return (F.add(a[0], b[0]), F.add(a[1], b[1]))

    def sub(self, a, b):
        F = self.base
        return (F.sub(a[0], b[0]), F.sub(a[1], b[1]))

    def neg(self, a):
        return (self.base.neg(a[0]), self.base.neg(a[1]))

    def dbl(self, a):
        return self.add(a, a)

    def conj(self, a):
        return (a[0], self.base.neg(a[1]))

    frobenius = conj

    def mul(self, a, b):
        F = self.base
        if F.dot_terms >= 2:          # two sums of two Fq products, one reduction each
            return self.dots([[(a, b)]])[0]
        t0, t1, t2 = F.muls([(a[0], b[0]), (a[1], b[1]),
                             (F.add(a[0], a[1]), F.add(b[0], b[1]))])
        return (F.sub(t0, t1), F.sub(t2, F.add(t0, t1)))

    def sqr(self, a):
        F = self.base
        t0, t1 = F.muls([(F.add(a[0], a[1]), F.sub(a[0], a[1])), (a[0], a[1])])
        return (t0, F.dbl(t1))

    def muls(self, pairs):
        return [self.mul(x, y) for x, y in pairs]

    def dots(self, groups):
        """[Σ_(x,y,±) ∈ g ±x·y for g in groups] (terms as ``FpArith.dots``):
        where the base field sums 2·|g| products in one reduction, each Fq2
        sum is two such Fq sums, Σ ±(x0·y0 − x1·y1) and Σ ±(x0·y1 + x1·y0)
        (u² = −1); else ``dots_by_products`` (Karatsuba products, then the
        sums)."""
        F = self.base
        if 2 * max(len(g) for g in groups) > F.dot_terms:
            return dots_by_products(self, groups)
        def parts(g):             # the Fq terms of the sum's real and u parts
            re, im = [], []
            for t in g:
                (x, y), s = t[:2], term_sign(t)
                re += [(x[0], y[0], s), (x[1], y[1], -s)]
                im += [(x[0], y[1], s), (x[1], y[0], s)]
            return re, im
        sums = F.dots([part for g in groups for part in parts(g)])
        return [(sums[2 * i], sums[2 * i + 1]) for i in range(len(groups))]

    def mul_base(self, a, s):
        """a · s for s in Fq."""
        return (self.base.mul(a[0], s), self.base.mul(a[1], s))

    def mul_small(self, a, k: int):
        return (self.base.mul_small(a[0], k), self.base.mul_small(a[1], k))

    def mul_by_nonresidue(self, a):
        """a · (1 + u), the sextic non-residue of the BLS12-381 tower."""
        F = self.base
        return (F.sub(a[0], a[1]), F.add(a[0], a[1]))

    def mul_by_u(self, a):
        return (self.base.neg(a[1]), a[0])

    def is_zero(self, a):
        return self.base.is_zero(a[0]) & self.base.is_zero(a[1])

    def eq(self, a, b):
        return self.base.eq(a[0], b[0]) & self.base.eq(a[1], b[1])

    def select(self, c, a, b):
        return (self.base.select(c, a[0], b[0]), self.base.select(c, a[1], b[1]))

    # ---- control flow, delegated to the base arithmetic
    def like(self, v):
        return self.base.like(v[0])

    def loop(self, n, body, init):
        return self.base.loop(n, body, init)

    def exp_bit(self, bits, i):
        return self.base.exp_bit(bits, i)

    def scalar_bit(self, k, pos):
        return self.base.scalar_bit(k, pos)

    def pow(self, a, e: int):
        """a^e, constant e, one loop over the bits."""
        return pow_by_constant(self, a, e)

    def inv(self, a):
        """conj(a)/(a0² + a1²); 0 -> 0."""
        F = self.base
        n0, n1 = F.muls([(a[0], a[0]), (a[1], a[1])])
        t = F.inv(F.add(n0, n1))
        return (F.mul(a[0], t), F.neg(F.mul(a[1], t)))

    def sqrt(self, a):
        """(root, exists); Adj–Rodríguez-Henríquez Alg. 9 for p ≡ 3 mod 4."""
        p = self.p
        like = self.like(a)
        a1 = self.pow(a, (p - 3) // 4)
        alpha = self.mul(self.sqr(a1), a)
        x0 = self.mul(a1, a)
        minus_one = self.const((p - 1, 0), like)
        is_m1 = self.eq(alpha, minus_one)
        b = self.pow(self.add(self.one(like), alpha), (p - 1) // 2)
        x = self.select(is_m1, self.mul_by_u(x0), self.mul(b, x0))
        return x, self.eq(self.sqr(x), a)


@dataclasses.dataclass(frozen=True)
class QuadraticField(FieldOps):
    """Fq2 as an array API: elements ``(2, 12, *batch)`` uint32 (see module doc).
    Host values are pairs (c0, c1) of ints; a batch is a numpy object array of
    such pairs or a nested list of them."""
    name: str
    base_field: PrimeField
    config: KernelConfig = DEFAULT

    def __repr__(self):
        return f"QuadraticField({self.name})"

    @functools.cached_property
    def arith(self) -> Fp2Arith:
        return Fp2Arith(FpArith(self.base_field.p, self.config.unroll))

    @property
    def p(self):
        return self.base_field.p

    @property
    def L(self):
        return self.base_field.L

    @property
    def prefix(self):
        return (2, self.L)

    @property
    def nbytes(self):
        return 2 * self.base_field.nbytes

    @property
    def _base(self) -> PrimeField:
        return dataclasses.replace(self.base_field, config=self.config)

    @property
    def base_arith(self) -> FpArith:
        return self.arith.base

    def lift(self, ar):
        return Fp2Arith(ar)

    # ---------------------------------------------------------- host side
    def from_int(self, xs) -> np.ndarray:
        """Pair(s) (c0, c1) of ints in [0, p) -> ``(2, 12, *shape)`` uint32."""
        arr = np.asarray(xs, dtype=object)
        if arr.shape[-1:] != (2,):
            raise ValueError(f"{self.name}.from_int: expected pairs (c0, c1), got shape {arr.shape}")
        c0 = self.base_field.from_int(arr[..., 0])
        c1 = self.base_field.from_int(arr[..., 1])
        return np.stack([c0, c1])

    def to_int(self, arr):
        """-> numpy object array (*batch, 2) of ints; a tuple for one element."""
        arr = np.asarray(arr)
        if arr.shape[:2] != (2, self.L):
            raise ValueError(f"{self.name}: expected shape (2, {self.L}, ...), got {arr.shape}")
        c0 = np.asarray(self.base_field.to_int(arr[0]), dtype=object)
        c1 = np.asarray(self.base_field.to_int(arr[1]), dtype=object)
        if c0.ndim == 0:
            return (int(c0), int(c1))
        return np.stack([c0, c1], axis=-1)

    def random_ints(self, n: int, rng=None):
        return list(zip(self.base_field.random_ints(n, rng), self.base_field.random_ints(n, rng)))

    def random(self, key, shape=()):
        k0, k1 = jax.random.split(key)
        return jnp.stack([self._base.random(k0, tuple(shape)), self._base.random(k1, tuple(shape))])

    def zeros(self, shape=()):
        return jnp.zeros((2, self.L) + tuple(shape), jnp.uint32)

    def ones(self, shape=()):
        return jnp.stack([self._base.ones(shape), self._base.zeros(shape)])

    def constant(self, c, shape=()):
        return jnp.stack([self._base.constant(c[0], shape), self._base.constant(c[1], shape)])

    # ---------------------------------------------------------- device side
    @functools.partial(jax.jit, static_argnums=0)
    def conjugate(self, a):
        return self._ew("conj", 1)(a)

    @functools.partial(jax.jit, static_argnums=0)
    def frobenius(self, a):
        """a^p (= conjugate for Fq2)."""
        return self._ew("frobenius", 1)(a)

    @functools.partial(jax.jit, static_argnums=0)
    def mul_by_nonresidue(self, a):
        return self._ew("mul_by_nonresidue", 1)(a)

    @functools.partial(jax.jit, static_argnums=(0, 2))
    def batch_inv(self, a, chunk: int = 32):
        """Inverse of every element: one batched Fq inversion of the norms."""
        F = self._base
        nrm = self._ew(lambda ar, x: ar.add(*ar.muls([(x[0], x[0]), (x[1], x[1])])), 1,
                       out="f", name="norm")(a)
        t = F.batch_inv(nrm, chunk)
        return self._ew(lambda ar, x, s: (ar.mul(x[0], s), ar.neg(ar.mul(x[1], s))), 1,
                        name="conj_scale", extra_in=[(self.L,)])(a, t)


Fq2 = QuadraticField("Fq2", _Fq)
