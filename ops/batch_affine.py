"""Pairwise affine additions with batched inversion: one level of a batch-affine bucket sum.

bench/NOTES.md hypothesis 69.  The MSM's walk (``ops.segsum``) adds each sorted
entry's base into an XYZZ accumulator: 8M + 2S per entry.  Adding in affine
coordinates costs one inversion per addition,

    λ = (y2 − y1)/(x2 − x1),  x3 = λ² − x1 − x2,  y3 = λ·(x1 − x3) − y1,

and Montgomery's trick shares one inversion among many: with prefix
products c_r = d_0·…·d_r, one inverse of c_(R−1) and the backward recurrence
d_r⁻¹ = inv·c_(r−1), inv ← inv·d_r, each denominator costs 3M, so an
addition is 5M + 1S plus 1/R of a Fermat inversion (~570 products in Fq).

``add_pairs`` is the first piece of hypothesis 69 (its go / no-go
measurement: ns per pair against the walk's ns per entry): pair p sums the
entries 2p and 2p + 1 of a payload list (a base index with a sign bit, as
the walk's level 0 reads them) into an affine point.  Each Pallas program
takes ``bn`` lanes; lane l of program g owns the R pairs (g·R + r)·bn + l,
r < R (consecutive lanes read consecutive entries: coalesced payload loads).
A lane walks its R pairs forward (the bases loaded by index, their
denominators, and the prefix products and signed operands stored to
plane-major scratch), inverts once, and walks back (the operands read in
order, each pair's inverse, λ, x3, y3 stored).  Exceptional pairs stay
exact: x1 = x2 with y1 = y2 ≠ 0 doubles (λ = 3x1²/(2y1), computed only when
some lane of the block needs it), x1 = x2 otherwise is the identity (its
denominator replaced by 1 so the shared product never vanishes), flagged in
the output.  Level-0 bases are never the identity (the MSM skips the
entries of identity bases).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ops.curve import Curve
from ops.elementwise import _flat, _nest, x64
from ops.ptx import cap_registers, kernel_arith

try:
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
except ImportError:  # pragma: no cover
    pl = plgpu = None

# pairs per lane sharing one inversion: ~570/RUN products of Fermat's inversion per pair
RUN = 256
# lanes per program (the walk's one-warp blocks, ``ops.msm.GPU_CONFIG``)
LANES = 32


def _kernel(curve: Curve, run: int, bn: int, stored: bool):
    """Refs: payload (2P,) uint32, bases point-major (N, 2F), then the outputs:
    sums point-major (P, 2F), identity flags (P,) int32, scratch plane-major
    (F·(1 + 4·stored), P): the prefix products, and with ``stored`` the
    pair's signed operands x1, y1, x2, y2 (every lane of a step touches
    consecutive columns: coalesced)."""
    aff, fp = curve.aff, curve.fp
    n_aff, n_f = math.prod(aff), math.prod(fp)

    def kernel(pay_ref, src_ref, out_ref, flag_ref, scr_ref):
        C = curve.lift(kernel_arith(curve._field.base_arith, curve.config))
        F = C.F
        first = pl.program_id(0) * (run * bn) + lax.iota(jnp.int32, bn)

        def rows(v, pre):
            return tuple(jnp.broadcast_to(x.astype(jnp.uint32), (bn,)) for x in _flat(v, pre))

        def put(row0, v, p):
            for k, x in enumerate(rows(v, fp)):
                plgpu.store(scr_ref.at[row0 + k, p], x)

        def get(row0, p):
            return _nest([plgpu.load(scr_ref.at[row0 + k, p]) for k in range(n_f)], fp)

        def base(e):
            """±B for entry e: the base's rows, y negated for a set sign bit."""
            p = plgpu.load(pay_ref.at[e])
            row = (p & jnp.uint32(0x7FFFFFFF)).astype(jnp.int32)
            x, y = _nest([plgpu.load(src_ref.at[row, r]) for r in range(n_aff)], aff)
            return x, F.select((p >> jnp.uint32(31)) != 0, F.neg(y), y)

        def cases(x1, y1, x2, y2):
            """(den, dbl, ident): the pair's denominator (1 for the identity)."""
            eqx = F.eq(x1, x2)
            ident = eqx & (~F.eq(y1, y2) | F.is_zero(y1))
            dbl = eqx & ~ident
            one = F.one(F.like(x1))
            return F.select(eqx, F.select(dbl, F.dbl(y1), one), F.sub(x2, x1)), dbl, ident

        def forward(r, acc):
            p = first + r * bn
            (x1, y1), (x2, y2) = base(2 * p), base(2 * p + 1)
            if stored:
                for j, v in enumerate((x1, y1, x2, y2)):
                    put(n_f * (1 + j), v, p)
            put(0, _nest(list(acc), fp), p)
            return rows(F.mul(_nest(list(acc), fp), cases(x1, y1, x2, y2)[0]), fp)

        def backward(t, inv):
            p = first + (run - 1 - t) * bn
            if stored:
                x1, y1, x2, y2 = (get(n_f * (1 + j), p) for j in range(4))
            else:
                (x1, y1), (x2, y2) = base(2 * p), base(2 * p + 1)
            den, dbl, ident = cases(x1, y1, x2, y2)
            inv = _nest(list(inv), fp)
            dinv = F.mul(inv, get(0, p))
            num = rows(F.sub(y2, y1), fp)

            def doubled(num):
                return rows(F.select(dbl, F.mul_small(F.sqr(x1), 3), _nest(list(num), fp)), fp)

            num = lax.cond(jnp.max(dbl.astype(jnp.int32)) > 0, doubled, lambda n: n, num)
            lam = F.mul(_nest(list(num), fp), dinv)
            x3 = F.sub(F.sub(F.sqr(lam), x1), x2)
            y3 = F.sub(F.mul(lam, F.sub(x1, x3)), y1)
            for k, v in enumerate(rows((x3, y3), aff)):
                plgpu.store(out_ref.at[p, k], v)
            plgpu.store(flag_ref.at[p], ident.astype(jnp.int32))
            return rows(F.mul(inv, den), fp)

        one = rows(F.one(first.astype(jnp.uint32)), fp)             # a row of the lanes' shape
        one = (cap_registers(one[0], curve.config),) + one[1:]
        acc = lax.fori_loop(0, run, forward, one)
        inv = rows(F.inv(_nest(list(acc), fp)), fp)
        lax.fori_loop(0, run, backward, inv)

    return kernel


