"""Fused segmented sum: one level of the MSM's bucket accumulation as ONE kernel.

The bucket accumulation of ``ops.msm`` is a segmented sum of a sorted
sequence of (key, point) entries: L lanes each walk K = ⌈n_valid/L⌉
consecutive entries, adding each entry's point to an accumulator that
restarts where the key changes; a bucket that ends inside a lane is written
to the bucket array, and the (at most two) partial sums at a lane's ends go
to the slots nb + 2·lane (head: the key continues from the previous lane)
and nb + 2·lane + 1 (tail: it continues into the next lane).

``ops.msm._accumulate`` runs this as an XLA loop of K steps, each step
gathering keys, payloads and point rows, launching the addition kernel and
scattering finished sums: per step as much memory traffic and launch
latency as the addition itself (bench/NOTES.md, profile of MSM G1 at 2^24).
Here each Pallas program takes ``bn`` lanes and runs the whole walk with the
accumulator in registers.  Per step and lane it loads the next key, the
entry's payload and its point (row by row from a point-major array: a
gather of one contiguous point), adds it — mixed addition of an affine base
(negated for a negative digit) at level 0, projective addition of partial
sums at the later levels — and stores the accumulator where a bucket ends.
The result is the same as ``_accumulate``'s (same lane split, same slots).

Arrays are point-major (one row of 2·F or 3·F words per point), so every
stride in the kernel is a constant of the curve; n, the bucket count and
the lane count are runtime scalars (``params``), and the kernel's Triton IR
is the same for every level and MSM size (but for 64-bit offsets into
arrays over 4 GiB).

Curves whose formulas run as two kernels (``Curve.split``: G2) cannot hold
the whole walk in one kernel (both halves together are the unsplit formula,
which compiles for many minutes); for them ``level`` runs an XLA loop of two
kernels per step (``_step_kernels``) that still load their operands by
index and store finished sums themselves (``MSMConfig.fused_split``).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

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

def supported(curve: Curve, split_steps: bool = False) -> bool:
    """Whether ``level`` serves ``curve``: one fused kernel per level, or
    for a split curve (G2) two kernels per step when ``split_steps``."""
    return pl is not None and (not curve.split or split_steps)


def _point_rows(curve: Curve, affine: bool) -> tuple:
    return curve.aff if affine else curve.proj


class _Walk:
    """The pieces of one accumulation step inside a kernel, shared by the
    fused level (``_kernel``: all K steps in one kernel) and the split step
    kernels (``_step_kernels``: one step as two kernels, for split curves).

    Refs: params int32 = (K, n, nb, nb + 2L, j); keys (n,) int32; payload
    (n,) uint32 (affine: point index | sign << 31; projective: unused);
    src point-major: affine bases (N, 2F) or projective values (n, 3F);
    lane blocks (bn,): first key, last key, flags (1: head continues the
    previous lane, 2: tail continues into the next); target (nb + 3L, 3F)
    (rows nb + 2L + lane: where a lane's masked-off stores point, so that no
    two lanes ever name one row, masked or not)."""

    def __init__(self, curve: Curve, affine: bool, bn: int, xyzz: bool = False):
        self.curve, self.affine, self.bn, self.xyzz = curve, affine, bn, xyzz
        self.src_pre = _point_rows(curve, affine)
        self.acc_pre = (4,) + curve.fp if xyzz else curve.proj
        self.n_src, self.n_acc = math.prod(self.src_pre), math.prod(self.acc_pre)
        self.base = kernel_arith(curve._field.base_arith, curve.config)

    def setup(self, prm_ref, keys_ref, pay_ref, src_ref):
        self.K, self.n, self.nb, self.trash = prm_ref[0], prm_ref[1], prm_ref[2], prm_ref[3]
        self.keys_ref, self.pay_ref, self.src_ref = keys_ref, pay_ref, src_ref
        self.lane = pl.program_id(0) * self.bn + lax.iota(jnp.int32, self.bn)
        self.start = self.lane * self.K
        self.C = self.curve.lift(self.base)
        return self

    def key_at(self, e):
        ok = (e >= 0) & (e < self.n)
        k = plgpu.load(self.keys_ref.at[jnp.clip(e, 0, self.n - 1)], mask=ok, other=0)
        return jnp.where(ok, k, self.nb)

    def operands(self, j, acc, kprev, kcur):
        """(restart ? O : acc, ±Q) for step j: acc flat rows, Q loaded by index."""
        return self.restarted(j, acc, kprev, kcur), self.load(j, kcur)

    def load(self, j, kcur):
        """±Q, the point of step j's entry (whose key is kcur), loaded by
        index (a sentinel entry loads nothing: Q = 0)."""
        F = self.C.F
        e = self.start + j
        ok = kcur < self.nb
        ec = jnp.clip(e, 0, self.n - 1)
        if self.affine:
            p = plgpu.load(self.pay_ref.at[ec], mask=ok, other=0)
            row = (p & jnp.uint32(0x7FFFFFFF)).astype(jnp.int32)
            neg = ok & ((p >> jnp.uint32(31)) != 0)
        else:
            row = ec
        Q = _nest([plgpu.load(self.src_ref.at[row, r], mask=ok, other=0)
                   for r in range(self.n_src)], self.src_pre)
        if self.affine:
            Q = (Q[0], F.select(neg, F.neg(Q[1]), Q[1])) + tuple(Q[2:])
        return Q

    def restarted(self, j, acc, kprev, kcur):
        """The accumulator step j adds to: the identity where a bucket starts."""
        F = self.C.F
        restart = (j == 0) | (kcur != kprev)
        acc_n = _nest(list(acc), self.acc_pre)
        ident = self.identity(F.like(acc_n[0]))
        return tuple(F.select(restart, i, x) for i, x in zip(ident, acc_n))

    def rows(self, value, pre):
        return [jnp.broadcast_to(v.astype(jnp.uint32), (self.bn,)) for v in _flat(value, pre)]

    def store(self, tgt_ref, out, j, kcur, knext, first, last, lf):
        """Write the accumulator rows ``out`` where a bucket (or a lane's
        head/tail partial sum) ends at step j."""
        nb, lane = self.nb, self.lane
        head_cont, cont_next = (lf & 1) != 0, (lf & 2) != 0
        end = (kcur != knext) | (j == self.K - 1)
        in_head = head_cont & (kcur == first)
        in_tail = cont_next & (kcur == last)
        idx = jnp.where(end & ~in_head & ~in_tail & (kcur >= 0) & (kcur < nb), kcur, -1)
        idx = jnp.where(end & in_head, nb + 2 * lane, idx)
        idx = jnp.where(end & in_tail & ~in_head, nb + 2 * lane + 1, idx)
        st = idx >= 0
        idx = jnp.where(st, idx, self.trash + lane)   # masked off; distinct rows all the same
        for r in range(self.n_acc):
            plgpu.store(tgt_ref.at[idx, r], out[r], mask=st)

    def identity(self, like):
        """The accumulator's identity: XYZZ or projective."""
        return (self.C.xyzz_identity if self.xyzz else self.C.identity)(like)

    def identity_rows(self):
        return tuple(self.rows(self.identity(jnp.zeros((self.bn,), jnp.uint32)), self.acc_pre))

    def xyzz_madd(self, a, Q, valid):
        """The flat rows of a + Q in XYZZ, with the lanes where a = Q given
        2Q: the doubling is computed only when some lane of the program
        needs it (a branch on the whole block; ~never for distinct bases,
        but a bucket may meet one base twice, and proving keys repeat
        bases).  ``valid``: the lanes whose entry is not a sentinel (the
        others load Q = (0, 0), add garbage that is never stored, and must
        not ask for the doubling)."""
        out, dbl = self.C.xyzz_madd(a, Q)
        dbl = dbl & valid
        out = self.rows(out, self.acc_pre)

        def doubled(out):
            D = self.rows(self.C.xyzz_mdbl(Q), self.acc_pre)
            return [jnp.where(dbl, d, o) for d, o in zip(D, out)]

        return lax.cond(jnp.max(dbl.astype(jnp.int32)) > 0, doubled, lambda out: out, out)


