"""Variable-base multi-scalar multiplication Σ_i s_i·P_i on G1 and G2.

Pippenger's bucket method with signed digits, in four array stages, all on
the device with no host round trip:

1. **digits**: each scalar (canonical, < r < 2^255) is cut into W = ⌈256/c⌉
   windows of c bits and recoded to signed digits d ∈ [−2^(c−1)+1, 2^(c−1)]
   (a window above 2^(c−1) becomes d − 2^c and carries 1 up), so only
   B = 2^(c−1) buckets per window are needed (−P costs a negated y).
2. **sort**: every (window, digit) pair becomes a key ``(g·W + w)·B + |d| − 1``
   (g indexes the scalar vectors of a batched MSM; zero digits get the
   sentinel key NB = G·W·B) with the payload ``point index | sign << 31``,
   and XLA sorts the T = G·W·N pairs, so each bucket's points are contiguous.
3. **bucket accumulation** (``_accumulate``): a *segmented sum* of the sorted
   sequence in fixed-size chunks.  L lanes each walk K = ⌈n/L⌉ consecutive
   entries with one mixed-addition kernel per step (restart at a key change,
   negate for a negative digit); a bucket that begins and ends inside a lane
   is written to the bucket array, the (at most two) partial sums a lane
   holds at its ends are written to a parts array, and the parts, again
   sorted by key, are reduced the same way (projective additions, few
   lanes) until none is left.  K is a traced count of the non-sentinel
   entries, so zero digits cost nothing: scalars that are 0 or 1 (bit
   witnesses) produce one entry or none, and a mostly-0/1 scalar vector is
   summed at the price of its 1-positions plus a full Pippenger of the rest,
   with no separate code path ("batch addition" falls out of the sort).
   The kernels' shapes are lane counts (L, or a smaller power of two for
   small MSMs: ``level0_lanes``; S for the later levels), not N, and N itself
   is rounded up to a power of two (the padding is zero scalars, skipped), so
   few distinct programs are compiled.  On CUDA each level is one kernel
   (``ops.segsum``); ``MSMConfig.xyzz`` keeps the first level's G1
   accumulators in XYZZ coordinates (on in ``GPU_CONFIG``), ``MSMConfig.prefetch``
   pipelines its walk's loads one step ahead (off: it lost once the walk was held
   to 200 registers in one-warp blocks, ``walk_registers``/``walk_block``).
4. **bucket reduction**: per window Σ_b b·B_b by running sums in ng groups of
   g buckets (R += B_t, S += R from the top), then (GPU) the window/group
   terms S_grp and R_grp are weighted by 2^(c·w) and 2^(c·w)·grp·g with a
   per-lane double-and-add and summed per scalar vector by the same
   segmented sum, or (CPU, ``MSMConfig.horner``) the groups are combined per
   window and one formula runs Horner's rule over the windows: on the CPU a
   formula runs in a register-machine interpreter whose cost is its
   instruction count times the lanes (plus ~30 lanes' worth of dispatch per
   instruction), and Horner needs ~256 doublings on one lane where the
   weights need ~512 additions on 2·W·ng lanes.

Scalars of identity bases (0, 0) count as 0 (their entries are skipped), so
a proving key's zero query points cost nothing.  ``msm`` also splits off the
positions where every scalar is 0 or 1 when they are many
(``MSMConfig.split_threshold``, see ``msm``).

Bounded memory: ``msm(..., config=MSMConfig(budget_bytes=...))`` processes the
bases in chunks of a power-of-two size chosen so that one chunk's working set
fits the budget (bases may live in host memory and are streamed), adding the
chunks' bucket arrays; the result is identical to the unchunked MSM.  The
window width is chosen with the chunks (``plan``, ``window_cost``: n·W entries
plus a measured weight per bucket per pass over the bucket array, one pass per
chunk and the reduction), so msm_h's 2^27 points take 20-bit windows where a
2^24 MSM takes 16.

Arrays: bases affine ``(2, *fp, N)`` (the identity as (0, 0)); scalars Fr
``(8, *batch, N)`` in Montgomery form (every Fr array is reduced mod r, so
scalars are taken mod r by construction; ``Fr.from_int`` rejects integers
outside [0, r)); result projective ``(3, *fp, *batch)``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.profiler import TraceAnnotation as span   # named host spans in a profile

from ops import aot, segsum, transfer
from ops.curve import Curve
from ops.platform import by_platform, platform
from ops.ptx import check_max_registers
from ops.field import Fr

SCALAR_BITS = 256            # windows cover 256 bits, so a signed top digit never carries out
# the widest window ``MSMConfig.window`` may ask for (``choose_window`` stays at WIDEST_CHOICE):
# a window's c bits straddle at most two 32-bit limbs, and the keys (g·W + w)·2^(c−1) + |d| − 1
# and their sentinel G·W·2^(c−1) must stay int32 (``check_window``)
MAX_WINDOW = 24
_NEG, _RESTART = 1, 2        # step flags


@dataclasses.dataclass(frozen=True)
class MSMConfig:
    """Static MSM settings.

    window: bits per window c (None: chosen by ``choose_window`` from N and,
    with a budget, the chunks it leaves: ``plan``);
    lanes: L, lanes of the bucket-accumulation kernel (the main cost: one
    mixed addition per lane per step; fewer for small MSMs, ``level0_lanes``);
    small_lanes: S, lanes of the partial
    reduction and bucket-reduction kernels; min_steps: the least entries per
    lane in a level of the partial reduction (a level of K steps divides the
    partial sums of one bucket by K, so a heavy bucket — all 0/1 entries of
    an MSM share one — costs about K·log_K(parts) sequential steps: small K
    is fewer; bench/NOTES.md hypothesis 17, 64 before);
    budget_bytes: device-memory budget of one MSM call (None: no chunking);
    horner: how the windows are combined.  False: every window/group sum
    weighted by its own power of two in parallel lanes (a double-and-add of
    ~256 steps over 2·G·W·ng lanes), then summed (the GPU: one wide kernel);
    True: the per-window group sums combined in G·W lanes, then ONE formula
    per scalar vector runs Horner's rule over the windows (c doublings and
    one addition per window, ~256 doublings in all on G lanes: the CPU,
    where a formula's cost is its instruction count times the lanes);
    split_threshold: ``msm`` sums the positions where every scalar vector
    holds 0 or 1 by ``bits_sum`` and the rest by Pippenger when they are at
    least this fraction of N (None: never split automatically);
    fused: on CUDA (or with the curve's kernels in interpret mode), run each
    level of the bucket accumulation as ONE kernel that walks every lane's
    entries with the accumulator in registers (``ops.segsum``) instead of an
    XLA loop of K addition kernels with gathers and scatters around each;
    curves with split formulas (G2) take the loop unless ``fused_split``;
    fused_split: G2's level as an XLA loop of two kernels per step that load
    their operands by index and store finished sums themselves
    (``ops.segsum``; no XLA gathers, transposes or scatters around them);
    on in ``GPU_CONFIG``: 11% faster at 2^20 on the H200, 13 s more compile
    (bench/NOTES.md hypothesis 20); xyzz: the fused accumulation's first
    level (affine bases) keeps its accumulators in XYZZ coordinates (8M + 2S
    per entry instead of RCB's complete 11M; a block-wide branch doubles
    where a bucket meets its own base again), curves with split formulas
    excepted (bench/NOTES.md hypothesis 55; on in ``GPU_CONFIG``: 2^24
    276.0 → 256.8 ms); prefetch: the fused first level's walk loads each
    step's entry one step ahead, so the loads' latency overlaps an addition
    (``ops.segsum._kernel``; curves with split formulas excepted;
    bench/NOTES.md hypothesis 56; on in ``GPU_CONFIG`` from the even/odd
    products of 61, 198.5 → 194.5 ms, until the register cap made it a
    loss); walk_registers / walk_block: the register cap and the (lanes,
    warps) per program of that walk's kernel, over the curve's own
    ``KernelConfig`` (None: the curve's; bench/NOTES.md hypothesis 64: in
    ``GPU_CONFIG`` 200 registers in one-warp blocks, 10 warps per SM
    without a spill once the walk does not prefetch); bucket_weight: the
    cost of one bucket in one pass over the bucket array, in entries
    (``choose_window``; None: the curve's ``BUCKET_WEIGHTS``);
    fused_running: the bucket reduction's running sums as one kernel
    (``ops.segsum.running_sums``; curves with split formulas and ``horner``
    excepted) instead of an XLA loop of g steps (bench/NOTES.md session 35:
    ~77 ms of that loop per 2^27 MSM in 20-bit windows; on in ``GPU_CONFIG``:
    0.5-2% on an H100, sessions 35 and 37); small_weights (without ``horner``):
    the windows combined in three steps instead of one 265-bit double-and-add
    per lane — each group's R weighted by grp·g alone (< 2^(c−1): ~c steps in
    parallel lanes), the group sums added per window (G·W sums), then Horner
    over the windows (``horner``'s last step: c·(W − 1) doublings on G lanes)
    (bench/NOTES.md hypothesis 74: the 265-bit form was 9.0 of 145.7 ms at
    2^24 on an H100); put_ahead: a chunked MSM with host inputs puts the next
    chunk's before it dispatches this one (``_in_chunks``, hypothesis 97;
    False: the order before it, for measuring)."""
    window: int | None = None
    lanes: int = 1 << 19
    small_lanes: int = 1 << 14
    min_steps: int = 4
    budget_bytes: int | None = None
    horner: bool = False
    split_threshold: float | None = 0.5
    fused: bool = True
    fused_split: bool = False
    xyzz: bool = False
    prefetch: bool = False
    walk_registers: int | None = None
    walk_block: tuple[int, int] | None = None
    bucket_weight: float | None = None
    fused_running: bool = False
    small_weights: bool = False
    put_ahead: bool = True

    def __post_init__(self):
        check_max_registers(self.walk_registers)
        if self.walk_block is not None:
            bn, warps = self.walk_block
            if bn < 32 or bn & (bn - 1) or warps < 1 or bn < 32 * warps:
                raise ValueError(f"MSMConfig.walk_block: (lanes, warps) with lanes a power of "
                                 f"two of at least 32 per warp, got {self.walk_block!r}")
        # a level of K steps leaves at most 2·⌈n/K⌉ − 1 partial sums of n (the last busy lane
        # has no tail), fewer than n for every n ≥ 2 only when K ≥ 3: with K = 2 the
        # reduction can repeat a level forever
        if self.min_steps < 3:
            raise ValueError(f"MSMConfig: min_steps must be at least 3 (got {self.min_steps}): "
                             f"the partial-sum reduction needs it to shrink at every level")


# XYZZ buckets in the G1 accumulation (bench/NOTES.md hypothesis 55; session 30 on the H200:
# MSM G1 at 2^24 276.0 -> 256.8 ms); the walk held to 200 registers in one-warp blocks, without
# prefetching (64; session 33 on an H100, with 65's squares and sums: 163.0 -> 157.5 ms)
# the bucket reduction's running sums in one kernel (session 35 on an H100: 2^27 c20 1.003 ->
# 0.998 s; session 37: 2^24 149.5 -> 146.3 ms, 2^20 24.1 -> 23.7 ms)
# small per-group weights, per-window sums and Horner over the windows (hypothesis 74; session
# 38 on an H100: 2^24 145.8 -> 140.3 ms)
GPU_CONFIG = MSMConfig(fused_split=True, xyzz=True, walk_registers=200, walk_block=(32, 1),
                       fused_running=True, small_weights=True)
# bucket_weight 1.5 on the CPU (not measured there): the widths the cost model of sessions 4-34
# chose up to 2^14 points, where the CPU's MSMs are
CPU_CONFIG = MSMConfig(lanes=1 << 8, small_lanes=1 << 5, min_steps=8, horner=True,
                       bucket_weight=1.5)


def default_config(*like) -> MSMConfig:
    """``GPU_CONFIG`` for an MSM that runs on a GPU, else ``CPU_CONFIG``.
    Where it runs: the device of the first committed array among ``like``
    (pytrees; numpy arrays and tracers say nothing), else the default device
    (a ``jax.default_device`` context), else the default backend.  The
    process's backend alone is not enough: the GPU's lane counts on a
    host-CPU computation of a GPU machine (the engine's verification, whose
    IC sum is an MSM) made a 2-point MSM ~100x slower (bench/NOTES.md,
    session 13)."""
    return GPU_CONFIG if platform(*like) == "gpu" else CPU_CONFIG


def num_windows(c: int) -> int:
    return -(-SCALAR_BITS // c)


def bucket_count(c: int, G: int = 1) -> int:
    """Buckets of G scalar vectors in c-bit windows: G·W·2^(c−1) (the keys'
    sentinel; it must stay int32)."""
    return G * num_windows(c) << (c - 1)


def _widths(G: int) -> list[int]:
    """The widths ``choose_window`` and ``plan`` consider: 2 … ``WIDEST_CHOICE``
    whose bucket keys stay int32 for G scalar vectors."""
    return [c for c in range(2, WIDEST_CHOICE + 1) if bucket_count(c, G) < 1 << 31]


def check_window(c: int, G: int = 1) -> int:
    """c, if windows of c bits can key G scalar vectors' buckets (``MAX_WINDOW``)."""
    if not 1 <= c <= MAX_WINDOW:
        raise ValueError(f"msm: window must be in [1, {MAX_WINDOW}], got {c}")
    if bucket_count(c, G) >= 1 << 31:
        raise ValueError(f"msm: {G} scalar vectors with {c}-bit windows need "
                         f"{bucket_count(c, G):,} bucket keys, more than int32 holds")
    return c


# the widest window choose_window picks: the widest measured (session 35: 22 bits lost 22% to
# 20 at 2^27, as the model predicts); wider ones only by MSMConfig.window
WIDEST_CHOICE = 22


# A bucket's cost per pass, in entries, on the GPU.  G1: fitted to 16 H100 measurements
# (session 35, after the bucket passes' copies went: ``bench.fit_windows``; 7.67 before them).
# G2: not measured; 2 keeps the widths the model of sessions 4-34 chose where Filecoin's G2
# MSMs are (16 bits from 2^19 to 2^22).
BUCKET_WEIGHTS = {"G1": 3.35, "G2": 2.0}


def bucket_weight(curve: Curve, cfg: MSMConfig) -> float:
    """``cfg.bucket_weight``, else the curve's ``BUCKET_WEIGHTS`` entry."""
    if cfg.bucket_weight is not None:
        return cfg.bucket_weight
    return BUCKET_WEIGHTS.get(curve.name, BUCKET_WEIGHTS["G1"])


def window_cost(n: int, c: int, chunks: int = 1, bucket_weight: float | None = None) -> float:
    """Cost, in entries, of an MSM of n points per scalar vector with c-bit
    windows run as ``chunks`` chunks: n·W entries (sorted and added) plus
    W·2^(c−1) buckets per pass over the bucket array — one per chunk (made,
    converted and added into the running array) and the final reduction —
    each ``bucket_weight`` entries.

    Measured (bench/NOTES.md session 35; ``bench.ntt_msm --g1 K --windows C
    --chunk-gib G``, H100, widths and sizes from 2^20 unchunked to 2^27 in
    four chunks, fitted by ``bench.fit_windows``): first T = 0.530 ns·n·W +
    4.06 ns·W·2^(c−1)·(chunks + 1) + 13 ms (20 records within 3.4%: a bucket
    weighing 7.67 entries), then, with the bucket passes' copies gone, 0.523
    ns·n·W + 1.75 ns·W·2^(c−1)·(chunks + 1) + 14 ms (16 records within 2.5%:
    3.35 entries, G1's ``BUCKET_WEIGHTS``, the default here)."""
    if bucket_weight is None:
        bucket_weight = BUCKET_WEIGHTS["G1"]
    W = num_windows(c)
    return n * W + bucket_weight * W * (1 << (c - 1)) * (chunks + 1)


def choose_window(n: int, chunks: int = 1, bucket_weight: float | None = None,
                  G: int = 1) -> int:
    """The c in [2, ``WIDEST_CHOICE``] of least ``window_cost`` whose G·W·2^(c−1)
    bucket keys stay int32 (``check_window``): with G1's weight 16 bits at
    2^20 and 2^22, 19 at 2^24, 20 at 2^27 in chunks of 2^25 (measured on an
    H100: −13.5% against 16, 1.003 against 1.161 s: fewer windows, 13 instead
    of 16, and a bucket array paid once per chunk)."""
    return min(_widths(G), key=lambda c: (window_cost(n, c, chunks, bucket_weight), c))


def many_window(curve: Curve, dense_sizes: Sequence[int], n_out: int, cfg: MSMConfig,
                G: int = 1) -> int:
    """``msm_many``'s width: its general entries (every part's dense
    positions) spread over its ``n_out`` bucket sets (G scalar vectors in
    all: ``n_out`` times the batch)."""
    if cfg.window:
        return cfg.window
    return choose_window(max(1, -(-sum(dense_sizes) // max(n_out, 1))),
                         bucket_weight=bucket_weight(curve, cfg), G=max(G, n_out))


# ------------------------------------------------------------------ digits and keys
def signed_digits(k: jnp.ndarray, c: int) -> jnp.ndarray:
    """Canonical scalars ``(8, *shape)`` uint32 limbs (< 2^255) -> signed
    c-bit digits ``(W, *shape)`` int32 with Σ_w d_w 2^(c·w) = k and
    d_w ∈ [−2^(c−1)+1, 2^(c−1)]."""
    W = num_windows(c)
    mask = jnp.uint32((1 << c) - 1)
    raw = []
    for w in range(W):
        pos = w * c
        lo, sh = divmod(pos, 32)
        v = k[lo] >> jnp.uint32(sh)
        if sh + c > 32 and lo + 1 < k.shape[0]:
            v = v | (k[lo + 1] << jnp.uint32(32 - sh))
        raw.append((v & mask).astype(jnp.int32))
    raw = jnp.stack(raw)
    half, full = 1 << (c - 1), 1 << c

    def carry_step(carry, v):
        t = v + carry
        up = t > half
        return up.astype(jnp.int32), jnp.where(up, t - full, t)

    _, d = lax.scan(carry_step, jnp.zeros(k.shape[1:], jnp.int32), raw)
    return d


def bucket_keys(digits: jnp.ndarray, B: int):
    """Signed digits ``(G, W, N)`` -> (keys, payload), both ``(G·W·N,)``:
    key = (g·W + w)·B + |d| − 1 for d ≠ 0 and the sentinel G·W·B for d = 0;
    payload = i | (d < 0) << 31 with i the point index."""
    G, W, N = digits.shape
    gw = jnp.arange(G * W, dtype=jnp.int32).reshape(G, W, 1)
    mag = jnp.abs(digits)
    keys = jnp.where(mag == 0, G * W * B, gw * B + mag - 1)
    idx = jnp.broadcast_to(jnp.arange(N, dtype=jnp.uint32), digits.shape)
    payload = idx | jnp.where(digits < 0, jnp.uint32(1 << 31), jnp.uint32(0))
    return keys.reshape(-1), payload.reshape(-1)


def deal_digits(digits: jnp.ndarray, p: int) -> jnp.ndarray:
    """Signed digits ``(G, W, N)`` -> ``(G, ⌈W/p⌉, p·N)`` for shifted bases
    (``shift_bases``): digit t·⌈W/p⌉ + w of point i becomes window w of
    point t·N + i (zero digits pad W to p·⌈W/p⌉), so that
    Σ_w 2^(c·w) d_w·P = Σ_w' 2^(c·w') Σ_t d_(t·⌈W/p⌉+w')·(2^(c·t·⌈W/p⌉)·P)."""
    G, W, N = digits.shape
    Wp = -(-W // p)
    d = jnp.pad(digits, ((0, 0), (0, p * Wp - W), (0, 0)))
    return d.reshape(G, p, Wp, N).transpose(0, 2, 1, 3).reshape(G, Wp, p * N)


# ------------------------------------------------------------------ step kernels
def _prep(C, ar, acc, Q, flags, negate: bool):
    """(restart ? O : acc, negate-bit ? −Q : Q) inside a formula."""
    F = C.F
    rst = ar.scalar_bit(flags, 1)
    ident = C.identity(F.like(acc[0]))
    acc = tuple(F.select(rst, i, a) for i, a in zip(ident, acc))
    if negate:
        neg = ar.scalar_bit(flags, 0)
        Q = (Q[0], F.select(neg, F.neg(Q[1]), Q[1])) + tuple(Q[2:])
    return acc, Q


@functools.lru_cache(maxsize=None)
def _step_fn(curve: Curve, affine: bool):
    """acc' = (restart ? O : acc) + (±Q): Q affine (mixed addition, sign bit
    honoured) or projective; flags ``(1, *batch)`` uint32.  One kernel, or
    two (products, tail) for a split curve."""
    kind = "A" if affine else "P"

    def prep(ar, acc, Q, fl):
        C = curve.lift(ar)
        return C, _prep(C, ar, acc, Q, fl, affine)

    if not curve.split:
        def whole(ar, acc, Q, fl):
            C, (a, q) = prep(ar, acc, Q, fl)
            return C.madd(a, q) if affine else C.add(a, q)
        return curve._ew(whole, ["P", kind, (1,)], "P", f"msm_step_{kind}")

    def products(ar, acc, Q, fl):
        C, (a, q) = prep(ar, acc, Q, fl)
        return C.madd_products(a, q) if affine else C.add_products(a, q)

    def tail(ar, T, acc, Q, fl):
        C, (a, q) = prep(ar, acc, Q, fl)
        return C.madd_tail(T, a, q) if affine else C.tail(T)

    k1 = curve._ew(products, ["P", kind, (1,)], "T", f"msm_prod_{kind}")
    k2 = curve._ew(tail, ["T", "P", kind, (1,)], "P", f"msm_tail_{kind}")
    return lambda acc, Q, fl: k2(k1(acc, Q, fl), acc, Q, fl)


# ------------------------------------------------------------------ segmented sum
def _accumulate(curve: Curve, keys, n_valid, fetch, step, lanes: int, min_steps: int,
                buckets):
    """One level of the segmented sum of a sorted sequence.

    keys: ``(n,)`` int32 ascending, the sentinel ``nb = buckets.shape[-1]``
    (and larger) for entries to skip, sorted last; n_valid: traced count of
    keys < nb; fetch(e, ok) -> (values at entry indices e ``(lanes,)``,
    extra flags); step(acc, Q, flags) -> acc'.  Lane l walks entries
    [l·K, l·K + K), K = max(⌈n_valid/lanes⌉, min_steps).
    Returns (buckets with the sums of buckets lying inside one lane written,
    part_keys ``(2·lanes,)``, part_vals ``(3, *fp, 2·lanes)``): the partial sums
    at lane ends, invalid slots carrying the identity and the key of the next
    valid slot (or the sentinel), so part_keys stays sorted."""
    n = keys.shape[0]
    nb = buckets.shape[-1]
    L = lanes
    lb = segsum.lanes_of(keys, n_valid, nb, L, min_steps)
    K, first, last, head_cont, cont_next = lb
    lane = jnp.arange(L, dtype=jnp.int32)
    start = lane * K

    def key_at(e):
        return jnp.where((e >= 0) & (e < n), keys[jnp.clip(e, 0, n - 1)], jnp.int32(nb))

    drop = nb + 2 * L
    target = jnp.concatenate([buckets, curve.identity((2 * L,))], axis=-1)
    acc0 = curve.identity((L,))

    def body(j, carry):
        acc, target, kprev = carry
        e = start + j
        kcur, knext = key_at(e), key_at(e + 1)
        Q, extra = fetch(e, kcur < nb)
        restart = (j == 0) | (kcur != kprev)
        flags = (extra | jnp.where(restart, jnp.uint32(_RESTART), jnp.uint32(0)))[None]
        acc = step(acc, Q, flags)
        end = (kcur != knext) | (j == K - 1)
        in_head = head_cont & (kcur == first)
        in_tail = cont_next & (kcur == last)
        idx = jnp.where(end & ~in_head & ~in_tail & (kcur >= 0) & (kcur < nb), kcur, drop)
        idx = jnp.where(end & in_head, nb + 2 * lane, idx)
        idx = jnp.where(end & in_tail & ~in_head, nb + 2 * lane + 1, idx)
        target = target.at[..., idx].set(acc, mode="drop")
        return acc, target, kcur

    _, target, _ = lax.fori_loop(0, K, body, (acc0, target, jnp.full((L,), -1, jnp.int32)))
    return target[..., :nb], segsum.part_keys(lb, nb), target[..., nb:]


def _fused_or_loop(curve: Curve, cfg: MSMConfig, fused, loop):
    """fused() where ``ops.segsum`` applies (CUDA, or the curve's kernels in
    interpret mode), else loop(); decided at lowering time on a CUDA host."""
    if not (cfg.fused and segsum.supported(curve, cfg.fused_split)):
        return loop()
    if curve.config.interpret:
        return fused()
    return by_platform(default=loop, cuda=fused)


def _reduce_parts(curve: Curve, keys, vals, buckets, cfg: MSMConfig):
    """``_reduce_parts_loop`` or its fused kernels (point-major inside)."""
    def fused():
        nb = buckets.shape[-1]
        out = segsum.reduce_parts(curve, keys, vals.reshape(-1, vals.shape[-1]).T,
                                  buckets.reshape(-1, nb).T, cfg.small_lanes, cfg.min_steps)
        return out.T.reshape(buckets.shape)
    return _fused_or_loop(curve, cfg, fused, lambda: _reduce_parts_loop(curve, keys, vals, buckets, cfg))


def _reduce_parts_loop(curve: Curve, keys, vals, buckets, cfg: MSMConfig):
    """Sum every run of equal keys of a sorted (keys, projective vals) list
    into ``buckets`` (keys ≥ nb skipped): levels of ``_accumulate`` with S
    lanes until no partial sum is left."""
    nb = buckets.shape[-1]
    S = cfg.small_lanes
    step = _step_fn(curve, affine=False)

    def level(keys, vals, buckets):
        def fetch(e, ok):
            e = jnp.clip(e, 0, keys.shape[0] - 1)
            return jnp.take(vals, e, axis=-1), jnp.uint32(0)
        n_valid = jnp.sum(keys < nb).astype(jnp.int32)
        return _accumulate(curve, keys, n_valid, fetch, step, S, cfg.min_steps, buckets)

    buckets, keys, vals = level(keys, vals, buckets)

    def cond(c):
        return jnp.any(c[0] < nb)

    def body(c):
        k, v, b = c
        b, k, v = level(k, v, b)
        return k, v, b

    _, _, buckets = lax.while_loop(cond, body, (keys, vals, buckets))
    return buckets


def level0_lanes(t: int, cfg: MSMConfig) -> int:
    """Lanes of the bucket accumulation for T entries: ``cfg.lanes``, or fewer
    (a power of two, at least ``small_lanes``) so that each lane walks >= 32
    entries; long lanes mean few partial sums left for the next levels."""
    want = 1 << max(0, (t // 32).bit_length() - 1)
    return max(min(cfg.lanes, want), min(cfg.small_lanes, cfg.lanes))


def walk_curve(curve: Curve, cfg: MSMConfig) -> Curve:
    """The curve whose kernel config the first level's walk compiles with:
    ``curve``'s, with ``cfg.walk_registers`` and ``cfg.walk_block`` over it."""
    kc = curve.config
    if cfg.walk_registers is not None:
        kc = dataclasses.replace(kc, max_registers=cfg.walk_registers)
    if cfg.walk_block is not None:
        kc = dataclasses.replace(kc, bn=cfg.walk_block[0], num_warps=cfg.walk_block[1])
    return curve if kc == curve.config else dataclasses.replace(curve, config=kc)


def bucket_sums(curve: Curve, bases_pm, keys, payload, nb: int, cfg: MSMConfig):
    """Sum the bases of each bucket: keys/payload from ``bucket_keys`` (any
    order), bases point-major ``(N, 2·F)`` uint32 (``point_major``).
    Returns buckets ``(3, *fp, nb)`` (the identity where empty)."""
    keys, payload = lax.sort((keys, payload), num_keys=1)
    n_valid = jnp.sum(keys < nb).astype(jnp.int32)
    aff = curve.aff

    def fetch(e, ok):
        p = payload[jnp.clip(e, 0, payload.shape[0] - 1)]
        i = (p & jnp.uint32(0x7FFFFFFF)).astype(jnp.int32)
        pts = jnp.take(bases_pm, i, axis=0)                        # (L, rows): one row per point
        pts = jnp.where(ok[:, None], pts, jnp.uint32(0))          # skipped entries add O
        pts = pts.T.reshape(aff + (i.shape[0],))
        return pts, jnp.where(ok, p >> jnp.uint32(31), jnp.uint32(0))

    L = level0_lanes(keys.shape[0], cfg)

    def loop():
        buckets = curve.identity((nb,))
        step = _step_fn(curve, affine=True)
        buckets, pk, pv = _accumulate(curve, keys, n_valid, fetch, step, L, 1, buckets)
        return _reduce_parts_loop(curve, pk, pv, buckets, cfg)

    def fused():
        b, pk, pv = segsum.level(walk_curve(curve, cfg), keys, n_valid, bases_pm, payload, L, 1,
                                 segsum.identity_pm(curve, nb), xyzz=cfg.xyzz and not curve.split,
                                 prefetch=cfg.prefetch and not curve.split)
        b = segsum.reduce_parts(curve, pk, pv, b, cfg.small_lanes, cfg.min_steps)
        return b.T.reshape(curve.proj + (nb,))

    return _fused_or_loop(curve, cfg, fused, loop)


@functools.lru_cache(maxsize=None)
def _group_fn(curve: Curve, ng: int, g: int):
    """Σ_b b·X_b of one window from its ng groups of g buckets: S ``(ng, 3,
    *fp, *batch)`` (Σ_t (t+1)·X_{grp·g+t}) and R (Σ_t X_{grp·g+t}) ->
    Σ_grp S_grp + g·Σ_grp grp·R_grp (running sums over the groups, log2 g
    doublings), one formula."""
    def f(ar, S, R):
        C = curve.lift(ar)
        tot = S[0]
        for grp in range(1, ng):
            tot = C.add(tot, S[grp])
        run = acc = R[ng - 1]
        for grp in range(ng - 2, 0, -1):
            run = C.add(run, R[grp])
            acc = C.add(acc, run)
        for _ in range(g.bit_length() - 1):
            acc = C.dbl(acc)
        return C.add(tot, acc)
    pre = (ng,) + curve.proj
    return curve._ew(f, [pre, pre], "P", f"msm_groups_{ng}x{g}")


@functools.lru_cache(maxsize=None)
def _shift_add_fn(curve: Curve, c: int):
    """2^c·A + T for projective A, T: c doublings (one loop) and one
    addition, one formula."""
    def f(ar, A, T):
        C = curve.lift(ar)
        return C.add(C.F.loop(c, lambda i, a: C.dbl(a), A), T)
    return curve._ew(f, [curve.proj, curve.proj], "P", f"msm_shift_add_{c}")


def horner_windows(curve: Curve, T, c: int):
    """Σ_w 2^(c·w)·T_w for window sums T ``(W, 3, *fp, *batch)`` ->
    ``(3, *fp, *batch)`` by Horner's rule from the top window: W − 1 steps of
    ``_shift_add_fn`` in a loop (one small kernel, not W − 1 copies of it:
    the unrolled formula took ~40 s more to compile at W = 14, c = 19)."""
    W = T.shape[0]
    step = _shift_add_fn(curve, c)
    return lax.fori_loop(1, W, lambda i, acc: step(
        acc, lax.dynamic_index_in_dim(T, W - 1 - i, keepdims=False)), T[W - 1])


def reduce_buckets(curve: Curve, buckets, G: int, c: int, cfg: MSMConfig,
                   windows: int | None = None):
    """Σ_w 2^(c·w) Σ_b b·bucket[g, w, b−1] for each of the G scalar vectors:
    buckets ``(3, *fp, G·W·B)`` -> ``(3, *fp, G)``; W = ``windows``, default
    ``num_windows(c)`` (shifted bases: fewer).

    Each window's B buckets are cut into ng groups of g (ng·G·W lanes, at
    most ``small_lanes``, or ``lanes`` with ``horner``) reduced by running
    sums from the top (g sequential steps): S_grp = Σ_t (t+1)·X_t, R_grp =
    Σ_t X_t, so Σ_b b·X_b = Σ_grp S_grp + g·Σ_grp grp·R_grp.  The windows
    are then combined as ``MSMConfig.horner`` and ``small_weights`` say."""
    W, B = windows or num_windows(c), 1 << (c - 1)
    S = cfg.lanes if cfg.horner else cfg.small_lanes
    ng = 1
    while ng * 2 <= B and G * W * ng * 2 <= S:
        ng *= 2
    g = B // ng
    lanes = G * W * ng
    pre = curve.proj

    def loop():
        # step-major (g, 3, *fp, lanes): each step's slice is one contiguous block (sliced
        # from (…, lanes, g) it was a strided gather, 21 ms of 512 steps at 2^27, c = 20)
        x = jnp.moveaxis(buckets.reshape(pre + (lanes, g)), -1, 0)
        add = _step_fn(curve, affine=False)
        zero = jnp.zeros((1, lanes), jnp.uint32)

        def running(t, RS):
            R, Sm = RS
            R = add(R, lax.dynamic_index_in_dim(x, g - 1 - t, keepdims=False), zero)
            return R, add(Sm, R, zero)

        return lax.fori_loop(0, g, running, (curve.identity((lanes,)), curve.identity((lanes,))))

    def fused():             # one kernel, R and S in registers (``segsum.running_sums``)
        return segsum.running_sums(curve, point_major(curve, buckets), lanes, g)

    R, Sm = (_fused_or_loop(curve, cfg, fused, loop)
             if cfg.fused_running and not (curve.split or cfg.horner) else loop())
    if cfg.horner:
        def by_group(v):      # lanes (g, w, grp) -> (ng, 3, *fp, G·W)
            return jnp.moveaxis(v.reshape(pre + (G * W, ng)), -1, 0)
        T = _group_fn(curve, ng, g)(by_group(Sm), by_group(R)) if ng > 1 else Sm
        T = jnp.moveaxis(T.reshape(pre + (G, W)), -1, 0)               # (W, 3, *fp, G)
        return horner_windows(curve, T, c)
    if cfg.small_weights:
        # R_grp · grp·g (< 2^(c−1)) in parallel lanes, S_grp as it is; both summed per window
        # (G·W sums); then Horner over the windows (one shift-and-add kernel a window)
        u = [grp * g for _ in range(G * W) for grp in range(ng)]
        terms = jnp.concatenate([Sm, _times_ints(curve, R, u)], axis=-1)
        T = _sum_by_key(curve, terms, np.tile(np.repeat(np.arange(G * W), ng), 2), G * W, cfg)
        T = jnp.moveaxis(T.reshape(pre + (G, W)), -1, 0)               # (W, 3, *fp, G)
        return horner_windows(curve, T, c)
    # weights: S_grp · 2^(c·w) and R_grp · 2^(c·w)·grp·g, as integers
    w_s, w_r = [], []
    for gi in range(G):
        for w in range(W):
            for grp in range(ng):
                w_s.append(1 << (c * w))
                w_r.append((1 << (c * w)) * grp * g)
    terms = _times_ints(curve, jnp.concatenate([Sm, R], axis=-1), w_s + w_r)
    return _sum_by_key(curve, terms, np.tile(np.repeat(np.arange(G), W * ng), 2), G, cfg)


def _times_ints(curve: Curve, P, ints: list[int]):
    """ints[i]·P[..., i] for projective points ``(3, *fp, k)`` and k Python
    ints ≥ 0 (one double-and-add over the largest's bits, ``scalar_mul_int``)."""
    nbits = max(max(ints).bit_length(), 1)
    nk = -(-nbits // 32)
    limbs = np.array([[(v >> (32 * i)) & 0xFFFFFFFF for v in ints] for i in range(nk)], np.uint32)
    return curve.scalar_mul_int(P, jnp.asarray(limbs), nbits)


def _sum_by_key(curve: Curve, terms, key, count: int, cfg: MSMConfig):
    """The sums of the projective terms ``(3, *fp, k)`` sharing each key
    (``key``: k host ints < count) -> ``(3, *fp, count)``."""
    order = np.argsort(key, kind="stable").astype(np.int32)
    return _reduce_parts(curve, jnp.asarray(key[order].astype(np.int32)),
                         jnp.take(terms, jnp.asarray(order), axis=-1), curve.identity((count,)), cfg)


# ------------------------------------------------------------------ public API
def point_major(curve: Curve, bases) -> jnp.ndarray:
    """Points ``(k, *fp, N)`` (affine bases, k = 2, or projective buckets),
    or a tuple of such pieces to be concatenated along N (a pinned key's
    chunk, ``_host_chunk``), -> ``(N, k·F)`` (one row per point, so the
    accumulation's random gathers read whole points)."""
    bases = jnp.concatenate(bases, axis=-1) if isinstance(bases, tuple) else jnp.asarray(bases)
    n = bases.shape[-1]
    return bases.reshape(-1, n).T


def _is_identity_pm(bases_pm):
    """Point-major affine bases ``(N, rows)`` -> ``(N,)`` bool: the encoded
    identity (0, 0)."""
    return jnp.all(bases_pm == 0, axis=1)


def _msm_core(curve: Curve, bases_pm, k, c: int, cfg: MSMConfig, shifts: int = 1):
    """Buckets ``(3, *fp, G·W·B)`` of one chunk: bases point-major
    ``(N, rows)``, canonical scalars ``(8, G, N)``.  Scalars of identity
    bases (0, 0) are taken as 0, so their digits are skipped (a proving key's
    query points are the identity for variables absent from that matrix).
    ``shifts`` p > 1: bases_pm are ``shift_bases``' p·N rows and the digits
    are dealt to them (``deal_digits``): W = ⌈num_windows(c)/p⌉."""
    G, n = k.shape[1], k.shape[-1]
    B = 1 << (c - 1)
    k = jnp.where(_is_identity_pm(bases_pm[:n]), jnp.uint32(0), k)
    digits = signed_digits(k, c).transpose(1, 0, 2)                # (G, W, N)
    if shifts > 1:
        digits = deal_digits(digits, shifts)                       # (G, ⌈W/p⌉, p·N)
    keys, payload = bucket_keys(digits, B)
    return bucket_sums(curve, bases_pm, keys, payload, G * digits.shape[1] * B, cfg)


# XLA:GPU runs a while loop whose trip count it cannot know (the partial reduction's levels
# in ``bucket_sums``) by reading its predicate back to the host every iteration, which holds
# the dispatching thread for the program's whole device time, so a chunked MSM's host puts
# wait behind it; in a command buffer with conditional nodes the loop runs on the device
# (bench/NOTES.md hypothesis 87: msm_h over 2^27 pinned host bases 2.31 -> 1.89 s on the
# H100).  The list repeats XLA's default kinds: a per-program value sets the whole list.
# Ignored off the GPU.  Every top-level program that holds ``bucket_sums`` takes it (a
# program nested in another runs with the outer one's: ``_bits_jit`` in ``_bits_add_jit``).
COMMAND_BUFFER = {"xla_gpu_enable_command_buffer":
                  "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,DYNAMIC_SLICE_FUSION,WHILE,CONDITIONAL"}


def _traced(cfg: MSMConfig) -> MSMConfig:
    """The settings a jitted program depends on (the budget and the split
    threshold are decided outside), so configs differing only there share
    compiled programs."""
    return dataclasses.replace(cfg, budget_bytes=None, split_threshold=None, bucket_weight=None,
                               put_ahead=True)


@functools.partial(aot.program, static_argnums=(0, 3, 4), compiler_options=COMMAND_BUFFER)
def _msm_jit(curve, bases, scalars, c, cfg):
    k = Fr.from_montgomery(scalars)
    buckets = _msm_core(curve, point_major(curve, bases), k, c, cfg)
    return reduce_buckets(curve, buckets, k.shape[1], c, cfg)


@functools.partial(aot.program, static_argnums=(0, 3, 4, 5), compiler_options=COMMAND_BUFFER)
def _msm_shifted_jit(curve, points, scalars, c, p, cfg):
    """``_msm_jit`` over ``shift_bases``' points ``(2, *fp, p·N)``."""
    k = Fr.from_montgomery(scalars)
    buckets = _msm_core(curve, point_major(curve, points), k, c, cfg, p)
    return reduce_buckets(curve, buckets, k.shape[1], c, cfg, shifted_windows(c, p))


@functools.partial(aot.program, static_argnums=(0, 3, 4), compiler_options=COMMAND_BUFFER)
def _chunk_jit(curve, bases, scalars, c, cfg, buckets):
    k = Fr.from_montgomery(scalars)
    return curve.add(buckets, _msm_core(curve, point_major(curve, bases), k, c, cfg))


@functools.partial(aot.program, static_argnums=(0, 2, 3, 4))
def _reduce_jit(curve, buckets, G, c, cfg):
    return reduce_buckets(curve, buckets, G, c, cfg)


# Device bytes per entry of the Pippenger sort (keys, payload, their sorted copies and the
# sort's scratch).  Measured on the H200 (session 11): one allocation of 16,148,261,888 B,
# 30.1 B per entry, for a 2^25-point G1 chunk (2^29 entries) failed; the estimate had 24.
SORT_BYTES_PER_ENTRY = 32


def working_set_bytes(curve: Curve, n: int, G: int, c: int, cfg: MSMConfig) -> int:
    """Estimated peak device bytes of one chunk of n points (bases, scalars,
    digits, sort buffers, bucket and lane arrays)."""
    W, B = num_windows(c), 1 << (c - 1)
    F = 4 * math.prod(curve.fp)
    T = G * W * n
    return (n * 2 * F * 2            # bases, and their point-major copy
            + G * n * 32 * 2         # scalars, canonical copy
            + T * 4 * 2              # digits, keys (int32)
            + T * SORT_BYTES_PER_ENTRY   # sort in/out/scratch (key + payload)
            + (G * W * B + 2 * cfg.lanes) * 3 * F * 2   # buckets + parts target, twice
            + cfg.lanes * (3 * F + 2 * F) * 4)          # acc, gathered points, temporaries


def bits_working_set_bytes(curve: Curve, n: int, G: int, cfg: MSMConfig) -> int:
    """Estimated peak device bytes of ``bits_sum`` over n bases and G bit
    vectors (bases and their point-major copy, keys and payload, sort
    buffers, the G sums and the lane arrays)."""
    F = 4 * math.prod(curve.fp)
    return (_bases_bytes(curve, n) * 2 + G * n * 4 * 2 + G * n * 8 * 3 + G * n
            + (G + 2 * cfg.lanes) * 3 * F * 2 + cfg.lanes * (3 * F + 2 * F) * 4)


def _bases_bytes(curve: Curve, n: int) -> int:
    """Bytes of n affine bases."""
    return n * 2 * 4 * math.prod(curve.fp)


def _chunk_size(n: int, working_set, budget: int, what: str) -> int:
    """The largest power-of-two chunk (at most N rounded up) whose
    ``working_set(chunk)`` fits ``budget`` bytes; a clear error if even one
    point does not."""
    chunk = _pow2(max(n, 1))
    while chunk > 1 and working_set(chunk) > budget:
        chunk //= 2
    if working_set(chunk) > budget:
        raise ValueError(f"{what}: budget of {budget} bytes is below the fixed working set "
                         f"({working_set(1)} bytes); lower lanes/window")
    return chunk


def plan(curve: Curve, n: int, G: int, cfg: MSMConfig, extra=lambda k: 0) -> tuple[int, int]:
    """(window c, chunk) of an MSM of n points and G scalar vectors: the
    chunk is the largest power of two (at most N rounded up; N itself,
    unchunked, when it fits) whose working set (``working_set_bytes`` plus,
    when chunked, ``extra(chunk)``: host copies in flight) fits
    ``cfg.budget_bytes`` and whose G·W·chunk sort entries stay int32; c is
    ``cfg.window`` or the width of least ``window_cost`` with the chunks it
    leaves (a wider window needs fewer entries but more bucket passes).  A
    clear error if not even one point fits."""
    budget = cfg.budget_bytes

    def chunk_for(c):
        W = num_windows(c)

        def fits(k, chunked):
            return G * W * k < 1 << 31 and (budget is None or working_set_bytes(
                curve, k, G, c, cfg) + (extra(k) if chunked else 0) <= budget)

        if fits(n, False):
            return n
        k = _pow2(max(n, 1))
        while k > 1 and not fits(k, True):
            k //= 2
        return k if fits(k, True) else None

    widths = [cfg.window] if cfg.window else _widths(G)
    best = None
    for c in widths:
        check_window(c, G)
        k = chunk_for(c)
        if k is None:
            continue
        cost = window_cost(n, c, -(-n // k), bucket_weight(curve, cfg))
        if best is None or cost < best[0]:
            best = (cost, c, k)
    if best is None:
        raise ValueError(f"msm: budget of {budget} bytes is below the fixed working set "
                         f"({working_set_bytes(curve, 1, G, widths[0], cfg)} bytes); lower "
                         f"lanes/window")
    return best[1], best[2]


def _is_host(x) -> bool:
    """Whether x lives in host memory: numpy, or a ``transfer.PinnedVector``."""
    return isinstance(x, (np.ndarray, transfer.PinnedVector))


def _host_chunk(x, lo: int, hi: int, size: int, pool=None):
    """``x[..., lo:hi]`` zero-padded to ``size``, on the default device: a
    pinned vector's whole pieces as a tuple (``transfer.put_pieces``: the
    chunk's program concatenates them, ``point_major``) or, for other
    ranges, put into one array (``transfer.put_range``); a host array's
    slice by ``_to_device``; a device array's sliced in place."""
    if isinstance(x, transfer.PinnedVector):
        return transfer.put_pieces(x, lo, hi, size) or transfer.put_range(x, lo, hi, size)
    return _to_device(_pad_last(x[..., lo:hi], size), pool)


def _to_device(x, pool=None):
    """x on the default device.  A ``transfer.PinnedVector`` goes whole by
    ``transfer.put_range``.  A host array, typically a chunk of host bases
    or scalars (a last-axis slice of ``(2, *fp, N)`` / ``(8, G, N)``: one
    contiguous run per limb row), goes by ``transfer.put_planes`` on
    ``pool`` (default one of ``transfer.WORKERS`` threads for this call):
    pieces of its rows written into one device array, no host gather of the
    strided slice.  The pool is what makes it fast (H200 host, 2 GiB: 30.2
    GB/s with 16 threads, 6.4 GB/s from one thread; bench/NOTES.md session
    27)."""
    if isinstance(x, transfer.PinnedVector):
        return transfer.put_range(x, 0, x.n)
    if not isinstance(x, np.ndarray):
        return jnp.asarray(x)
    with transfer.copy_pool(pool) as on:   # rows: a view for such slices (the axes merge)
        return transfer.put_planes(x, on)


def streaming_bytes(curve: Curve, G: int, host_bases: bool, host_scalars: bool,
                    put_ahead: bool = True):
    """``plan``'s ``extra`` for a chunked ``msm`` with host bases and/or host
    scalars (G vectors): k -> the device bytes of ``CHUNKS_HELD`` chunks'
    copies of them (``_in_chunks``: the running chunk's, the next one's and
    the one put ahead of both; without ``put_ahead``, two)."""
    held = CHUNKS_HELD if put_ahead else CHUNKS_HELD - 1
    return lambda k: held * ((_bases_bytes(curve, k) if host_bases else 0)
                             + (G * k * 32 if host_scalars else 0))


# chunks whose inputs are on the device at once in ``_in_chunks``: two dispatched (the
# one running, the next), and the one after them put ahead (hypothesis 97)
CHUNKS_HELD = transfer.STEPS_HELD


def _in_chunks(n: int, chunk: int, put, run, acc, on_chunk=None, put_ahead: bool = True):
    """acc ← run(put(lo, hi), acc) over [0, N) in chunks of ``chunk``:
    ``ops.transfer.pipeline`` (at most two chunks in flight; chunk k + 1's
    inputs put before chunk k is dispatched, unless not ``put_ahead``;
    ``on_chunk()`` before every chunk but the first)."""
    state = [acc]

    def step(k, inputs):
        state[0] = run(inputs, state[0])
        return state[0]

    transfer.pipeline(-(-n // chunk), lambda k: put(k * chunk, min(n, (k + 1) * chunk)), step,
                      on_chunk, put_ahead, span_name="msm.wait")
    return state[0]


def many_working_set_bytes(curve: Curve, sizes, batch: int, n_out: int, c: int,
                           cfg: MSMConfig) -> int:
    """Estimated peak device bytes of ``msm_many`` beyond its inputs: sizes
    ``[(N, general positions, 0/1 positions)]`` per part, ``batch`` scalar
    vectors per part, ``n_out`` outputs: the point-major copy of all bases,
    the gathered general scalars, digits, keys and sort buffers of every
    entry, buckets and lane arrays."""
    W, B = num_windows(c), 1 << (c - 1)
    F = 4 * math.prod(curve.fp)
    n = sum(x for x, _, _ in sizes)
    dense = sum(d for _, d, _ in sizes)
    T = batch * sum(W * d + b for _, d, b in sizes)
    return (n * 2 * F + batch * dense * 32 * 2 + T * 4 * 2 + T * SORT_BYTES_PER_ENTRY
            + (n_out * batch * W * B + 2 * cfg.lanes) * 3 * F * 2
            + cfg.lanes * (3 * F + 2 * F) * 4)


def _check(curve: Curve, bases, scalars):
    if bases.ndim != len(curve.aff) + 1 or tuple(bases.shape[:-1]) != curve.aff:
        raise ValueError(f"msm: bases must be affine {curve.name} points of shape "
                         f"{curve.aff + ('N',)}, got {tuple(bases.shape)}")
    if scalars.ndim < 2 or scalars.shape[0] != 8:
        raise ValueError(f"msm: scalars must be Fr elements of shape (8, *batch, N), "
                         f"got {tuple(scalars.shape)}")
    if scalars.shape[-1] != bases.shape[-1]:
        raise ValueError(f"msm: {scalars.shape[-1]} scalars for {bases.shape[-1]} bases")
    if bases.dtype != np.uint32 or scalars.dtype != np.uint32:
        raise TypeError("msm: bases and scalars must be uint32 limb arrays")


class ShiftedBases(NamedTuple):
    """Affine bases with p − 1 shifted copies for c-bit windows (``shift_bases``):
    ``points`` ``(2, *fp, p·N)``, copy t (points t·N … t·N + N − 1) being
    2^(c·t·⌈W/p⌉)·P; ``window`` c, ``factor`` p."""
    points: Any
    window: int
    factor: int


def shifted_windows(c: int, p: int) -> int:
    """Windows of an MSM over bases with p shifted copies: ⌈num_windows(c)/p⌉."""
    return -(-num_windows(c) // p)


@functools.partial(jax.jit, static_argnums=(0, 2))
def _doublings(curve: Curve, P, k: int):
    """2^k·P for projective P, k doublings."""
    return lax.fori_loop(0, k, lambda i, x: curve.double(x), P)


def shift_bases(curve: Curve, bases, c: int, p: int) -> ShiftedBases:
    """Affine bases ``(2, *fp, N)`` -> ``ShiftedBases`` for c-bit windows:
    the bases, then 2^(c·⌈W/p⌉)·P, 2^(2c·⌈W/p⌉)·P, … (p copies in all,
    c·⌈W/p⌉ doublings between copies, each copy made affine by one batch
    inversion).  An MSM over them (``msm``) sorts as many entries as over
    the bases alone but reduces ⌈W/p⌉ windows instead of W and combines
    them with c·(⌈W/p⌉ − 1) doublings instead of c·(W − 1), at p times
    the bases' memory: the precomputation of fixed bases (a proving key's)
    that GPU MSMs offer (ICICLE's ``precompute_factor``; bench/NOTES.md
    hypothesis 75).  The identity (0, 0) stays the identity."""
    check_window(c)
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"shift_bases: the factor must be an int >= 1, got {p!r}")
    bases = jnp.asarray(bases)
    if bases.ndim != len(curve.aff) + 1 or tuple(bases.shape[:-1]) != curve.aff:
        raise ValueError(f"shift_bases: bases must be affine {curve.name} points of shape "
                         f"{curve.aff + ('N',)}, got {tuple(bases.shape)}")
    copies, P = [bases], curve.from_affine(bases)
    for _ in range(1, p):
        P = _doublings(curve, P, c * shifted_windows(c, p))
        copies.append(curve.to_affine(P))
    return ShiftedBases(jnp.concatenate(copies, axis=-1) if p > 1 else bases, c, p)


def _msm_shifted(curve: Curve, bases: ShiftedBases, scalars, cfg: MSMConfig):
    """``msm`` over shifted bases: unchunked, no 0/1 split (ValueError if
    the config asks for another window, the shapes disagree, or the working
    set exceeds the budget)."""
    pts, c, p = jnp.asarray(bases.points), bases.window, bases.factor
    if cfg.window not in (None, c):
        raise ValueError(f"msm: the bases are shifted for {c}-bit windows, the config asks "
                         f"for {cfg.window}")
    n = pts.shape[-1] // p if pts.ndim else 0
    if pts.ndim and pts.shape[-1] != p * n:
        raise ValueError(f"msm: bases shifted {p} times hold p·N points, got {pts.shape[-1]}")
    # one copy's shape against the scalars: msm's own checks
    _check(curve, jax.ShapeDtypeStruct(pts.shape[:-1] + (n,), pts.dtype), scalars)
    batch = scalars.shape[1:-1]
    G = math.prod(batch)
    check_window(c, G)
    if G * shifted_windows(c, p) * p * n >= 1 << 31:
        raise ValueError(f"msm: {G}·{shifted_windows(c, p)}·{p}·{n} sort entries overflow int32; "
                         f"shifted bases are not chunked")
    if cfg.budget_bytes is not None and working_set_bytes(curve, p * n, G, c, cfg) > cfg.budget_bytes:
        raise ValueError(f"msm: shifted bases are not chunked, and {p}·{n} of them exceed "
                         f"the budget of {cfg.budget_bytes} bytes")
    s = _to_device(scalars).reshape(8, G, n)
    return _msm_shifted_jit(curve, pts, s, c, p, _traced(cfg)).reshape(curve.proj + batch)


def msm(curve: Curve, bases, scalars, config: MSMConfig | None = None, on_chunk=None):
    """Σ_i s_i·P_i for every scalar vector: bases affine ``(2, *fp, N)``
    (device or host array), scalars Fr ``(8, *batch, N)`` (device or host
    array) -> projective ``(3, *fp, *batch)``.  With ``config.budget_bytes``
    the bases are processed in power-of-two chunks whose working set fits
    the budget; host bases and host scalars then go to the device a chunk
    at a time, the next chunk's put before this one's run (``_in_chunks``;
    the 0/1 split below puts host scalars whole).

    0/1 split (``config.split_threshold``): the positions where every scalar
    vector holds 0 or 1 are counted on the device (one host sync of the
    count); when they are at least that fraction of N, they are summed by
    ``bits_sum`` and only the other positions go through Pippenger, both
    parts gathered on the device and padded to powers of two (so data with
    different counts shares compiled programs).  Host bases (streaming) are
    split on the host when a budget is set (the mask comes back, the
    gathers run on the host).
    No count when the scalars or bases are tracers (``msm`` called under
    ``jit``): the plain path, whose sort already skips zero digits.
    ``on_chunk``: called between chunks (``_in_chunks``).

    ``bases`` may be ``ShiftedBases`` (``shift_bases``): then the MSM runs
    unchunked in their window, without the 0/1 split."""
    if isinstance(bases, ShiftedBases):
        return _msm_shifted(curve, bases, scalars, config or default_config(bases.points))
    cfg = config or default_config(bases)
    _check(curve, bases, scalars)
    n = bases.shape[-1]
    batch = scalars.shape[1:-1]
    G = math.prod(batch)
    if cfg.window:
        check_window(cfg.window, G)
    # host scalars stay on the host for the chunked path (each chunk's slice is put with
    # its bases): staged whole, they are a second device vector beside the budget (4 GiB
    # for H at 2^27: the 32GiB 16 GB mode's msm_h, bench/NOTES.md session 27)
    host_s = isinstance(scalars, np.ndarray)
    s = scalars.reshape(8, G, n) if host_s else jnp.asarray(scalars).reshape(8, G, n)
    # (pinned bases are a key's parts, split already: no count)
    if cfg.split_threshold is not None and not isinstance(bases, transfer.PinnedVector) \
            and not any(isinstance(x, jax.core.Tracer) for x in (bases, scalars)):
        out = _auto_split(curve, bases, _to_device(s), cfg, on_chunk)
        if out is not None:
            return out.reshape(curve.proj + batch)
    if cfg.budget_bytes is None and n & (n - 1):
        # round N up to a power of two ((0, 0) bases, zero scalars: skipped entries), so
        # MSMs of nearby sizes share one compiled program
        if isinstance(bases, transfer.PinnedVector):
            bases = _to_device(bases)
        n2 = 1 << (n - 1).bit_length()
        pad = [(0, 0)] * (bases.ndim - 1) + [(0, n2 - n)]
        bases = np.pad(bases, pad) if isinstance(bases, np.ndarray) else jnp.pad(bases, pad)
        s = jnp.pad(_to_device(s), ((0, 0), (0, 0), (0, n2 - n)))
        n = n2
    c, chunk = plan(curve, n, G, cfg,
                    streaming_bytes(curve, G, _is_host(bases), host_s, cfg.put_ahead))
    if chunk >= n:
        out = _msm_jit(curve, _to_device(bases), _to_device(s), c, _traced(cfg))
        return out.reshape(curve.proj + batch)

    def put(lo, hi):
        with span("msm.put"):                # within it, each operand's share
            with span("msm.put_bases"):
                b = _host_chunk(bases, lo, hi, chunk, pool)
            with span("msm.put_scalars"):
                sc = _to_device(_pad_last(s[..., lo:hi], chunk), pool)
        return b, sc

    def run(inputs, buckets):
        with span("msm.chunk"):
            return _chunk_jit(curve, *inputs, c, _traced(cfg), buckets)

    with transfer.copy_pool() as pool:     # one for every chunk's puts
        buckets = _in_chunks(n, chunk, put, run, curve.identity((bucket_count(c, G),)),
                             on_chunk, cfg.put_ahead)
    return _reduce_jit(curve, buckets, G, c, _traced(cfg)).reshape(curve.proj + batch)


@functools.partial(aot.program, static_argnums=(0, 3), compiler_options=COMMAND_BUFFER)
def _bits_jit(curve, bases, bits, cfg):
    G, N = bits.shape
    pm = point_major(curve, bases)
    bits = bits & ~_is_identity_pm(pm)                 # identity bases add nothing: skipped
    keys = jnp.where(bits, jnp.arange(G, dtype=jnp.int32)[:, None], jnp.int32(G)).reshape(-1)
    payload = jnp.broadcast_to(jnp.arange(N, dtype=jnp.uint32), (G, N)).reshape(-1)
    return bucket_sums(curve, pm, keys, payload, G, cfg)


def bits_sum(curve: Curve, bases, bits, config: MSMConfig | None = None, on_chunk=None):
    """Σ_{b_i = 1} P_i for 0/1 vectors (cuzk's "batch addition"): bases affine
    ``(2, *fp, N)``, bits bool ``(*batch, N)`` -> projective ``(3, *fp, *batch)``.

    The MSM of a bit-valued scalar vector without windows or bucket
    reduction: each set position is one entry with the key of its vector
    (the rest get the sentinel), one sort of batch·N keys, then the
    segmented sum of ``bucket_sums``, whose output buckets are the sums.
    Bases may be a host array (streaming).  With ``config.budget_bytes`` the
    bases go in power-of-two chunks whose ``bits_working_set_bytes`` (plus,
    for host bases, ``CHUNKS_HELD`` chunks' copies: their rows and their
    stack, ``_to_device``) fits the budget, at most two in flight, the next
    one's put ahead; ``on_chunk`` as ``msm``."""
    cfg = config or default_config(bases)
    if not _is_host(bases):
        bases = jnp.asarray(bases)
    if bases.ndim != len(curve.aff) + 1 or tuple(bases.shape[:-1]) != curve.aff:
        raise ValueError(f"bits_sum: bases must be affine {curve.name} points of shape "
                         f"{curve.aff + ('N',)}, got {tuple(bases.shape)}")
    bits = jnp.asarray(bits)
    if bits.ndim < 1 or bits.shape[-1] != bases.shape[-1]:
        raise ValueError(f"bits_sum: bits must be (*batch, {bases.shape[-1]}), got {bits.shape}")
    batch = bits.shape[:-1]
    bits = bits.reshape(-1, bits.shape[-1]).astype(bool)
    G, n = bits.shape
    host = _is_host(bases)
    if cfg.budget_bytes is None or bits_working_set_bytes(curve, n, G, cfg) <= cfg.budget_bytes:
        return _bits_jit(curve, _to_device(bases), bits, _traced(cfg)).reshape(curve.proj + batch)
    chunk = _chunk_size(n, lambda k: bits_working_set_bytes(curve, k, G, cfg)
                        + streaming_bytes(curve, G, host, False, cfg.put_ahead)(k),
                        cfg.budget_bytes, "bits_sum")

    def put(lo, hi):
        with span("msm.put"):
            return _host_chunk(bases, lo, hi, chunk, pool), _pad_last(bits[:, lo:hi], chunk)

    def run(inputs, acc):
        with span("msm.chunk"):
            return _bits_add_jit(curve, *inputs, _traced(cfg), acc)

    with transfer.copy_pool() as pool:     # one for every chunk's puts
        out = _in_chunks(n, chunk, put, run, curve.identity((G,)), on_chunk, cfg.put_ahead)
    return out.reshape(curve.proj + batch)


@functools.partial(aot.program, static_argnums=(0, 3), compiler_options=COMMAND_BUFFER)
def _bits_add_jit(curve, bases, bits, cfg, acc):
    return curve.add(acc, _bits_jit(curve, bases, bits, cfg))


def _pow2(k: int) -> int:
    """The least power of two >= k (k >= 1)."""
    return 1 << (k - 1).bit_length()


def _pad_last(x, size: int):
    """Zero-pad the last axis of a host or device array to ``size`` (no copy
    when it already has that size)."""
    if x.shape[-1] == size:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(0, size - x.shape[-1])]
    return (np if isinstance(x, np.ndarray) else jnp).pad(x, pad)


def _split_sum(curve: Curve, bit_bases, bits, dense_bases, dense_scalars, cfg: MSMConfig,
               on_chunk=None):
    """bits_sum(bit_bases, bits) + msm(dense_bases, dense_scalars); either
    part may be None.  bits ``(G, k)`` bool, dense scalars ``(8, G, k')`` ->
    ``(3, *fp, G)``."""
    out = None
    if bits is not None:
        out = bits_sum(curve, bit_bases, bits, cfg, on_chunk)
    if dense_scalars is not None:
        d = msm(curve, dense_bases, dense_scalars, cfg, on_chunk)
        out = d if out is None else curve.add(out, d)
    return out


@aot.program
def _bit_mask(scalars):
    """Fr scalars ``(8, G, N)`` (Montgomery) -> (mask ``(N,)`` bool: every
    vector holds 0 or 1 there (limbs 0 or R mod r), count int32)."""
    one = Fr.ones(()).reshape(8, 1, 1)
    mask = jnp.all(jnp.all(scalars == 0, axis=0) | jnp.all(scalars == one, axis=0), axis=0)
    return mask, jnp.sum(mask, dtype=jnp.int32)


@functools.partial(aot.program, static_argnums=(3, 4))
def _gather_split(bases, scalars, mask, kb: int, kd: int):
    """Split by ``mask`` on the device: (bit bases ``(2, *fp, kb)``, bits
    ``(G, kb)`` bool, dense bases ``(2, *fp, kd)``, dense scalars
    ``(8, G, kd)``); padding slots hold the affine identity (0, 0) and a zero
    scalar / bit."""
    n = mask.shape[0]
    take = lambda x, i: jnp.take(x, i, axis=-1, mode="fill", fill_value=0)
    ib = jnp.nonzero(mask, size=kb, fill_value=n)[0]
    idn = jnp.nonzero(~mask, size=kd, fill_value=n)[0]
    bits = jnp.any(take(scalars, ib) != 0, axis=0)
    return take(bases, ib), bits, take(bases, idn), take(scalars, idn)


def count_bit_positions(scalars) -> int:
    """How many positions of Fr scalars ``(8, *batch, N)`` hold 0 or 1 in
    every vector (what ``msm``'s automatic split sends to ``bits_sum``)."""
    s = jnp.asarray(scalars)
    return int(_bit_mask(s.reshape(8, -1, s.shape[-1]))[1])


def _auto_split(curve: Curve, bases, s, cfg: MSMConfig, on_chunk=None):
    """``msm``'s 0/1 split of scalars ``(8, G, N)``: None when the 0/1
    positions are fewer than ``cfg.split_threshold``·N (or none), else the
    sums ``(3, *fp, G)``.  The dense part runs with the split off (no
    recursion)."""
    n = s.shape[-1]
    mask, count = _bit_mask(s)
    count = int(count)                        # the one host sync
    if count == 0 or count < cfg.split_threshold * n:
        return None
    dense_cfg = dataclasses.replace(cfg, split_threshold=None)
    if isinstance(bases, np.ndarray) and cfg.budget_bytes is not None:   # streaming: on the host
        return msm_split(curve, bases, s, np.flatnonzero(np.asarray(mask)), dense_cfg,
                         on_chunk=on_chunk)
    kd = _pow2(n - count) if count < n else 0
    bb, bits, db, ds = _gather_split(_to_device(bases), s, mask, _pow2(count), kd)
    return _split_sum(curve, bb, bits, db if kd else None, ds if kd else None, dense_cfg,
                      on_chunk)


def msm_split(curve: Curve, bases, scalars, bit_positions, config: MSMConfig | None = None,
              on_chunk=None, offset: int = 0, tail=None):
    """Σ_i s_i·P_i where the scalars at ``bit_positions`` (host int array,
    the same for every vector, or a resident ``Positions``) are known to be 0 or 1 (e.g. a circuit's
    boolean-constrained variables in a satisfying witness): those positions
    are summed by ``bits_sum`` (padded to a power of two) and only the others
    go through ``msm`` at their own, smaller size (``msm`` may split that
    part again by counting; ``split_bases`` pads a key's dense parts to a
    shared size once).  ``bases`` may be ``SplitBases``
    (then ``bit_positions`` must be the ``Positions`` they were split by).
    ``offset`` and ``tail``: the N scalars are ``scalars[..., offset:]``
    followed by ``tail`` ``(8, *batch, T)`` if given (Groth16: L over the
    witness's aux part; A and B over w ‖ r and w ‖ s, δ's term last), read
    in place: neither the slice nor the concatenation is ever built (at
    2^27 each is 4 GiB of device memory).  Shapes and ``on_chunk`` as
    ``msm``."""
    cfg = config or default_config(bases)
    if not isinstance(bases, SplitBases):     # split here; a key keeps them split (split_bases)
        n = bases.shape[-1]
        pos = bit_positions if isinstance(bit_positions, Positions) else \
            positions(n, bit_positions, device=False)
        bases = split_bases(bases, pos)
        bit_positions = pos
    return _msm_presplit(curve, bases, scalars, bit_positions, cfg, on_chunk, offset, tail)


class SplitBases(NamedTuple):
    """Affine bases ``(2, *fp, N)`` split once by their ``Positions``:
    ``bits`` the bases at ``positions.bits`` (in that order, zero-padded to a
    power of two, as ``bits_sum`` takes them) and ``dense`` those at
    ``positions.dense`` (zero-padded to ``dense_size``; where every position
    is dense, the whole vector in its own order).  ``msm_split`` takes
    them instead of the whole vector, so a streaming MSM over host bases
    gathers and pads nothing per call (at 2^27 points a host gather of the
    bases costs ~1 min).  ``shape`` is the unsplit vector's."""
    bits: Any
    dense: Any
    n: int

    @property
    def shape(self) -> tuple:
        return tuple(self.dense.shape[:-1]) + (self.n,)


def split_bases(bases, pos: "Positions", dense_size: int | None = None,
                extra=None) -> SplitBases:
    """``SplitBases`` of ``bases`` (host or device) by ``pos`` (host or
    device index arrays), built once per key.  ``extra``: one more base
    (affine ``(2, *fp)``, e.g. δ), position N, at the end of the dense part
    (``pos`` then lists N+1 positions), appended after the gather so the
    N bases are never copied whole."""
    n = bases.shape[-1] + (extra is not None)
    _check_positions(pos, n, "split_bases")
    host = isinstance(bases, np.ndarray)      # host bases are gathered on the host, stay there
    xp = np if host else jnp
    bi, de = (np.asarray(x) if host else jnp.asarray(x) for x in (pos.bits, pos.dense))

    def dense(x):                             # x ‖ extra, zero-padded
        if extra is not None:
            x = xp.concatenate([x, xp.asarray(extra)[..., None]], axis=-1)
        return _pad_last(x, max(len(de), dense_size or 0))

    if covers_all(pos, n):                    # all dense: the vector as it is (own order)
        return SplitBases(xp.zeros(bases.shape[:-1] + (0,), bases.dtype), dense(bases), n)
    bb = _pad_last(xp.take(bases, bi, axis=-1), _pow2(len(bi))) if len(bi) else \
        xp.zeros(bases.shape[:-1] + (0,), bases.dtype)
    db = dense(xp.take(bases, de[:len(de) - (extra is not None)], axis=-1))
    return SplitBases(bb, db, n)


def _msm_presplit(curve: Curve, bases: SplitBases, scalars, pos, cfg: MSMConfig,
                  on_chunk=None, offset: int = 0, tail=None):
    """``msm_split`` over ``SplitBases``: only the scalars are gathered."""
    if not isinstance(pos, Positions):
        raise ValueError("msm_split: split bases need the Positions they were split by")
    _check_positions(pos, bases.n, "msm_split")
    if pos.bits.shape[0] > bases.bits.shape[-1] or pos.dense.shape[0] > bases.dense.shape[-1]:
        raise ValueError(f"msm_split: {pos.bits.shape[0]} bit and {pos.dense.shape[0]} dense "
                         f"positions for split bases of {bases.bits.shape[-1]} and "
                         f"{bases.dense.shape[-1]}")
    extra = 0 if tail is None else tail.shape[-1]
    if tail is not None and (tail.shape[:-1] != scalars.shape[:-1] or extra == 0):
        raise ValueError(f"msm_split: a tail of shape {tail.shape} for scalars of shape "
                         f"{scalars.shape} (want (8, *batch, T), T >= 1)")
    if offset < 0 or scalars.shape[-1] - offset + extra != bases.n:
        raise ValueError(f"msm_split: scalars over {scalars.shape[-1]} positions from offset "
                         f"{offset}, and {extra} more, for split bases of {bases.n}")
    batch = scalars.shape[1:-1]
    bb = bits = db = ds = None
    if pos.bits.shape[0]:
        bb = bases.bits
        bits = _nonzero_at(scalars, tail, jnp.asarray(pos.bits), offset, bb.shape[-1])
    if pos.dense.shape[0]:
        db = bases.dense                      # all dense: kept in its own order (split_bases)
        if covers_all(pos, bases.n) and offset == 0 and tail is None:
            ds = _pad_last(jnp.asarray(scalars).reshape((8, -1, bases.n)), db.shape[-1])
        else:
            ds = _scalars_at(scalars, tail, jnp.asarray(pos.dense), offset, db.shape[-1])
    if bits is None and ds is None:           # every position left out: the identity
        return curve.identity(batch)
    return _split_sum(curve, bb, bits, db, ds, cfg, on_chunk).reshape(curve.proj + batch)


def _view_take(x, tail, index, offset: int):
    """Position i of the view ``x[..., offset:] ‖ tail`` for each i of
    ``index`` (K,): ``(..., M)``, ``(..., T)`` or None -> ``(..., K)``;
    no slice or concatenation is built."""
    if tail is None:
        return jnp.take(x, index + offset, axis=-1)
    m = x.shape[-1] - offset
    head = jnp.take(x, jnp.minimum(index, m - 1) + offset, axis=-1)
    rest = jnp.take(tail, jnp.clip(index - m, 0, tail.shape[-1] - 1), axis=-1)
    return jnp.where(index < m, head, rest)


@functools.partial(jax.jit, static_argnames=("offset", "size"))
def _nonzero_at(scalars, tail, index, offset: int, size: int):
    """Whether each vector's scalar at ``index`` of ``scalars[..., offset:]
    ‖ tail`` is nonzero: ``(8, *batch, M)`` limbs, ``(8, *batch, T)`` or
    None, ``(K,)`` int32 -> ``(B, size)`` bool, zero-padded (B the flattened
    batch).  One compiled program, its flags taken after the limbs are
    reduced, so it holds bools only; run eagerly, op by op, the gather of the
    limbs was an array of its own, 8·4 bytes a position (3.8 GiB for PoRep
    32GiB's L: the 16 GB mode's out-of-memory in session 39)."""
    def flags(x):
        return jnp.any(x != 0, axis=0).reshape((-1, x.shape[-1]))
    return _pad_last(_view_take(flags(scalars), None if tail is None else flags(tail),
                                index, offset), size)


@functools.partial(jax.jit, static_argnames=("offset", "size"))
def _scalars_at(scalars, tail, index, offset: int, size: int):
    """The scalars at ``index`` of ``scalars[..., offset:] ‖ tail``:
    ``(8, *batch, M)``, ``(8, *batch, T)`` or None, ``(K,)`` ->
    ``(8, B, size)``, zero-padded."""
    def flat(x):
        return x.reshape((8, -1, x.shape[-1]))
    return _pad_last(_view_take(flat(scalars), None if tail is None else flat(tail), index,
                                offset), size)


class Positions(NamedTuple):
    """The split of an MSM's N positions: ``dense`` (general scalars: a
    signed digit per window) and ``bits`` (0 or 1 in every vector: one entry
    each, no windows), int32 index arrays that together list each of 0..N−1
    at most once.  A position listed in neither is left out of the sum: its
    base is the identity for this MSM (a circuit variable with no entry in
    the query's matrix: bellperson's density) or its scalar is always zero.
    Built by ``positions``; a prover keeps them resident next to its key
    (building them is O(N) host work and an upload: ~0.2–0.7 s per proof
    at 2^24 variables)."""
    dense: Any
    bits: Any


def positions(n: int, bit_positions=None, device: bool = True, keep=None) -> Positions:
    """``Positions`` of N positions from host bit positions (ints in
    [0, n), or None); ``keep``: a host bool mask ``(n,)`` of the positions
    in the sum (None: all), the others left out (bit positions among them
    too); device arrays unless ``device`` is False."""
    bi = np.zeros(0, np.int64) if bit_positions is None else \
        np.asarray(bit_positions, np.int64).reshape(-1)
    if bi.size and (bi.min() < 0 or bi.max() >= n):
        raise ValueError(f"bit positions must lie in [0, {n})")
    is_dense = np.ones(n, bool)
    is_dense[bi] = False
    if np.count_nonzero(~is_dense) != bi.size:
        raise ValueError("bit positions must not repeat")
    if keep is not None:
        keep = np.asarray(keep, bool)
        if keep.shape != (n,):
            raise ValueError(f"keep must be a bool mask of shape ({n},), got {keep.shape}")
        is_dense &= keep
        bi = bi[keep[bi]]
    out = Positions(np.flatnonzero(is_dense).astype(np.int32), bi.astype(np.int32))
    return Positions(*map(jnp.asarray, out)) if device else out


def covers_all(pos: Positions, n: int) -> bool:
    """Whether ``pos`` lists every one of the n positions as dense (then
    ``split_bases`` keeps the vector whole, in its own order)."""
    return pos.bits.shape[0] == 0 and pos.dense.shape[0] == n


def _check_positions(pos: Positions, n: int, name: str):
    if pos.dense.ndim != 1 or pos.bits.ndim != 1 or pos.dense.shape[0] + pos.bits.shape[0] > n:
        raise ValueError(f"{name}: positions of {pos.dense.shape[0]} dense and "
                         f"{pos.bits.shape[0]} bit entries for {n} bases")


class Part(NamedTuple):
    """One term list of a merged MSM (``msm_many``): Σ_i s_i·P_i over
    ``bases`` affine ``(2, *fp, N)`` (device) and ``scalars`` Fr
    ``(8, *batch, N)``, added into output ``out``.  ``bits``: where the
    scalars are 0 or 1 in every vector (one entry each, no windows): host
    indices, a resident ``Positions``, or None."""
    bases: Any
    scalars: Any
    out: int
    bits: Any = None


def _part_keys(s, dense_idx, bit_idx, grp, offset, c: int, nb: int):
    """Sort keys and payloads of one part: s ``(8, Gb, N)``; grp ``(Gb,)``
    int32 output groups.  Dense positions: W signed digits each, key
    (grp·W + w)·B + |d| − 1; bit positions: one entry in bucket (grp, 0, 1)
    if the scalar is nonzero.  Payload = offset + point index | sign << 31;
    zero digits and zero bits get the sentinel nb."""
    W, B = num_windows(c), 1 << (c - 1)
    keys, pay = [], []
    if dense_idx.shape[0]:
        d = signed_digits(Fr.from_montgomery(jnp.take(s, dense_idx, axis=-1)), c)   # (W, Gb, Nd)
        gw = grp[None, :, None] * W + jnp.arange(W, dtype=jnp.int32)[:, None, None]
        mag = jnp.abs(d)
        keys.append(jnp.where(mag == 0, nb, gw * B + mag - 1).reshape(-1))
        idx = (dense_idx.astype(jnp.uint32) + jnp.uint32(offset))[None, None, :]
        pay.append((idx | jnp.where(d < 0, jnp.uint32(1 << 31), jnp.uint32(0))).reshape(-1))
    if bit_idx.shape[0]:
        nz = ~Fr.is_zero(jnp.take(s, bit_idx, axis=-1))                        # (Gb, Nb)
        keys.append(jnp.where(nz, grp[:, None] * (W * B), nb).reshape(-1))
        idx = bit_idx.astype(jnp.uint32) + jnp.uint32(offset)
        pay.append(jnp.broadcast_to(idx, nz.shape).reshape(-1))
    return keys, pay


@functools.partial(aot.program, static_argnums=(0, 1, 2, 3), compiler_options=COMMAND_BUFFER)
def _many_jit(curve, outs, c, cfg, bases, scalars, dense_idx, bit_idx):
    n_out = max(outs) + 1
    Gb = scalars[0].shape[1]
    G = n_out * Gb
    nb = bucket_count(c, G)
    pms = [point_major(curve, b) for b in bases]
    pm = jnp.concatenate(pms, axis=0)
    keys, pay, offset = [], [], 0
    for o, b, s, di, bi, bpm in zip(outs, bases, scalars, dense_idx, bit_idx, pms):
        s = jnp.where(_is_identity_pm(bpm), jnp.uint32(0), s)       # identity bases: skipped
        grp = o * Gb + jnp.arange(Gb, dtype=jnp.int32)
        k, p = _part_keys(s, di, bi, grp, offset, c, nb)
        keys += k
        pay += p
        offset += b.shape[-1]
    buckets = bucket_sums(curve, pm, jnp.concatenate(keys), jnp.concatenate(pay), nb, cfg)
    return reduce_buckets(curve, buckets, G, c, cfg)


def msm_many(curve: Curve, parts: Sequence[Part], config: MSMConfig | None = None):
    """Several MSMs of one curve in ONE Pippenger pass: every part's entries
    (signed-digit windows for general scalars, single entries for the
    0/1 positions ``Part.bits``) are keyed by (output, batch index, window,
    digit), sorted together, accumulated by one segmented sum and reduced
    by one bucket reduction, so the fixed costs (sort, partial-sum levels,
    running sums, window weights: sequential kernel launches, which dominate
    small and bit-valued MSMs) are paid once instead of per MSM.  Parts with
    the same ``out`` are added.  Every part's scalars have the same batch
    shape; result projective ``(3, *fp, n_out, *batch)``.  The window is
    chosen from the largest number of general positions.  Device working
    set: the point-major copy of all bases plus the sort of all entries
    (use ``msm``/``msm_split`` with ``MSMConfig.budget_bytes`` when that
    does not fit)."""
    cfg = config or default_config([p.bases for p in parts])
    if not parts:
        raise ValueError("msm_many: no parts")
    batch = tuple(parts[0].scalars.shape[1:-1])
    Gb = math.prod(batch)
    bases, scalars, dense, bits, outs = [], [], [], [], []
    for j, p in enumerate(parts):
        b = jnp.asarray(p.bases)
        _check(curve, b, p.scalars)
        if tuple(p.scalars.shape[1:-1]) != batch:
            raise ValueError(f"msm_many: part {j} has batch {tuple(p.scalars.shape[1:-1])}, "
                             f"part 0 has {batch}")
        if not (isinstance(p.out, int) and p.out >= 0):
            raise ValueError(f"msm_many: part {j}: out must be an int >= 0, got {p.out!r}")
        n = b.shape[-1]
        try:
            pos = p.bits if isinstance(p.bits, Positions) else positions(n, p.bits)
            _check_positions(pos, n, "msm_many")
        except ValueError as e:
            raise ValueError(f"msm_many: part {j}: {e}") from None
        bases.append(b)
        scalars.append(jnp.asarray(p.scalars).reshape(8, Gb, n))
        dense.append(jnp.asarray(pos.dense))
        bits.append(jnp.asarray(pos.bits))
        outs.append(p.out)
    if sum(b.shape[-1] for b in bases) >= 1 << 31:
        raise ValueError("msm_many: more than 2^31 bases in one call")
    if not any(d.shape[0] + b.shape[0] for d, b in zip(dense, bits)):   # no term at all
        return curve.identity((max(outs) + 1,) + batch)
    c = check_window(many_window(curve, [d.shape[0] for d in dense], max(outs) + 1, cfg,
                                 (max(outs) + 1) * Gb), (max(outs) + 1) * Gb)
    out = _many_jit(curve, tuple(outs), c, _traced(cfg), tuple(bases), tuple(scalars), tuple(dense),
                    tuple(bits))
    return out.reshape(curve.proj + (max(outs) + 1,) + batch)


@functools.partial(jax.jit, static_argnums=0)
def msm_reference(curve: Curve, bases, scalars):
    """The plain definition, for tests: s_i·P_i per element by double-and-add
    (``Curve.scalar_mul``), summed one by one.  bases ``(2, *fp, N)``,
    scalars ``(8, N)`` -> ``(3, *fp)``."""
    terms = curve.scalar_mul(curve.from_affine(bases), scalars)

    def body(i, acc):
        return curve.add(acc, lax.dynamic_slice_in_dim(terms, i, 1, axis=-1))

    return lax.fori_loop(0, terms.shape[-1], body, curve.identity((1,)))[..., 0]