def add_pairs(curve: Curve, bases_pm, payload, run: int = RUN, bn: int = LANES,
              stored: bool = True):
    """S_p = ±B[i_2p] ± B[i_2p+1] for the P = len(payload)/2 pairs of entries
    (payload uint32: base index | sign << 31; bases point-major affine
    ``(N, 2F)``, none the identity) -> (sums point-major ``(P, 2F)`` affine,
    identity flags ``(P,)`` bool: where the sum is the identity, its row is
    meaningless).  P must be a multiple of run·bn (one Pallas program per
    bn·run pairs).  ``stored``: the forward walk writes each pair's signed
    operands to scratch and the backward walk reads them back in order (two
    random base loads per pair); without it the backward walk loads the
    bases again (four; session 37 on an H100: 0.600 ns per pair at 2^24,
    slower than the walk's ~0.5 ns per entry)."""
    if pl is None:
        raise ValueError("batch_affine.add_pairs: Pallas is not available")
    if curve.split:
        raise ValueError(f"batch_affine.add_pairs: {curve.name}'s formulas are split")
    n_aff, n_f = math.prod(curve.aff), math.prod(curve.fp)
    if bases_pm.ndim != 2 or bases_pm.shape[1] != n_aff:
        raise ValueError(f"batch_affine.add_pairs: bases {bases_pm.shape}, expected (N, {n_aff})")
    if payload.ndim != 1 or payload.shape[0] % 2:
        raise ValueError(f"batch_affine.add_pairs: payload {payload.shape}: an even length")
    pairs = payload.shape[0] // 2
    if pairs % (run * bn):
        raise ValueError(f"batch_affine.add_pairs: {pairs} pairs, not a multiple of "
                         f"run·lanes = {run * bn}")
    shapes = [jax.ShapeDtypeStruct((pairs, n_aff), jnp.uint32),
              jax.ShapeDtypeStruct((pairs,), jnp.int32),
              jax.ShapeDtypeStruct((n_f * (5 if stored else 1), pairs), jnp.uint32)]
    with x64():
        out, flag, _ = pl.pallas_call(
            _kernel(curve, run, bn, stored), out_shape=shapes, grid=(pairs // (run * bn),),
            in_specs=[pl.no_block_spec, pl.no_block_spec],
            out_specs=[pl.no_block_spec] * 3,
            compiler_params=plgpu.CompilerParams(num_warps=max(1, bn // 32), num_stages=1),
            interpret=curve.config.interpret, debug=curve.config.debug,
            name=f"{curve.name}_add_pairs",
        )(payload.astype(jnp.uint32), bases_pm)
    return out, flag != 0