def _kernel(curve: Curve, affine: bool, bn: int, xyzz: bool = False, prefetch: bool = False):
    """The Pallas kernel of one level, all K steps (refs: ``_Walk``, then the
    three lane blocks, the target in and the target out, aliased); with
    ``xyzz`` (affine only) the accumulator and the target rows are XYZZ.
    ``prefetch``: software-pipelined walk: step j first issues the loads of
    step j + 1's key, payload and point (carried to the next step in
    registers), then adds its own point, loaded by step j − 1, so that the
    loads' latency overlaps an addition instead of preceding one."""

    def kernel(prm_ref, keys_ref, pay_ref, src_ref, first_ref, last_ref, lf_ref, tin_ref, tgt_ref):
        del tin_ref                                       # aliased with tgt_ref
        w = _Walk(curve, affine, bn, xyzz).setup(prm_ref, keys_ref, pay_ref, src_ref)
        first, last, lf = cap_registers(first_ref[...], curve.config), last_ref[...], lf_ref[...]

        def add(j, acc, kprev, kcur, knext, Q):
            a = w.restarted(j, acc, kprev, kcur)
            if xyzz:
                out = w.xyzz_madd(a, Q, kcur < w.nb)
            else:
                out = w.rows(w.C.madd(a, Q) if affine else w.C.add(a, Q), w.acc_pre)
            w.store(tgt_ref, out, j, kcur, knext, first, last, lf)
            return tuple(out)

        def body(j, carry):
            acc, kprev, kcur = carry
            knext = w.key_at(w.start + j + 1)
            return add(j, acc, kprev, kcur, knext, w.load(j, kcur)), kcur, knext

        def pipelined(j, carry):
            acc, kprev, kcur, q = carry
            knext = w.key_at(w.start + j + 1)
            q_next = tuple(w.rows(w.load(j + 1, knext), w.src_pre))    # step j + 1's point
            out = add(j, acc, kprev, kcur, knext, _nest(list(q), w.src_pre))
            return out, kcur, knext, q_next

        k0 = w.key_at(w.start)
        init = (w.identity_rows(), jnp.full((bn,), -1, jnp.int32), k0)
        if prefetch:
            lax.fori_loop(0, w.K, pipelined, init + (tuple(w.rows(w.load(0, k0), w.src_pre)),))
        else:
            lax.fori_loop(0, w.K, body, init)

    return kernel


