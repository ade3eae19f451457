"""BLS12-381 G1 and G2: short Weierstrass curves y² = x³ + b with a = 0.

G1 is over Fq with b = 4; G2 is the M-twist over Fq2 with b = 4(1 + u).
Formula layer ``CurveArith`` (points are tuples of field values; generic over
``FpArith``/``Fp2Arith``) and array API ``Curve``.

Coordinates:
* projective (X : Y : Z), x = X/Z, y = Y/Z, identity (0 : 1 : 0); arrays of
  shape ``(3, *field_prefix, *batch)``;
* affine (x, y) for stored points, with the identity encoded as (0, 0) (not on
  the curve, since b != 0); arrays ``(2, *field_prefix, *batch)``.

Formulas are Renes–Costello–Batina 2015 for a = 0 (b3 = 3b): complete addition
(Algorithm 7, 12M + 2·m_b3), mixed addition with an affine point (Algorithm 8,
11M + m_b3; the affine identity is handled by a select) and doubling
(Algorithm 9, 6M + 2S + m_b3).  They are valid for every input pair on curves
of odd order, so the identity and P + P need no branches.  Where a formula
sums or subtracts products it asks for the sum (``F.dots``), which the
GPU's Fq arithmetic computes with one Montgomery reduction (``ops.ptx``).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ops.elementwise import DEFAULT, KernelConfig, elementwise
from ops.field import Fq, Fr
from ops.limbs import Unroll, to_limbs
from ops.tower import Fp2Arith, Fq2


@dataclasses.dataclass(frozen=True)
class CurveArith:
    """Point formulas over a field arithmetic F (the formula layer).

    b3_mul(F, v) multiplies a field value by 3b."""
    F: Any
    b: Any                      # int (Fq) or pair (Fq2)

    def mul_b3(self, v):
        if isinstance(self.F, Fp2Arith):       # 3b = 12(1 + u)
            return self.F.mul_by_nonresidue(self.F.mul_small(v, 12))
        return self.F.mul_small(v, 3 * self.b)

    def identity(self, like):
        F = self.F
        return (F.zero(like), F.one(like), F.zero(like))

    def _tail(self, t0, t1, b3z, t3, t4, y3):
        """The common end of RCB Algorithms 7 and 8 (6M, as three sums of two
        products: ``dots``, one reduction each where the field has it)."""
        F = self.F
        t0 = F.add(F.dbl(t0), t0)
        z3, t1 = F.add(t1, b3z), F.sub(t1, b3z)
        y3 = self.mul_b3(y3)
        return tuple(F.dots([[(t3, t1), (t4, y3, -1)], [(t1, z3), (y3, t0)],
                             [(z3, t4), (t0, t3)]]))

    def add_products(self, P, Q):
        """RCB Algorithm 7 up to its common tail: (t0, t1, 3b·t2, t3, t4, y3)."""
        F = self.F
        (X1, Y1, Z1), (X2, Y2, Z2) = P, Q
        t0, t1, t2, t3, t4, t5 = F.muls([
            (X1, X2), (Y1, Y2), (Z1, Z2), (F.add(X1, Y1), F.add(X2, Y2)),
            (F.add(Y1, Z1), F.add(Y2, Z2)), (F.add(X1, Z1), F.add(X2, Z2))])
        t3 = F.sub(t3, F.add(t0, t1))
        t4 = F.sub(t4, F.add(t1, t2))
        y3 = F.sub(t5, F.add(t0, t2))
        return (t0, t1, self.mul_b3(t2), t3, t4, y3)

    def tail(self, T):
        return self._tail(*T)

    def add(self, P, Q):
        """Complete projective addition, RCB Algorithm 7 (a = 0)."""
        return self._tail(*self.add_products(P, Q))

    def madd_products(self, P, Q):
        """RCB Algorithm 8 up to the common tail."""
        F = self.F
        (X1, Y1, Z1), (x2, y2) = P, Q
        t0, t1, t3, t4, y3 = F.muls([(X1, x2), (Y1, y2), (F.add(x2, y2), F.add(X1, Y1)),
                                     (y2, Z1), (x2, Z1)])
        t3 = F.sub(t3, F.add(t0, t1))
        return (t0, t1, self.mul_b3(Z1), t3, F.add(t4, Y1), F.add(y3, X1))

    def madd_tail(self, T, P, Q):
        """The tail of Algorithm 8, and P itself where Q is the affine identity."""
        F = self.F
        R = self._tail(*T)
        q_inf = F.is_zero(Q[0]) & F.is_zero(Q[1])
        return tuple(F.select(q_inf, p, r) for p, r in zip(P, R))

    def madd(self, P, Q):
        """P (projective) + Q (affine; (0, 0) is the identity), RCB Algorithm 8."""
        return self.madd_tail(self.madd_products(P, Q), P, Q)

    def dbl_products(self, P):
        """The first products of RCB Algorithm 9: (Y², YZ, 3b·Z², XY)."""
        F = self.F
        X, Y, Z = P
        t0, t1, t2, xy = F.muls([(Y, Y), (Y, Z), (Z, Z), (X, Y)])
        return (t0, t1, self.mul_b3(t2), xy)

    def dbl_tail(self, T):
        F = self.F
        t0, t1, t2, xy = T
        z3 = F.dbl(F.dbl(F.dbl(t0)))
        x3, z3b = F.muls([(t2, z3), (t1, z3)])
        y3 = F.add(t0, t2)
        t0 = F.sub(t0, F.add(F.dbl(t2), t2))
        y3, x3b = F.muls([(t0, y3), (t0, xy)])
        return (F.dbl(x3b), F.add(x3, y3), z3b)

    def dbl(self, P):
        """2P, RCB Algorithm 9 (a = 0)."""
        return self.dbl_tail(self.dbl_products(P))

    def neg(self, P):
        return (P[0], self.F.neg(P[1]), P[2])

    # XYZZ coordinates (X, Y, ZZ, ZZZ) with ZZ³ = ZZZ²: the affine point
    # (X/ZZ, Y/ZZZ), the identity where ZZ = 0 (hyperelliptic.org/EFD,
    # "xyzz").  Incomplete but cheap: a mixed addition is 8M + 2S against
    # RCB's 11M, so the MSM's bucket accumulation may keep its buckets in it
    # (``ops.segsum``, ``MSMConfig.xyzz``).
    def xyzz_identity(self, like):
        z = self.F.zero(like)
        return (z, z, z, z)

    def xyzz_madd(self, A, Q):
        """A (XYZZ) + Q (affine, not the identity), madd-2008-s, with the
        identity A giving Q.  Returns (sum, dbl): dbl marks the lanes where
        A = Q, whose sum is wrong (the caller substitutes ``xyzz_mdbl(Q)``);
        A = −Q gives the identity (ZZ = 0) by the formula itself."""
        F = self.F
        X1, Y1, ZZ1, ZZZ1 = A
        x2, y2 = Q
        U2, S2 = F.muls([(x2, ZZ1), (y2, ZZZ1)])
        P, R = F.sub(U2, X1), F.sub(S2, Y1)
        PP, RR = F.sqr(P), F.sqr(R)
        PPP, Qx = F.muls([(P, PP), (X1, PP)])
        X3 = F.sub(F.sub(RR, PPP), F.dbl(Qx))
        Y3, = F.dots([[(R, F.sub(Qx, X3)), (Y1, PPP, -1)]])
        ZZ3, ZZZ3 = F.muls([(ZZ1, PP), (ZZZ1, PPP)])
        inf = F.is_zero(ZZ1)
        one = F.one(F.like(x2))
        out = tuple(F.select(inf, q, r) for q, r in zip((x2, y2, one, one), (X3, Y3, ZZ3, ZZZ3)))
        return out, ~inf & F.is_zero(P) & F.is_zero(R)

    def xyzz_mdbl(self, Q):
        """2Q for affine Q (not the identity; G1 and G2 have no point of
        order 2), mdbl-2008-s-1 in XYZZ: 3M + 3S."""
        F = self.F
        x, y = Q
        U = F.dbl(y)
        V, XX = F.sqr(U), F.sqr(x)
        W, S = F.muls([(U, V), (x, V)])
        M = F.add(F.dbl(XX), XX)
        X3 = F.sub(F.sqr(M), F.dbl(S))
        Y3, = F.dots([[(M, F.sub(S, X3)), (W, y, -1)]])
        return (X3, Y3, V, W)

    def xyzz_to_proj(self, A):
        """XYZZ -> projective (X·ZZZ : Y·ZZ : ZZ·ZZZ); the identity -> (0 : 1 : 0)."""
        F = self.F
        X, Y, ZZ, ZZZ = A
        x, y, z = F.muls([(X, ZZZ), (Y, ZZ), (ZZ, ZZZ)])
        inf = F.is_zero(ZZ)
        like = F.like(X)
        return (F.select(inf, F.zero(like), x), F.select(inf, F.one(like), y), z)

    def eq(self, P, Q):
        """Projective equality: X1Z2 = X2Z1 and Y1Z2 = Y2Z1."""
        F = self.F
        a, b, c, d = F.muls([(P[0], Q[2]), (Q[0], P[2]), (P[1], Q[2]), (Q[1], P[2])])
        return F.eq(a, b) & F.eq(c, d)

    def is_identity(self, P):
        return self.F.is_zero(P[2])

    def on_curve(self, P):
        """Y²Z = X³ + bZ³ (the identity (0:1:0) satisfies it; (0:0:0) is rejected)."""
        F = self.F
        X, Y, Z = P
        yy, xx, zz = F.muls([(Y, Y), (X, X), (Z, Z)])
        lhs, x3, z3 = F.muls([(yy, Z), (xx, X), (zz, Z)])
        bz3 = F.mul(z3, F.const(self.b, F.like(X)))
        return F.eq(lhs, F.add(x3, bz3)) & ~(F.is_zero(X) & F.is_zero(Y) & F.is_zero(Z))

    def affine_on_curve(self, A):
        """y² = x³ + b, or the encoded identity (0, 0)."""
        F = self.F
        x, y = A
        yy, xx = F.muls([(y, y), (x, x)])
        ok = F.eq(yy, F.add(F.mul(xx, x), F.const(self.b, F.like(x))))
        return ok | (F.is_zero(x) & F.is_zero(y))

    def from_affine(self, A):
        F = self.F
        x, y = A
        like = F.like(x)
        inf = F.is_zero(x) & F.is_zero(y)
        return (x, F.select(inf, F.one(like), y), F.select(inf, F.zero(like), F.one(like)))

    def scalar_mul(self, P, k, nbits: int):
        """k·P for per-lane integer scalars k (raw 32-bit limb rows, least
        significant first), double-and-add from bit nbits−1 down, as one loop
        of 2·nbits complete additions: even steps add the accumulator to
        itself, odd steps add P or the identity, so a kernel holds a single
        addition formula."""
        F = self.F
        O = self.identity(F.like(P[0]))

        def body(i, acc):
            bit = F.scalar_bit(k, nbits - 1 - i // 2)
            addend = tuple(F.select(bit, p, o) for p, o in zip(P, O))
            even = (i & 1) == 0
            return self.add(acc, tuple(F.select(even, a, b) for a, b in zip(acc, addend)))

        return F.loop(2 * nbits, body, O)


@dataclasses.dataclass(frozen=True)
class Curve:
    """A curve group as an array API.

    Arrays: projective ``(3, *fp, *batch)``, affine ``(2, *fp, *batch)`` with
    fp the field's prefix ((12,) for G1, (2, 12) for G2).  Host values: affine
    tuples of ints ((x, y) for G1; ((x0, x1), (y0, y1)) for G2), None for the
    identity.
    """
    name: str
    field: Any                   # PrimeField or QuadraticField
    b: Any
    generator: tuple             # affine ints
    cofactor: int
    config: KernelConfig = DEFAULT
    split: bool = False          # run add/madd/double as two kernels (products, tail)

    def __repr__(self):
        return f"Curve({self.name})"

    @functools.cached_property
    def _field(self):
        return dataclasses.replace(self.field, config=self.config)

    @functools.cached_property
    def arith(self) -> CurveArith:
        return CurveArith(self._field.arith, self.b)

    @property
    def fp(self) -> tuple:
        return tuple(self._field.prefix)

    @property
    def proj(self) -> tuple:
        return (3,) + self.fp

    @property
    def aff(self) -> tuple:
        return (2,) + self.fp

    @property
    def order(self) -> int:
        return Fr.p

    def lift(self, ar):
        """Point formulas over base-field arithmetic ``ar``."""
        return CurveArith(self._field.lift(ar), self.b)

    def _ew(self, op, ins, outs, name=None):
        """Elementwise kernel of ``op`` (a CurveArith method name or a
        formula(ar, *xs)); ins/outs: P projective, A affine, X XYZZ, F field
        element, b bool, or an explicit prefix tuple."""
        f = op if callable(op) else (lambda ar, *xs: getattr(self.lift(ar), op)(*xs))
        kinds = {"P": (self.proj, jnp.uint32), "A": (self.aff, jnp.uint32),
                 "b": ((), jnp.bool_), "F": (self.fp, jnp.uint32),
                 "T": ((6,) + self.fp, jnp.uint32), "D": ((4,) + self.fp, jnp.uint32),
                 "X": ((4,) + self.fp, jnp.uint32)}
        in_pre = [kinds[k][0] if isinstance(k, str) else k for k in ins]
        return elementwise(f, in_pre, [kinds[o] for o in outs], self._field.base_arith, self.config,
                           name=f"{self.name}_{name or op}")

    # ---------------------------------------------------------- host side
    def _coord_from_int(self, vals):
        return self._field.from_int(vals)

    def from_affine_ints(self, pts) -> np.ndarray:
        """A sequence of affine host points (None = identity) -> affine array
        ``(2, *fp, k)``.  Each point must be on the curve (subgroup membership
        is ``in_subgroup``'s job)."""
        zero = 0 if self.fp == (12,) else (0, 0)
        xs, ys = [], []
        for i, pt in enumerate(pts):
            if pt is None:
                xs.append(zero), ys.append(zero)
                continue
            x, y = pt
            if not self._on_curve_int(x, y):
                raise ValueError(f"{self.name}: point {i} is not on the curve")
            xs.append(x), ys.append(y)
        if self.fp == (12,):
            coords = [self._field.from_int(np.array(v, dtype=object).reshape(len(v))) for v in (xs, ys)]
        else:
            coords = [self._field.from_int(np.array([tuple(map(int, c)) for c in v],
                                                    dtype=object).reshape(len(v), 2)) for v in (xs, ys)]
        return np.stack(coords)

    def from_affine_int(self, pt) -> np.ndarray:
        """One affine host point -> ``(2, *fp)``."""
        return self.from_affine_ints([pt])[..., 0]

    def _on_curve_int(self, x, y) -> bool:
        p = Fq.p
        if self.fp == (12,):
            return (y * y - x * x * x - self.b) % p == 0
        mul = lambda a, b: ((a[0] * b[0] - a[1] * b[1]) % p, (a[0] * b[1] + a[1] * b[0]) % p)
        lhs = mul(y, y)
        rhs = mul(mul(x, x), x)
        return ((lhs[0] - rhs[0] - self.b[0]) % p, (lhs[1] - rhs[1] - self.b[1]) % p) == (0, 0)

    def to_affine_ints(self, arr, projective: bool = True):
        """Device points -> list of host affine points (None = identity); a
        single point for an unbatched array."""
        arr = jnp.asarray(arr)
        aff = self.to_affine(arr) if projective else arr
        nb = len(self.fp) + 1
        batch = aff.shape[nb:]
        flat = np.asarray(aff).reshape(aff.shape[:nb] + (-1,))
        xs = self._field.to_int(flat[0])
        ys = self._field.to_int(flat[1])
        out = []
        for x, y in zip(xs, ys):
            if self.fp == (12,):
                x, y = int(x), int(y)
                out.append(None if x == 0 and y == 0 else (x, y))
            else:
                x, y = (int(x[0]), int(x[1])), (int(y[0]), int(y[1]))
                out.append(None if x == (0, 0) and y == (0, 0) else (x, y))
        return out[0] if batch == () else out

    def generator_affine(self) -> jnp.ndarray:
        return jnp.asarray(self.from_affine_int(self.generator))

    def identity(self, shape=()):
        F = self._field
        return jnp.stack([F.zeros(shape), F.ones(shape), F.zeros(shape)])

    # ---------------------------------------------------------- device side
    @functools.partial(jax.jit, static_argnums=0)
    def add(self, P, Q):
        """Complete projective addition (any inputs, identity and P + P included)."""
        if self.split:
            return self._ew("tail", "T", "P")(self._ew("add_products", "PP", "T")(P, Q))
        return self._ew("add", "PP", "P")(P, Q)

    @functools.partial(jax.jit, static_argnums=0)
    def madd(self, P, A):
        """Projective P + affine A ((0, 0) = identity)."""
        if self.split:       # the tail kernel is add's; the identity select is XLA glue
            R = self._ew("tail", "T", "P")(self._ew("madd_products", "PA", "T")(P, A))
            q_inf = jnp.all(A == 0, axis=tuple(range(len(self.aff))))
            return jnp.where(q_inf, P, R)
        return self._ew("madd", "PA", "P")(P, A)

    @functools.partial(jax.jit, static_argnums=0)
    def double(self, P):
        if self.split:
            return self._ew("dbl_tail", "D", "P")(self._ew("dbl_products", "P", "D")(P))
        return self._ew("dbl", "P", "P")(P)

    @functools.partial(jax.jit, static_argnums=0)
    def neg(self, P):
        return self._ew("neg", "P", "P")(P)

    @functools.partial(jax.jit, static_argnums=0)
    def eq(self, P, Q):
        return self._ew("eq", "PP", "b")(P, Q)

    @functools.partial(jax.jit, static_argnums=0)
    def is_identity(self, P):
        return self._ew("is_identity", "P", "b")(P)

    @functools.partial(jax.jit, static_argnums=0)
    def is_on_curve(self, P):
        """Projective points satisfying Y²Z = X³ + bZ³ (not (0:0:0))."""
        return self._ew("on_curve", "P", "b")(P)

    @functools.partial(jax.jit, static_argnums=0)
    def is_on_curve_affine(self, A):
        return self._ew("affine_on_curve", "A", "b")(A)

    @functools.partial(jax.jit, static_argnums=0)
    def from_affine(self, A):
        return self._ew("from_affine", "A", "P")(A)

    @functools.partial(jax.jit, static_argnums=0)
    def to_affine(self, P):
        """Projective -> affine with ONE batch inversion of the Z's over the
        whole batch; the identity maps to (0, 0)."""
        zinv = self._field.batch_inv(P[2])
        return self._ew(lambda ar, P, zi: self._scale(self.lift(ar).F, P, zi), ["P", "F"], "A",
                        "scale")(P, zinv)

    @staticmethod
    def _scale(F, P, zi):
        return (F.mul(P[0], zi), F.mul(P[1], zi))

    @functools.partial(jax.jit, static_argnums=(0, 3))
    def scalar_mul_int(self, P, k, nbits: int):
        """k·P for integer scalars given as canonical uint32 limbs ``(nk, *batch)``
        (any size; ``nbits`` bits are used)."""
        nk = k.shape[0]
        return self._ew(lambda ar, P, k: self.lift(ar).scalar_mul(P, k, nbits), ["P", (nk,)], "P",
                        f"smul{nbits}")(P, k)

    @functools.partial(jax.jit, static_argnums=0)
    def scalar_mul(self, P, s):
        """s·P for Fr elements s ``(8, *batch)`` (Montgomery form), per element."""
        return self.scalar_mul_int(P, Fr.from_montgomery(s), 255)

    @functools.partial(jax.jit, static_argnums=0)
    def in_subgroup(self, P):
        """[r]P = O (r the prime order of G1/G2).  Slow path: 255 doublings."""
        r = jnp.asarray(np.array(to_limbs(Fr.p, 8), dtype=np.uint32))
        r = jnp.broadcast_to(r.reshape((8,) + (1,) * (P.ndim - len(self.proj))),
                             (8,) + P.shape[len(self.proj):])
        return self.is_identity(self.scalar_mul_int(P, r, 255)) & self.is_on_curve(P)

    @functools.partial(jax.jit, static_argnums=(0, 3))
    def fixed_base_mul(self, base, s, window: int = 8):
        """s_i·B for one affine base B and many Fr scalars s ``(8, *batch)``.

        Windowed table: T[w][d] = d·2^(c·w)·B for c = ``window``; then
        s·B = Σ_w T[w][digit_w(s)], one mixed addition per window (255/c of
        them) after an XLA gather.  Returns projective points."""
        c = window
        nwin = -(-255 // c)
        batch = s.shape[1:]
        k = Fr.from_montgomery(s)
        table = self._window_table(base, c, nwin)            # (nwin, 2, *fp, 2^c) affine
        # digits: bits [c·w, c·w + c) of k
        kk = k.reshape(8, -1)
        acc = self.identity(kk.shape[1:])

        def step(w, acc):
            bitpos = w * c
            lo_w = bitpos // 32
            sh = (bitpos % 32).astype(jnp.uint32)
            pair = jnp.take(jnp.concatenate([kk, jnp.zeros_like(kk[:1])]), jnp.stack([lo_w, lo_w + 1]),
                            axis=0)
            v = (pair[0].astype(jnp.uint32) >> sh) | jnp.where(
                sh == 0, jnp.uint32(0), pair[1] << ((jnp.uint32(32) - sh) & jnp.uint32(31)))
            d = (v & jnp.uint32((1 << c) - 1)).astype(jnp.int32)
            tw = lax.dynamic_index_in_dim(table, w, axis=0, keepdims=False)
            pts = jnp.take(tw, d, axis=tw.ndim - 1)
            return self.madd(acc, pts)

        acc = lax.fori_loop(0, nwin, step, acc)
        return acc.reshape(self.proj + batch)

    def _window_table(self, base, c, nwin):
        """Affine table (nwin, 2, *fp, 2^c): entry [w, :, d] = d·2^(c·w)·B."""
        B = self.from_affine(base)                        # (3, *fp)

        def next_window(Pw, _):
            Q = Pw
            for _ in range(c):
                Q = self.double(Q)
            return Q, Pw

        _, gens = lax.scan(next_window, B, None, length=nwin)      # (nwin, 3, *fp): 2^(cw)·B
        gens = jnp.moveaxis(gens, 0, -1)                            # (3, *fp, nwin)

        def next_multiple(acc, _):
            return self.add(acc, gens), acc

        _, mults = lax.scan(next_multiple, self.identity((nwin,)), None, length=1 << c)
        mults = jnp.moveaxis(mults, 0, -1)                          # (3, *fp, nwin, 2^c)
        aff = self.to_affine(mults)
        return jnp.moveaxis(aff, -2, 0)                             # (nwin, 2, *fp, 2^c)


G1_GEN = (0x17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb,
          0x08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1)
G2_GEN = ((0x024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8,
           0x13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e),
          (0x0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801,
           0x0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be))
H1 = 0x396c8c005555e1568c00aaab0000aaab
H2 = 0x5d543a95414e7f1091d50792876a202cd91de4547085abaa68a205b2e5a7ddfa628f1cb4d9e82ef21537e293a6691ae1616ec6e786f0c70cf1c38e31c7238e5

# Kernel settings from bench/NOTES.md (H200): G1 formulas with rolled CIOS loops (fastest;
# ~20-30 s to compile once, then cached); G2 formulas are twice the size, so they run as two
# kernels each (products, tail) with rolled inner loops and product groups as table loops.
G2_CONFIG = KernelConfig(unroll=Unroll(inner=False, table=True))
G1 = Curve("G1", Fq, 4, G1_GEN, H1)
G2 = Curve("G2", Fq2, (4, 4), G2_GEN, H2, config=G2_CONFIG, split=True)
