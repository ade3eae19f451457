"""The optimal ate pairing on BLS12-381, batched: e: G1 × G2 → GT ⊂ Fq12*.

e(P, Q) = f_{x,Q}(P)^(3(p¹²−1)/r), exactly arkworks' and blst's value (the
same Fq12 coordinates, checked byte for byte against arkworks); py_ecc's
pairing(Q, P) = f_{|x|,Q}(P)^((p¹²−1)/r) is the same pairing to the power −3.

Miller loop (arkworks ``Bls12::multi_miller_loop``): T = Q in homogeneous
projective coordinates on the M-type twist E': y² = x³ + 4ξ; for each bit of
|x| = 0xd201000000010000 after the leading one: f ← f², T ← 2T with the
tangent line, then (bit set) T ← T + Q with the chord line; each line is
evaluated at P as c0 + (c1·x_P)·v + (c2·y_P)·vw (an "014" sparse Fq12
element) and multiplied into f.  x is negative, so f is conjugated at the end.
Several pairs share one f (``multi_miller_loop``): each step squares f once
and multiplies in every pair's line.  Pairs with P or Q the identity
(affine (0, 0)) contribute lines equal to 1, i.e. e(O, Q) = e(P, O) = 1.

Final exponentiation: easy part f^((p⁶−1)(p²+1)), then the hard part of
Hayashida–Hayasaka–Teruya (eprint 2020/875), exponent
3·Φ₁₂(p)/r = (x−1)²(x+p)(x²+p²−1) + 3, with five exponentiations by x in the
cyclotomic subgroup (Granger–Scott squarings).

Kernels and loops.  Each formula (Fq12 square, doubling step + line,
addition step + line, sparse line product, Fq12 product, cyclotomic square,
Frobenius, conjugate, inverse) is one call of ``ops.fq12.dispatch_rounds``:
with CUDA it runs as product rounds (small-integer linear maps in XLA between
rounds of stacked Fq products, every product in the same 861-op Pallas
kernel; ``python -m bench.kernel_size --pairing`` lists them), elsewhere as
one interpreter program per formula.  The Miller loop is one ``lax.scan``
over the fixed step pattern (a ``lax.cond`` picks the doubling or the
addition step), and the final exponentiation is a straight-line Fq12
program (``FINAL_EXP_PROGRAM``, 363 steps) run by one ``lax.fori_loop`` over
a ``lax.switch`` of its six formulas, so each formula appears once per
compiled program.  Measured on the 2-core CPU box (batch 2, trace + XLA
compile, before product rounds): this Miller loop 7.8 + 4.8 s (a fori_loop
over the bits with the addition step under a cond: 7.0 + 6.5 s; a static
Python loop over the steps: 5.2 + 47.6 s for the first 19 of its 68 steps),
this final exponentiation 10.0 + 6.7 s (written out with five fori_loop
exponentiations by x: 8.7 + 26.8 s; as one formula, ~140 s of tracing).

Arrays: P affine G1 ``(2, 12, *batch)``, Q affine G2 ``(2, 2, 12, *batch)``
(``ops.curve`` layouts, (0, 0) = identity); GT / Miller-loop values are Fq12
arrays ``(2, 3, 2, 12, *batch)`` (``ops.fq12``).  Batch shapes broadcast.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ops.elementwise import elementwise
from ops.field import Fq, FpArith, P_FQ
from ops.fq12 import TOWER_CONFIG as CONFIG, Fq12, dispatch_rounds
from ops.tower import Fp2Arith, Fq2

X_ABS = 0xd201000000010000       # |x|, x the (negative) BLS12-381 seed
X_IS_NEGATIVE = True

G1_AFF = (2, 12)
G2_AFF = (2, 2, 12)
G2_PROJ = (3, 2, 12)
LINE = (3, 2, 12)
FQ = (12,)


# ---------------------------------------------------------------- formula layer
@dataclasses.dataclass(frozen=True)
class MillerArith:
    """Miller-loop step formulas on the M-type twist (homogeneous projective
    T = (X : Y : Z), arkworks ``G2HomProjective``), over Fq2 arithmetic F2.
    b' = 4ξ is the twist's constant."""
    F2: Fp2Arith

    def _half(self, a):
        F = self.F2.base
        return self.F2.mul_base(a, F.const((P_FQ + 1) // 2, self.F2.like(a)))

    def double_step(self, T):
        """T ← 2T and the tangent line at T: with E = 3b'Z²,
        2T = (XY(Y² − 3E)/2 : ((Y² + 3E)/2)² − 3E² : 2Y³Z) and the line, up
        to an Fq2 factor that the final exponentiation removes, is
        (E − Y²) + 3X²·x_P·v − 2YZ·y_P·vw; returns (2T, (E − Y², 3X², −2YZ))."""
        F2 = self.F2
        X, Y, Z = T
        a = self._half(F2.mul(X, Y))
        b = F2.sqr(Y)
        c = F2.sqr(Z)
        e = F2.mul_by_nonresidue(F2.mul_small(c, 12))        # 3b'·Z²
        f = F2.add(F2.dbl(e), e)
        g = self._half(F2.add(b, f))
        h = F2.sub(F2.sqr(F2.add(Y, Z)), F2.add(b, c))        # 2YZ
        i = F2.sub(e, b)
        j = F2.sqr(X)
        e2 = F2.sqr(e)
        X3 = F2.mul(a, F2.sub(b, f))
        Y3 = F2.sub(F2.sqr(g), F2.add(F2.dbl(e2), e2))
        Z3 = F2.mul(b, h)
        return (X3, Y3, Z3), (i, F2.add(F2.dbl(j), j), F2.neg(h))

    def add_step(self, T, Q):
        """T ← T + Q for affine Q = (x_Q, y_Q): with θ = Y − y_Q·Z,
        λ = X − x_Q·Z the chord through T and Q is, up to an Fq2 factor,
        (θx_Q − λy_Q) − θ·x_P·v + λ·y_P·vw; returns (T + Q, (θx_Q − λy_Q, −θ, λ))."""
        F2 = self.F2
        X, Y, Z = T
        xq, yq = Q
        yqz, xqz = F2.muls([(yq, Z), (xq, Z)])
        theta = F2.sub(Y, yqz)
        lam = F2.sub(X, xqz)
        c = F2.sqr(theta)
        d = F2.sqr(lam)
        e, f, g = F2.muls([(lam, d), (Z, c), (X, d)])
        h = F2.sub(F2.add(e, f), F2.dbl(g))
        X3, t, ey, Z3, tx, ly = F2.muls([(lam, h), (theta, F2.sub(g, h)), (e, Y), (Z, e),
                                         (theta, xq), (lam, yq)])
        return (X3, F2.sub(t, ey), Z3), (F2.sub(tx, ly), F2.neg(theta), lam)

    def evaluate(self, coeffs, P, keep):
        """The line (c0, c1·x_P, c2·y_P) as an 014 sparse Fq12 element where
        ``keep`` = 1 (an Fq value), and the line 1 = (1, 0, 0) where keep = 0
        (a pair with an identity point): (1 + (c0 − 1)·keep, c1·(x_P·keep),
        c2·(y_P·keep)), products only, so no select."""
        F2, F = self.F2, self.F2.base
        c0, c1, c2 = coeffs
        one = F2.one(F2.like(c0))
        return (F2.add(one, F2.mul_base(F2.sub(c0, one), keep)),
                F2.mul_base(c1, F.mul(P[0], keep)), F2.mul_base(c2, F.mul(P[1], keep)))

    def double_line(self, T, P, keep):
        T2, coeffs = self.double_step(T)
        return T2, self.evaluate(coeffs, P, keep)

    def add_line(self, T, Q, P, keep):
        T2, coeffs = self.add_step(T, Q)
        return T2, self.evaluate(coeffs, P, keep)


def _rounds(method, ins, outs, rounds: str = "cuda"):
    """A Miller formula as product rounds in a process with CUDA
    (``ops.fq12.dispatch_rounds``; rounds="always": always), else one
    elementwise kernel."""
    def formula(ar, *xs):
        return getattr(MillerArith(Fp2Arith(ar)), method)(*xs)
    outs = [(o, jnp.uint32) for o in outs]
    kernel = elementwise(formula, ins, outs, FpArith(P_FQ, CONFIG.unroll), CONFIG,
                         name=f"miller_{method}")
    return dispatch_rounds(formula, ins, [o for o, _ in outs], P_FQ, CONFIG, kernel, rounds,
                           name=f"miller_{method}")


@functools.partial(jax.jit, static_argnames="rounds")
def double_line(T, P, keep, rounds: str = "cuda"):
    """(2T, tangent line at T evaluated at P).  T ``(3, 2, 12, *b)``, P
    ``(2, 12, *b)``, keep ``(12, *b)`` Fq (0 = identity pair, line 1; else 1)."""
    return _rounds("double_line", [G2_PROJ, G1_AFF, FQ], [G2_PROJ, LINE], rounds)(T, P, keep)


@functools.partial(jax.jit, static_argnames="rounds")
def add_line(T, Q, P, keep, rounds: str = "cuda"):
    """(T + Q, chord line through T and Q evaluated at P)."""
    return _rounds("add_line", [G2_PROJ, G2_AFF, G1_AFF, FQ], [G2_PROJ, LINE], rounds)(T, Q, P,
                                                                                      keep)


def _tower(rounds: str):
    """Fq12 with the given product-rounds mode (``ops.fq12.TowerField.rounds``)."""
    return Fq12 if rounds == Fq12.rounds else dataclasses.replace(Fq12, rounds=rounds)


# ---------------------------------------------------------------- Miller loop
def _loop_steps(e: int) -> np.ndarray:
    """The Miller loop's step pattern for |x| = e: after the leading bit, a
    doubling (False) per bit, followed by an addition (True) for a set bit."""
    steps = []
    for bit in bin(e)[3:]:
        steps.append(False)
        if bit == "1":
            steps.append(True)
    return np.array(steps)


def _check_points(Ps, Qs):
    if hasattr(Ps, "shape") or hasattr(Qs, "shape"):
        raise TypeError("multi_miller_loop takes sequences of point arrays (one per pair)")
    if len(Ps) != len(Qs) or not Ps:
        raise ValueError(f"need as many G1 as G2 points, at least one pair; got {len(Ps)} and "
                         f"{len(Qs)}")
    for i, (P, Q) in enumerate(zip(Ps, Qs)):
        P, Q = jnp.asarray(P), jnp.asarray(Q)
        if P.shape[:2] != G1_AFF or P.dtype != jnp.uint32:
            raise ValueError(f"pair {i}: G1 point must be affine uint32 (2, 12, *batch), got "
                             f"{P.dtype} {P.shape}")
        if Q.shape[:3] != G2_AFF or Q.dtype != jnp.uint32:
            raise ValueError(f"pair {i}: G2 point must be affine uint32 (2, 2, 12, *batch), got "
                             f"{Q.dtype} {Q.shape}")


def multi_miller_loop(Ps: Sequence, Qs: Sequence, rounds: str = "cuda"):
    """∏_i f_{x,Q_i}(P_i) (conjugated for x < 0), one shared f: k pairs cost
    one Fq12 squaring and k line products per step.  Ps: k arrays
    ``(2, 12, *b_i)``, Qs: k arrays ``(2, 2, 12, *b_i)``; the batch shapes
    broadcast to ``batch`` (e.g. a verifying key's single points against a
    batch of proofs); returns Fq12 ``(2, 3, 2, 12, *batch)``."""
    _check_points(Ps, Qs)
    Ps = [jnp.asarray(P) for P in Ps]
    Qs = [jnp.asarray(Q) for Q in Qs]
    batch = jnp.broadcast_shapes(*[P.shape[2:] for P in Ps], *[Q.shape[3:] for Q in Qs])
    P = jnp.stack([_broadcast(x, G1_AFF, batch) for x in Ps], axis=2)   # (2, 12, k, *batch)
    Q = jnp.stack([_broadcast(x, G2_AFF, batch) for x in Qs], axis=3)   # (2, 2, 12, k, *batch)
    return _multi_miller_loop(P, Q, rounds)


def _broadcast(x, pre: tuple, batch: tuple):
    """(*pre, *b) -> (*pre, *batch), batch axes aligned on the right."""
    b = x.shape[len(pre):]
    return jnp.broadcast_to(x.reshape(pre + (1,) * (len(batch) - len(b)) + b), pre + batch)


@functools.partial(jax.jit, static_argnums=2)
def _multi_miller_loop(P, Q, rounds):
    """The loop over pairs stacked on axis ``k``: P ``(2, 12, k, *batch)``,
    Q ``(2, 2, 12, k, *batch)``."""
    k, batch = P.shape[2], P.shape[3:]
    F12 = _tower(rounds)
    skip = jnp.all(P == 0, axis=(0, 1)) | jnp.all(Q == 0, axis=(0, 1, 2))
    keep = jnp.where(skip, Fq.zeros(skip.shape), Fq.ones(skip.shape))           # (12, k, *batch)
    T = jnp.stack([Q[0], Q[1], Fq2.ones((k,) + batch)])                        # (3, 2, 12, k, *batch)

    def fold(f, line):
        if k == 1:
            return F12.mul_by_014(f, line[:, :, :, 0])
        return lax.fori_loop(0, k, lambda j, f: F12.mul_by_014(
            f, lax.dynamic_index_in_dim(line, j, axis=3, keepdims=False)), f)

    def step(carry, is_add):
        f, T = carry
        f = lax.cond(is_add, lambda f: f, F12.square, f)
        T, line = lax.cond(is_add, lambda T: add_line(T, Q, P, keep, rounds),
                           lambda T: double_line(T, P, keep, rounds), T)
        return (fold(f, line), T), None

    (f, _), _ = lax.scan(step, (F12.ones(batch), T), jnp.asarray(_loop_steps(X_ABS)))
    return F12.conjugate(f) if X_IS_NEGATIVE else f


def miller_loop(P, Q, rounds: str = "cuda"):
    """f_{x,Q}(P) for one pair per lane: P ``(2, 12, *b)``, Q ``(2, 2, 12, *b)``."""
    return multi_miller_loop([P], [Q], rounds)


# ---------------------------------------------------------------- final exponentiation
OPS = ("mul", "cyclotomic_square", "conjugate", "frobenius1", "frobenius2", "inv")


def _final_exp_program() -> np.ndarray:
    """Rows (op, dst, a, b) over registers (f, r, y0, y1, y2) computing, from f
    in register 0, f^(3(p¹²−1)/r) into register 1 (arkworks' sequence)."""
    regs = {n: i for i, n in enumerate(("f", "r", "y0", "y1", "y2"))}
    rows = []

    def emit(op, dst, a, b=None):
        rows.append((OPS.index(op), regs[dst], regs[a], regs[b or a]))

    def exp_by_x(dst, src):           # dst = src^x, dst != src
        bits = bin(X_ABS)[3:]
        emit("cyclotomic_square", dst, src)
        for i, bit in enumerate(bits):
            if bit == "1":
                emit("mul", dst, dst, src)
            if i + 1 < len(bits):
                emit("cyclotomic_square", dst, dst)
        if X_IS_NEGATIVE:
            emit("conjugate", dst, dst)

    # easy part: r = f^((p^6 - 1)(p^2 + 1))
    emit("inv", "y0", "f")
    emit("conjugate", "r", "f")
    emit("mul", "r", "r", "y0")
    emit("frobenius2", "y0", "r")
    emit("mul", "r", "r", "y0")
    # hard part: r^((x-1)^2 (x+p) (x^2+p^2-1) + 3)
    emit("cyclotomic_square", "y0", "r")           # y0 = r^2
    exp_by_x("y1", "r")                            # y1 = r^x
    emit("conjugate", "y2", "r")
    emit("mul", "y1", "y1", "y2")                  # y1 = r^(x-1)
    exp_by_x("y2", "y1")                           # y2 = y1^x
    emit("conjugate", "y1", "y1")
    emit("mul", "y1", "y1", "y2")                  # y1 = r^((x-1)^2)
    exp_by_x("y2", "y1")                           # y2 = y1^x
    emit("frobenius1", "y1", "y1")
    emit("mul", "y1", "y1", "y2")                  # y1 = r^((x-1)^2 (x+p))
    emit("mul", "r", "r", "y0")                    # r = r^3
    exp_by_x("y0", "y1")                           # y0 = y1^x
    exp_by_x("y2", "y0")                           # y2 = y1^(x^2)
    emit("frobenius2", "y0", "y1")                 # y0 = y1^(p^2)
    emit("conjugate", "y1", "y1")
    emit("mul", "y1", "y1", "y2")
    emit("mul", "y1", "y1", "y0")                  # y1 = y1^(x^2 + p^2 - 1)
    emit("mul", "r", "r", "y1")
    return np.array(rows, dtype=np.int32)


FINAL_EXP_PROGRAM = _final_exp_program()


def final_exponentiation(f, rounds: str = "cuda"):
    """f^(3(p¹²−1)/r) for Fq12 arrays ``(2, 3, 2, 12, *batch)`` (arkworks' and
    blst's exponent); 0 maps to 0.  One fori_loop over ``FINAL_EXP_PROGRAM``."""
    f = jnp.asarray(f)
    if f.shape[:4] != Fq12.prefix or f.dtype != jnp.uint32:
        raise ValueError(f"final_exponentiation: expected uint32 Fq12 (2, 3, 2, 12, *batch), got "
                         f"{f.dtype} {f.shape}")
    return _final_exponentiation(f, rounds)


@functools.partial(jax.jit, static_argnums=1)
def _final_exponentiation(f, rounds):
    F12 = _tower(rounds)
    branches = [
        lambda a, b: F12.mul(a, b),
        lambda a, b: F12.cyclotomic_square(a),
        lambda a, b: F12.conjugate(a),
        lambda a, b: F12.frobenius(a, 1),
        lambda a, b: F12.frobenius(a, 2),
        lambda a, b: F12.inv(a),
    ]
    prog = jnp.asarray(FINAL_EXP_PROGRAM)
    regs = jnp.zeros((5,) + f.shape, jnp.uint32).at[0].set(f)

    def step(t, regs):
        op, dst, a, b = (prog[t, j] for j in range(4))
        v = lax.switch(op, branches, regs[a], regs[b])
        return lax.dynamic_update_index_in_dim(regs, v, dst, 0)

    regs = lax.fori_loop(0, len(FINAL_EXP_PROGRAM), step, regs)
    return regs[1]


# ---------------------------------------------------------------- pairings
def pairing(P, Q, rounds: str = "cuda"):
    """e(P, Q) per lane: P ``(2, 12, *b)`` G1 affine, Q ``(2, 2, 12, *b)`` G2
    affine -> GT ``(2, 3, 2, 12, *batch)``.  (The two jitted halves are
    compiled separately, so other pairing functions reuse them.)  rounds:
    where the formulas run as product rounds: "cuda" (in a process with a CUDA
    backend; without one, one interpreter program per formula) or "always"
    (tests: the GPU's computation on the CPU)."""
    return final_exponentiation(miller_loop(P, Q, rounds), rounds)


def pairing_product_is_one(Ps: Sequence, Qs: Sequence, rounds: str = "cuda"):
    """∏_i e(P_i, Q_i) == 1 per lane (one shared Miller loop, one final
    exponentiation): the Groth16 check e(A, B)·e(−α, β)·e(−L, γ)·e(−C, δ) = 1.
    Returns bool ``batch``."""
    g = final_exponentiation(multi_miller_loop(Ps, Qs, rounds), rounds)
    return jnp.all(g == Fq12.ones(g.shape[4:]), axis=(0, 1, 2, 3))