def _step_kernels(curve: Curve, affine: bool, bn: int):
    """One step j (params[4]) of a level as two kernels, for curves whose
    formulas are split (``Curve.split``): products(acc) -> T, then
    tail(T, acc) -> acc' with the finished sums stored into the target.
    Both load their operands by index (no XLA gathers, transposes or
    scatters around them); the accumulator lives in HBM between steps."""
    T_pre = (6,) + curve.fp

    def products(prm_ref, keys_ref, pay_ref, src_ref, acc_ref, t_ref):
        w = _Walk(curve, affine, bn).setup(prm_ref, keys_ref, pay_ref, src_ref)
        j = prm_ref[4]
        e = w.start + j
        a, Q = w.operands(j, [acc_ref[r] for r in range(w.n_acc)], w.key_at(e - 1), w.key_at(e))
        T = w.C.madd_products(a, Q) if affine else w.C.add_products(a, Q)
        for r, v in enumerate(w.rows(T, T_pre)):
            t_ref[r] = v

    def tail(prm_ref, keys_ref, pay_ref, src_ref, first_ref, last_ref, lf_ref, t_ref, acc_ref,
             tin_ref, acc_out, tgt_ref):
        del tin_ref                                       # aliased with tgt_ref
        w = _Walk(curve, affine, bn).setup(prm_ref, keys_ref, pay_ref, src_ref)
        j = prm_ref[4]
        e = w.start + j
        kcur = w.key_at(e)
        F = w.C.F
        # madd_tail in an order that keeps few words live (the G2 tail spilled 680 bytes a
        # lane with T, the accumulator and Q loaded together, bench/NOTES.md session 29):
        # Q only for its identity flag, then the tail of T, then the accumulator to select
        if affine:
            Q = w.load(j, kcur)
            q_inf = F.is_zero(Q[0]) & F.is_zero(Q[1])
        R = w.C.tail(_nest([t_ref[r] for r in range(math.prod(T_pre))], T_pre))
        if affine:
            a = w.restarted(j, [acc_ref[r] for r in range(w.n_acc)], w.key_at(e - 1), kcur)
            R = tuple(F.select(q_inf, p, r) for p, r in zip(a, R))
        out = w.rows(R, w.acc_pre)
        for r, v in enumerate(out):
            acc_out[r] = v
        w.store(tgt_ref, out, j, kcur, w.key_at(e + 1), first_ref[...], last_ref[...], lf_ref[...])

    return products, tail


def _split_steps(curve: Curve, affine: bool, bn: int, L: int, params, keys, pay, src_pm, first,
                 last, lf, target):
    """``level``'s walk for a split curve: an XLA loop over the K steps, two
    kernels per step (``_step_kernels``); returns the target."""
    products, tail = _step_kernels(curve, affine, bn)
    R, Tr = math.prod(curve.proj), 6 * math.prod(curve.fp)
    full = pl.no_block_spec
    lanes_spec = pl.BlockSpec((bn,), lambda i: (i,))
    blk = lambda r: pl.BlockSpec((r, bn), lambda i: (0, i))
    u32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.uint32)
    common = dict(grid=(L // bn,), interpret=curve.config.interpret, debug=curve.config.debug,
                  compiler_params=plgpu.CompilerParams(num_warps=curve.config.num_warps,
                                                       num_stages=1))
    tag = "A" if affine else "P"

    def step(j, carry):
        acc, target = carry
        prm = params.at[4].set(j)
        T = pl.pallas_call(products, out_shape=u32(Tr, L), in_specs=[full] * 4 + [blk(R)],
                           out_specs=blk(Tr), name=f"{curve.name}_segsum_prod_{tag}",
                           **common)(prm, keys, pay, src_pm, acc)
        acc, target = pl.pallas_call(
            tail, out_shape=[u32(R, L), u32(*target.shape)],
            in_specs=[full] * 4 + [lanes_spec] * 3 + [blk(Tr), blk(R), full],
            out_specs=[blk(R), full], input_output_aliases={9: 1},
            name=f"{curve.name}_segsum_tail_{tag}", **common,
        )(prm, keys, pay, src_pm, first, last, lf, T, acc, target)
        return acc, target

    acc0 = curve.identity((L,)).reshape(R, L)
    with x64():
        _, target = lax.fori_loop(0, params[0], step, (acc0, target))
    return target


def _running_kernel(curve: Curve, bn: int):
    """Kernel of ``running_sums``: lane l walks its g buckets from the top,
    R += X_t, S += R, both accumulators in registers (the walk's pattern);
    refs: params int32 (g,), the buckets point-major ``(lanes·g, 3F)``, then
    the R and S blocks ``(3F, bn)``."""
    pre = curve.proj
    rows_n = math.prod(pre)

    def kernel(prm_ref, src_ref, r_ref, s_ref):
        g = prm_ref[0]
        C = curve.lift(kernel_arith(curve._field.base_arith, curve.config))
        lane = pl.program_id(0) * bn + lax.iota(jnp.int32, bn)
        top = lane * g + g - 1

        def rows(v):
            return tuple(jnp.broadcast_to(x.astype(jnp.uint32), (bn,)) for x in _flat(v, pre))

        def body(t, carry):
            R, S = carry
            X = _nest([plgpu.load(src_ref.at[top - t, r]) for r in range(rows_n)], pre)
            R = rows(C.add(_nest(list(R), pre), X))
            return R, rows(C.add(_nest(list(S), pre), _nest(list(R), pre)))

        ident = rows(C.identity(jnp.zeros((bn,), jnp.uint32)))
        R, S = lax.fori_loop(0, g, body, (ident, ident))
        for r in range(rows_n):
            r_ref[r] = R[r]
            s_ref[r] = S[r]

    return kernel


def running_sums(curve: Curve, buckets_pm, lanes: int, g: int):
    """The running sums of the bucket reduction as ONE kernel: buckets
    point-major ``(lanes·g, 3F)``, lane l's group its rows l·g … l·g + g − 1
    (X_0 … X_{g−1}) -> (R, S) projective ``(3, *fp, lanes)`` with R_l = Σ_t
    X_t and S_l = Σ_t (t + 1)·X_t (from the top: R += X_t, S += R).  The
    XLA loop it replaces (``ops.msm.reduce_buckets``) ran g steps of three
    XLA ops and two kernels each: ~77 ms for g = 512 at 2^27 in 20-bit
    windows (bench/NOTES.md session 35).  Curves with split formulas (G2)
    keep the loop."""
    if curve.split:
        raise ValueError(f"segsum.running_sums: {curve.name}'s formulas are split")
    rows_n = math.prod(curve.proj)
    if buckets_pm.shape != (lanes * g, rows_n):
        raise ValueError(f"segsum.running_sums: buckets {buckets_pm.shape}, expected "
                         f"({lanes * g}, {rows_n})")
    bn = min(curve.config.bn, lanes & -lanes)        # a power of two dividing the lanes
    blk = pl.BlockSpec((rows_n, bn), lambda i: (0, i))
    out = jax.ShapeDtypeStruct((rows_n, lanes), jnp.uint32)
    with x64():
        R, S = pl.pallas_call(
            _running_kernel(curve, bn), out_shape=[out, out], grid=(lanes // bn,),
            in_specs=[pl.no_block_spec, pl.no_block_spec], out_specs=[blk, blk],
            compiler_params=plgpu.CompilerParams(num_warps=max(1, min(curve.config.num_warps,
                                                                      bn // 32)),
                                                 num_stages=1),
            interpret=curve.config.interpret, debug=curve.config.debug,
            name=f"{curve.name}_running_sums",
        )(jnp.asarray([g], jnp.int32), buckets_pm)
    return R.reshape(curve.proj + (lanes,)), S.reshape(curve.proj + (lanes,))


class Lanes(NamedTuple):
    """The lane split of one level (shared by ``level`` and ``ops.msm``'s
    loop): K = ``steps`` entries per lane; per lane ``(L,)`` its first and
    last keys (the sentinel past the end), whether its first key continues
    from the previous lane (``head_cont``) and its last into the next
    (``cont_next``)."""
    steps: Any
    first: Any
    last: Any
    head_cont: Any
    cont_next: Any


def lanes_of(keys, n_valid, nb: int, lanes: int, min_steps: int) -> Lanes:
    """Lanes of a level over sorted ``keys`` ``(n,)`` with ``n_valid`` keys < nb:
    lane l walks entries [l·K, l·K + K), K = max(⌈n_valid/L⌉, min_steps)."""
    n = keys.shape[0]
    K = jnp.maximum((n_valid + lanes - 1) // lanes, min_steps).astype(jnp.int32)

    def key_at(e):
        return jnp.where((e >= 0) & (e < n), keys[jnp.clip(e, 0, n - 1)], jnp.int32(nb))

    start = jnp.arange(lanes, dtype=jnp.int32) * K
    first, last = key_at(start), key_at(start + K - 1)
    return Lanes(K, first, last, (first == key_at(start - 1)) & (start > 0) & (first < nb),
                 (last == key_at(start + K)) & (last < nb))


def part_keys(lb: Lanes, nb: int):
    """Keys ``(2L,)`` of the partial sums a level leaves (slots 2l: lane l's
    head, 2l + 1: its tail; a lane wholly inside one run keeps only its
    head); empty slots take the key of the next valid slot (their value is
    the identity), so the list stays sorted."""
    tail_valid = lb.cont_next & ~(lb.head_cont & (lb.last == lb.first))
    pk = jnp.stack([jnp.where(lb.head_cont, lb.first, nb), jnp.where(tail_valid, lb.last, nb)],
                   1).reshape(-1)
    return lax.cummin(pk, axis=0, reverse=True)


def identity_pm(curve: Curve, count: int):
    """``count`` projective identities, point-major ``(count, 3F)``."""
    return curve.identity((count,)).reshape(-1, count).T


def level(curve: Curve, keys, n_valid, src_pm, payload, lanes: int, min_steps: int, buckets_pm,
          xyzz: bool = False, prefetch: bool = False):
    """One level of the segmented sum (``ops.msm._accumulate``'s contract,
    point-major).

    keys ``(n,)`` int32 ascending, the sentinel nb = ``buckets_pm.shape[0]``
    (and larger) last; n_valid: traced count of keys < nb; src_pm and
    payload: affine bases ``(N, 2F)`` with payload ``(n,)`` uint32 (point
    index | sign << 31), or projective values ``(n, 3F)`` with payload None
    (entry e adds row e); buckets_pm ``(nb, 3F)``.  ``xyzz`` (affine, a
    curve that is not split): the walk accumulates in XYZZ coordinates
    (``CurveArith.xyzz_madd``: 8M + 2S per entry instead of RCB's 11M) into
    a fresh XYZZ target, converted to projective afterwards, so the buckets
    it does not write are the identity whatever ``buckets_pm`` held (callers
    pass identities: ``ops.msm.bucket_sums``).  ``prefetch`` (a curve that
    is not split): each step loads the next step's entry before its own
    addition (``_kernel``; the same result).
    Returns (buckets_pm, part_keys ``(2·lanes,)``, part_vals ``(2·lanes, 3F)``)."""
    nb, L = buckets_pm.shape[0], lanes
    if xyzz:                                # XYZZ identities (ZZ = 0)
        target = jnp.zeros((nb + 3 * L, 4 * math.prod(curve.fp)), jnp.uint32)
    else:
        target = jnp.concatenate([buckets_pm, identity_pm(curve, 3 * L)], axis=0)
    target, pk = level_into(curve, keys, n_valid, src_pm, payload, lanes, min_steps, target, nb,
                            xyzz, prefetch)
    if xyzz:
        target = _xyzz_to_proj_pm(curve, target[:nb + 2 * L])
    return target[:nb], pk, target[nb:nb + 2 * L]


def level_into(curve: Curve, keys, n_valid, src_pm, payload, lanes: int, min_steps: int,
               target, nb: int, xyzz: bool = False, prefetch: bool = False):
    """``level`` into a target that already has its lane rows: target
    ``(nb + 3·lanes, 3F)`` (``(…, 4F)`` XYZZ) — the nb buckets, the 2·lanes
    partial sums' slots, the lanes' masked-off rows — updated in place (the
    kernel aliases it), so a caller that runs many levels (``reduce_parts``)
    copies the bucket array once, not once per level.  Returns (target,
    part_keys ``(2·lanes,)``); the partial sums are rows nb … nb + 2·lanes."""
    affine = payload is not None
    if xyzz and (not affine or curve.split):
        raise ValueError(f"segsum.level: XYZZ accumulation is for affine bases of a curve whose "
                         f"formulas are not split (got affine={affine}, {curve.name})")
    n = keys.shape[0]
    L = lanes
    if target.shape[0] != nb + 3 * L:
        raise ValueError(f"segsum.level_into: target of {target.shape[0]} rows, expected "
                         f"nb + 3·lanes = {nb + 3 * L}")
    bn = min(curve.config.bn, L)
    if L % bn:
        raise ValueError(f"segsum.level: {L} lanes is not a multiple of the block size {bn}")
    lb = lanes_of(keys, n_valid, nb, L, min_steps)
    K, first, last = lb.steps, lb.first, lb.last
    lf = lb.head_cont.astype(jnp.int32) | (lb.cont_next.astype(jnp.int32) << 1)
    params = jnp.stack([K, jnp.int32(n), jnp.int32(nb), jnp.int32(nb + 2 * L), jnp.int32(0)])
    pay = payload if affine else jnp.zeros((1,), jnp.uint32)

    full = pl.no_block_spec
    lanes_spec = pl.BlockSpec((bn,), lambda i: (i,))
    if curve.split:
        target = _split_steps(curve, affine, bn, L, params, keys, pay, src_pm, first, last, lf,
                              target)
        return target, part_keys(lb, nb)
    with x64():
        target = pl.pallas_call(
            _kernel(curve, affine, bn, xyzz, prefetch),
            out_shape=jax.ShapeDtypeStruct(target.shape, jnp.uint32),
            grid=(L // bn,),
            in_specs=[full, full, full, full, lanes_spec, lanes_spec, lanes_spec, full],
            out_specs=full,
            input_output_aliases={7: 0},
            compiler_params=plgpu.CompilerParams(num_warps=curve.config.num_warps, num_stages=1),
            interpret=curve.config.interpret,
            debug=curve.config.debug,
            name=f"{curve.name}_segsum_{'X' if xyzz else 'A' if affine else 'P'}"
                 f"{'_prefetch' if prefetch else ''}",
        )(params, keys, pay, src_pm, first, last, lf, target)
    return target, part_keys(lb, nb)


def _xyzz_to_proj_pm(curve: Curve, rows_pm):
    """XYZZ rows ``(k, 4F)`` -> projective rows ``(k, 3F)`` (one elementwise kernel)."""
    k = rows_pm.shape[0]
    P = curve._ew("xyzz_to_proj", "X", "P")(rows_pm.T.reshape((4,) + curve.fp + (k,)))
    return P.reshape(-1, k).T


def reduce_parts(curve: Curve, keys, vals_pm, buckets_pm, lanes: int, min_steps: int):
    """Sum every run of equal keys of a sorted (keys, projective point-major
    values) list into ``buckets_pm`` (keys ≥ nb skipped): projective levels
    with ``lanes`` lanes until no partial sum is left.  The bucket array is
    copied once, into a target with the lanes' rows (``level_into``), not
    once per level: at 2^27 in 20-bit windows each copy is ~1 GB, and ~15
    levels per chunk cost 37 ms per MSM (bench/NOTES.md session 35)."""
    nb, L = buckets_pm.shape[0], lanes

    lane_rows = identity_pm(curve, 3 * L)

    def one(k, v, t):
        n_valid = jnp.sum(k < nb).astype(jnp.int32)
        # slots a level does not write must hold the identity (``part_keys``): reset in place
        t = lax.dynamic_update_slice(t, lane_rows, (nb, 0))
        t, k = level_into(curve, k, n_valid, v, None, L, min_steps, t, nb)
        return k, t[nb:nb + 2 * L], t       # the new partial sums: a small copy

    target = jnp.concatenate([buckets_pm, lane_rows], axis=0)
    state = one(keys, vals_pm, target)
    _, _, target = lax.while_loop(lambda c: jnp.any(c[0] < nb), lambda c: one(*c), state)
    return target[:nb]
