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
device-resident and never baked into a compiled program as a constant.  The
coset powers g^i are two short tables (``PowerTable``, O(√n) each), read by
the kernel that applies them (``scale_by_powers``): a length-n coset vector
is 4 GiB at 2^27, and two of them decided whether a 32GiB partition's proof
fits beside its resident key (bench/NOTES.md, session 14).

Structure: iterative Cooley–Tukey (DIT) after a bit reversal (on CUDA a
tiled permutation, one Pallas kernel: ``_tiled_bit_reverse``; elsewhere one
gather), with
three radix-2 stages fused into one radix-8 kernel: each group of stages
splits the array into its 8 strided parts by a reshape and slices (no
gathers or scatters), calls one kernel and stacks the results back, so a
2^24 transform is 8 passes over memory instead of 24.  On CUDA each group
is one Pallas kernel that reads and writes the strided parts where they
lie, without the slices and stacks around it (``passes="inplace"``: on the
H200 2^27 in 137.9 ms instead of 154.7 ms, with 41% less XLA temporary
memory, bench/NOTES.md hypothesis 31), by default with every twiddle loaded
from the domain's table instead of derived from W by products
(``passes="loaded"``: 12 products per radix-8 block instead of 18,
hypothesis 54; 2^27 in 104.8 ms against 122.3 ms in place, session 30);
``passes="parts"`` keeps the sliced form there too; benchmarks compare them.

Bit-reversed orders: ``intt_to_bitrev`` and ``coset_intt_to_bitrev`` run the
transposed passes (decimation in frequency: natural order in, bit-reversed
out) and ``coset_ntt_from_bitrev`` the DIT passes alone (bit-reversed in,
natural out), so a caller that never needs natural-order coefficients in
between — Groth16's h — skips the gathers (bench/NOTES.md hypothesis 34).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ops.elementwise import KernelConfig, elementwise, x64
from ops.platform import by_platform
from ops.ptx import cap_registers, kernel_arith
from ops.field import Fr

try:  # Pallas' Triton backend; absent on exotic jaxlib builds
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
except ImportError:  # pragma: no cover
    pl = plgpu = None

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


class PowerTable(NamedTuple):
    """base^e·scale for exponents e < 2^log_n as two short tables:
    lo ``(8, 2^s)`` = base^j and hi ``(8, 2^(log_n − s))`` = base^(2^s·i)·scale,
    s = ⌈log_n/2⌉, so base^e·scale = lo[e mod 2^s]·hi[e div 2^s]."""
    lo: jnp.ndarray
    hi: jnp.ndarray


def power_table(base: int, log_n: int, scale: int = 1) -> PowerTable:
    """The ``PowerTable`` of ``base`` (times ``scale``) on the default device."""
    s = (log_n + 1) // 2
    hi = _powers(pow(base, 1 << s, Fr.p), 1 << (log_n - s))
    if scale != 1:
        hi = Fr.mul(hi, Fr.constant(scale % Fr.p, (1,)))
    return PowerTable(_powers(base, 1 << s), hi)


def _factors(table: PowerTable, e):
    """(lo[e mod 2^s], hi[e div 2^s]): the two factors of base^e·scale."""
    lo, hi = table
    s = lo.shape[1].bit_length() - 1
    return (jnp.take(lo, e & jnp.uint32(lo.shape[1] - 1), axis=1),
            jnp.take(hi, e >> jnp.uint32(s), axis=1))


@functools.lru_cache(maxsize=None)
def _mul3():
    """x·a·b in one elementwise kernel (one pass over x instead of two)."""
    return Fr._ew(lambda ar, x, a, b: ar.mul(ar.mul(x, a), b), 3, name="mul3")


def times_powers(x, table: PowerTable, e):
    """x · base^e·scale elementwise for a uint32 exponent array e (< 2^log_n)
    broadcast against x's batch axes: one kernel over x."""
    return _mul3()(x, *_factors(table, e))


# elements per chunk of ``scale_by_powers``'s loop (times the batch): its temporaries are a
# few chunks (the exponents' powers, the scaled part), 128 MiB each at 2^22
SCALE_CHUNK = 1 << 22
SCALE_FORMS = ("kernel", "loop")


def scale_by_powers(x, table: PowerTable, chunk: int = SCALE_CHUNK, bitrev: bool = False,
                    form: str = "kernel"):
    """x_i · base^i·scale along the last axis: x ``(8, *batch, n)`` with n ≤
    the table's 2^log_n; with ``bitrev`` (n a power of two) x_i ·
    base^rev(i)·scale, rev the bit reversal of log2(n) bits (a vector in
    bit-reversed order scaled as its natural order would be).  No length-n
    vector of powers exists in either form.

    ``form``: "kernel" — on CUDA, for n a power of two, ONE Pallas kernel
    that loads each element's two factors from the table itself
    (``_scale_pass``: one pass over x, in place; bench/NOTES.md hypothesis
    70), elsewhere the loop; "loop" — the factors gathered chunk by chunk (≤
    ``chunk`` elements of x per step of a ``lax.fori_loop`` that updates x in
    place; session 37 on an H100, a 2^27 vector: 21.95 ms in the loop, 9.62 in
    the kernel)."""
    if form not in SCALE_FORMS:
        raise ValueError(f"scale_by_powers: form must be one of {SCALE_FORMS}, got {form!r}")
    n = x.shape[-1]
    if bitrev and n & (n - 1):
        raise ValueError(f"scale_by_powers: bitrev needs a power-of-two length, got {n}")
    if n > table.lo.shape[1] * table.hi.shape[1]:
        raise ValueError(f"scale_by_powers: {n} elements, the table has powers for "
                         f"{table.lo.shape[1] * table.hi.shape[1]}")
    loop = lambda x, table: _scale_loop(x, table, chunk, bitrev)
    if form == "loop" or n & (n - 1) or pl is None:
        return loop(x, table)
    return by_platform(x, table, default=loop,
                       cuda=lambda x, table: _scale_pass(x, table, bitrev, Fr.config))


def _scale_loop(x, table: PowerTable, chunk: int, bitrev: bool):
    """``scale_by_powers``' "loop" form."""
    n = x.shape[-1]
    log_n = n.bit_length() - 1
    exps = (lambda e: _bit_reverse(e, log_n)) if bitrev else (lambda e: e)
    batch = math.prod(x.shape[1:-1])
    cs = 1 << max(0, (max(1, chunk // max(batch, 1))).bit_length() - 1)
    if n <= cs or n % cs:
        return times_powers(x, table, exps(jnp.arange(n, dtype=jnp.uint32)))

    def step(k, x):
        lo = k * cs
        part = lax.dynamic_slice_in_dim(x, lo, cs, axis=-1)
        e = lo.astype(jnp.uint32) + jnp.arange(cs, dtype=jnp.uint32)
        return lax.dynamic_update_slice_in_dim(x, times_powers(part, table, exps(e)), lo, axis=-1)

    return lax.fori_loop(0, n // cs, step, x)


def _scale_pass(x, table: PowerTable, bitrev: bool, config: KernelConfig):
    """``scale_by_powers``' kernel: x ``(8, *batch, n)``, n = 2^k, viewed as
    ``(8, B·n)`` in programs of bn = min(lanes, n) consecutive positions
    (bn divides n, so a program never straddles two vectors).  Position
    i = k0 + j of a program (k0 a multiple of bn, j < bn) has exponent e = i,
    or with ``bitrev`` e = rev_k(i) = rev_(k−b)(k0 / bn) + rev_b(j)·2^(k−b)
    (b = log2 bn: the two parts' bits do not overlap, so one scalar reversal
    per program and one lane constant); its factors lo[e mod 2^s] and
    hi[e div 2^s] are loaded from the (L2-resident, O(√n)) table inside
    the kernel, two products per element, x updated in place
    (``input_output_aliases``)."""
    shape = x.shape
    n = shape[-1]
    k = n.bit_length() - 1
    total = math.prod(shape[1:])
    bn = min(config.bn, n)
    b = bn.bit_length() - 1
    lo_t, hi_t = table
    s = lo_t.shape[1].bit_length() - 1
    arith = kernel_arith(Fr.arith, config)

    def kernel(x_ref, lo_ref, hi_ref, o_ref):
        block = pl.program_id(0) % (n // bn)                 # the program's block in its vector
        j = lax.iota(jnp.int32, bn)
        if bitrev:
            e = _bit_reverse(block, k - b) + (_bit_reverse(j, b) << (k - b))
        else:
            e = block * bn + j
        lo_i, hi_i = e & ((1 << s) - 1), e >> s
        xs = [x_ref[limb, :] for limb in range(Fr.L)]
        xs[0] = cap_registers(xs[0], config)
        f_lo = [plgpu.load(lo_ref.at[limb, lo_i]) for limb in range(Fr.L)]
        f_hi = [plgpu.load(hi_ref.at[limb, hi_i]) for limb in range(Fr.L)]
        out = arith.mul(arith.mul(xs, f_lo), f_hi)
        for limb in range(Fr.L):
            o_ref[limb, :] = out[limb].astype(jnp.uint32)

    spec = pl.BlockSpec((Fr.L, bn), lambda i: (0, i))
    with x64():
        y = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((Fr.L, total), jnp.uint32),
            grid=(total // bn,),
            in_specs=[spec, pl.no_block_spec, pl.no_block_spec],
            out_specs=spec,
            input_output_aliases={0: 0},
            compiler_params=plgpu.CompilerParams(num_warps=config.num_warps, num_stages=1),
            interpret=config.interpret,
            debug=config.debug,
            name="Fr_scale_bitrev" if bitrev else "Fr_scale",
        )(x.reshape(Fr.L, total), lo_t, hi_t)
    return y.reshape(shape)


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["twiddles", "inv_twiddles", "n_inv", "coset", "inv_coset"],
                   meta_fields=["log_n"])
@dataclasses.dataclass(frozen=True)
class Domain:
    """Evaluation domain of size 2^log_n.

    twiddles / inv_twiddles: ω^j / ω^(−j) for j < n/2, ``(8, n/2)``;
    n_inv: ``(8,)``; coset / inv_coset: ``PowerTable`` of g^i and g^(−i)·n⁻¹
    for i < n (or None when built without cosets)."""
    log_n: int
    twiddles: jnp.ndarray
    inv_twiddles: jnp.ndarray
    n_inv: jnp.ndarray
    coset: PowerTable | None
    inv_coset: PowerTable | None

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
        co = power_table(GENERATOR, log_n)
        ico = power_table(pow(GENERATOR, -1, Fr.p), log_n, n_inv)
    return Domain(log_n, tw, itw, jnp.asarray(Fr.from_int(n_inv)), co, ico)


RADIX_LOG = 3                      # stages fused per kernel (radix 8)


TWIDDLES = ("derived", "loaded", "first")


@functools.lru_cache(maxsize=None)
def _radix_formula(r: int, inverse: bool, dif: bool = False, twiddles: str = "derived"):
    """Radix-2^r DIT block: r consecutive radix-2 stages on 2^r elements
    x_q (q < 2^r) at stride h, with W = ω_{2^r·h}^j the block's twiddle.
    Stage t pairs (q, q + 2^t) for q with bit t clear, twiddle
    tw(t, e) = ω_{2^(t+1)·h}^(j + e·h) = W^(2^(r−1−t)) · ω_{2^(t+1)}^e with
    e = q mod 2^t, (a, b) <- (a + tw·b, a − tw·b).  For the inverse the
    roots are inverted.  ``dif``: the block's transpose (stages t = r−1 … 0,
    Gentleman–Sande butterflies (a, b) <- (a + b, tw·(a − b)) with the same
    twiddles).  A formula (``ops.elementwise``): (ar, x_0, ..., x_{2^r−1},
    W) -> the 2^r outputs.  ``twiddles``: "derived" from W (r − 1 squarings
    and 2^r − r − 1 products by constants: 6 products per radix-8 block
    beside its 12 butterfly products); "loaded": the last argument is
    instead a function (t, e) -> tw(t, e) that supplies them (loaded from
    the twiddle table by ``_radix_pass``); "first": the pass with h = 1,
    where j = 0 and every twiddle is the constant ω_{2^(t+1)}^e (the last
    argument is ignored), and the butterflies with twiddle 1 skip their
    product (5 products per radix-8 block instead of 12)."""
    if twiddles not in TWIDDLES:
        raise ValueError(f"_radix_formula: twiddles must be one of {TWIDDLES}, got {twiddles!r}")
    p = Fr.p

    def root(order: int) -> int:          # primitive root of unity of this order (or its inverse)
        w = root_of_unity(order.bit_length() - 1)
        return pow(w, -1, p) if inverse else w

    def formula(ar, *args):
        xs, W = list(args[:-1]), args[-1]
        if twiddles == "loaded":
            tw_of = functools.lru_cache(maxsize=None)(W)
        elif twiddles == "first":
            def tw_of(t, e):              # None: the twiddle 1
                return None if e == 0 else ar.const(pow(root(2 << t), e, p), ar.like(xs[0]))
        else:
            pw = [W]                       # pw[i] = W^(2^i)
            for _ in range(r - 1):
                pw.append(ar.sqr(pw[-1]))

            @functools.lru_cache(maxsize=None)
            def tw_of(t, e):
                base = pw[r - 1 - t]
                return base if e == 0 else ar.mul(base, ar.const(pow(root(2 << t), e, p),
                                                                 ar.like(base)))
        times = lambda tw, v: v if tw is None else ar.mul(tw, v)
        for t in (reversed(range(r)) if dif else range(r)):
            half = 1 << t
            for q in range(1 << r):
                if q & half:
                    continue
                tw = tw_of(t, q % half)
                if dif:
                    a, b = xs[q], xs[q + half]
                    xs[q], xs[q + half] = ar.add(a, b), times(tw, ar.sub(a, b))
                else:
                    u = times(tw, xs[q + half])
                    xs[q], xs[q + half] = ar.add(xs[q], u), ar.sub(xs[q], u)
        return tuple(xs)

    return formula


def _kernel_name(kind: str, g: int, inverse: bool, dif: bool) -> str:
    return f"Fr_ntt_{kind}{g}{'_inv' if inverse else ''}{'_dif' if dif else ''}"


@functools.lru_cache(maxsize=None)
def _radix_kernel(r: int, inverse: bool, dif: bool = False, twiddles: str = "derived"):
    """``_radix_formula`` as an elementwise kernel over 2^r + 1 arrays
    (with ``twiddles`` "first" the last one, W, is not read)."""
    n = 1 << r
    return elementwise(_radix_formula(r, inverse, dif, twiddles), [(8,)] * (n + 1),
                       [((8,), jnp.uint32)] * n, Fr.arith, Fr.config,
                       name=_kernel_name("radix" if twiddles == "derived" else f"radix_{twiddles}",
                                         n, inverse, dif))


def _pass_blocks(m: int, h: int, lanes: int) -> tuple[int, int]:
    """Block sizes (bm, bh) of an in-place pass over ``(8, m, 2^r, h)``: bh
    along the twiddle axis (contiguous memory) up to ``lanes``, bm groups
    so that bm·bh ≈ lanes; both powers of two dividing m and h."""
    bh = min(h, lanes)
    bm = min(max(lanes // bh, 1), m & -m)           # m & -m: the largest power of two dividing m
    return bm, bh


def _radix_pass(x4, tw, r: int, n: int, inverse: bool, config: KernelConfig, dif: bool = False,
                loaded: bool = False):
    """One group of r radix-2 stages in place: x4 ``(8, m, 2^r, h)`` (limb,
    group, the 2^r inputs of one butterfly block, position j < h), tw the
    domain's twiddle table ω_n^k (k < n/2; ω_n^(−k) when ``inverse``) ``(8,
    n/2)`` -> x4 with every (group, j) block transformed by
    ``_radix_formula``.  ONE Pallas kernel reads the 2^r strided inputs
    straight from the array and writes them back in place
    (``input_output_aliases``), each program a ``(bm, bh)`` tile of
    (group, j) lanes (``_pass_blocks``); no slices or stacks around it.
    The block's twiddles are derived from W_j = ω_n^(j·n/(2^r·h)) (a
    strided slice of tw, ``(8, h)``) or, with ``loaded``, each tw(t, e) =
    tw[(j + e·h)·n/(2^(t+1)·h)] loaded for the tile's positions, once per
    program (2^r − 1 loads of bh elements instead of 6 products per radix-8
    block: 12 products instead of 18; bench/NOTES.md hypothesis 54).  The
    pass with h = 1 takes its twiddles as constants (``_radix_formula``'s
    "first": 5 products per radix-8 block)."""
    _, m, g, h = x4.shape
    bm, bh = _pass_blocks(m, h, config.bn)
    formula = _radix_formula(r, inverse, dif, "first" if h == 1 else
                             "loaded" if loaded else "derived")
    arith = kernel_arith(Fr.arith, config)
    row = lambda v: jnp.broadcast_to(v[None, :], (bm, bh))

    def kernel(x_ref, tw_ref, o_ref):
        if loaded:
            j = pl.program_id(1) * bh + lax.iota(jnp.int32, bh)

            def twiddles(t, e):
                idx = (j + e * h) * (n // ((2 << t) * h))
                return [row(plgpu.load(tw_ref.at[limb, idx])) for limb in range(Fr.L)]
        else:
            twiddles = [row(tw_ref[limb, :]) for limb in range(Fr.L)]
        xs = [[x_ref[limb, :, q, :] for limb in range(Fr.L)] for q in range(g)]
        xs[0][0] = cap_registers(xs[0][0], config)
        outs = formula(arith, *xs, twiddles)
        for q, o in enumerate(outs):
            for limb in range(Fr.L):
                o_ref[limb, :, q, :] = jnp.broadcast_to(o[limb].astype(jnp.uint32), (bm, bh))

    block = pl.BlockSpec((Fr.L, bm, g, bh), lambda i, j: (0, i, 0, j))
    tw_spec = pl.no_block_spec if loaded else pl.BlockSpec((Fr.L, bh), lambda i, j: (0, j))
    with x64():
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x4.shape, jnp.uint32),
            grid=(m // bm, h // bh),
            in_specs=[block, tw_spec],
            out_specs=block,
            input_output_aliases={0: 0},
            compiler_params=plgpu.CompilerParams(num_warps=config.num_warps, num_stages=1),
            interpret=config.interpret,
            debug=config.debug,
            name=_kernel_name("passtw" if loaded else "pass", g, inverse, dif),
        )(x4, tw if loaded else _twiddles(tw, n, g, h))


def _bit_reverse(i, k: int):
    r = jnp.zeros_like(i)
    for s in range(k):
        r = r | (((i >> s) & 1) << (k - 1 - s))
    return r


def _check(x, dom: Domain, name: str, cosets: bool = False):
    """x is Fr elements over the domain; with ``cosets`` the domain has its
    coset tables (``domain`` builds both or neither)."""
    if x.ndim < 2 or x.shape[0] != Fr.L:
        raise ValueError(f"{name}: expected Fr elements (8, *batch, n), got shape {x.shape}")
    if x.shape[-1] != dom.n:
        raise ValueError(f"{name}: last axis has {x.shape[-1]} elements, the domain has {dom.n}")
    if cosets and (dom.coset is None or dom.inv_coset is None):
        raise ValueError(f"{name}: the domain was built with cosets=False")


def _groups(log_n: int):
    """(r, h) of each group of stages: r = ``RADIX_LOG`` stages (the last
    group fewer) starting at stage s, h = 2^(s−1)."""
    s = 1
    while s <= log_n:
        r = min(RADIX_LOG, log_n - s + 1)
        yield r, 1 << (s - 1)
        s += r


def _transform(x, tw, log_n: int, inverse: bool, passes: str = "inplace", order: str = "nn"):
    """Radix-2^r Cooley–Tukey over the last axis with twiddles tw[k] = ω_n^k
    (k < n/2; ω_n^(−k) when ``inverse``), without the 1/n.

    ``order``: "nn" natural in and out (one bit reversal, ``_bit_reverse_last``,
    then the DIT passes); "rn" bit-reversed in, natural out (the DIT passes alone); "nr"
    natural in, bit-reversed out (the DIF passes: the transpose of "rn" —
    the DFT matrix F is symmetric, F = L·P with L the DIT passes and P the
    bit reversal, so P·F = Lᵀ: the groups in reverse order, each block
    transposed, ``_radix_formula(dif=True)``; no gather).

    The k stages run in groups of r = ``RADIX_LOG`` (the last group
    smaller): a group starting at stage s views the array as
    ``(*lead, n/(2^r·h), 2^r, h)`` with h = 2^(s−1); the 2^r slices along
    the third axis are the inputs of one radix-2^r block
    (``_radix_formula``) together with the twiddle W_j = ω_n^(j·n/(2^r·h)),
    j < h.  ``passes``: "parts" — the slices are cut out as arrays, one
    elementwise kernel (``_radix_kernel``) maps them and its outputs are
    stacked back (XLA copies around every kernel); "inplace" — on CUDA one
    Pallas kernel per group reads and writes the strided slices where they
    lie (``_radix_pass``; the tests run it in interpret mode), elsewhere
    "parts"; "loaded" — "inplace" with every twiddle of a block loaded from
    ``tw`` instead of derived from W (``_radix_pass(loaded=True)``).  ⌈k/r⌉
    passes over the array in every form."""
    if passes not in PASS_FORMS:
        raise ValueError(f"ntt: passes must be one of {PASS_FORMS}, got {passes!r}")
    if order not in ("nn", "rn", "nr"):
        raise ValueError(f"ntt: order must be 'nn', 'rn' or 'nr', got {order!r}")
    if log_n == 0:
        return x
    if order == "nn":
        x = _bit_reverse_last(x, log_n)
    dif = order == "nr"
    if passes == "parts" or pl is None:
        return _parts(x, tw, log_n, inverse, dif)
    return by_platform(x, tw, default=lambda x, tw: _parts(x, tw, log_n, inverse, dif),
                       cuda=lambda x, tw: _inplace(x, tw, log_n, inverse, _pass_config(), dif,
                                                   loaded=passes == "loaded"))


def _pass_config() -> KernelConfig:
    """Fr's kernel config with the in-place passes' own block (``PASS_BLOCK``)."""
    return dataclasses.replace(Fr.config, bn=PASS_BLOCK[0], num_warps=PASS_BLOCK[1])


def _bit_reverse_last(x, log_n: int):
    """x with its last axis (2^log_n) in bit-reversed order: in ``BIT_REVERSE``'s
    form on CUDA ("tiled": ``_tiled_bit_reverse``), else one gather."""
    if BIT_REVERSE not in BIT_REVERSE_FORMS:
        raise ValueError(f"ops.ntt.BIT_REVERSE must be one of {BIT_REVERSE_FORMS}, "
                         f"got {BIT_REVERSE!r}")
    gather = lambda x: _gather_bit_reverse(x, log_n)
    if BIT_REVERSE == "gather" or pl is None or log_n < 2 * TILE_LOG:
        return gather(x)
    return by_platform(x, default=gather,
                       cuda=lambda x: _tiled_bit_reverse(x, log_n, TILE_LOG, Fr.config))


def _gather_bit_reverse(x, log_n: int):
    """``_bit_reverse_last`` as one XLA gather (at 2^27 on an H100 ~38 ms: each
    4-byte read its own sector, bench/NOTES.md session 37)."""
    idx = jnp.arange(1 << log_n, dtype=jnp.int32)
    return jnp.take(x, _bit_reverse(idx, log_n), axis=-1)


def _tiled_bit_reverse(x, log_n: int, t: int, config: KernelConfig):
    """``_bit_reverse_last`` by tiles (bench/NOTES.md hypothesis 72): with the
    index i = (a, b, c), a and c of t bits, rev(i) = (rev c, rev b, rev a).
    For each b the 2^t × 2^t tile x[a, b, c] (rows of 2^t contiguous
    elements) goes to the tile y[·, rev b, ·] transposed with both axes
    bit-reversed — which is the reversal of all 2t index bits, i.e. the
    tile reshaped to 2t axes of 2 and those axes reversed, inside the
    program.  One Pallas program per (row, b): reads and writes whole
    2^t-element runs instead of one element per access.  x ``(8, *batch,
    2^log_n)``, log_n ≥ 2t."""
    shape = x.shape
    rows = math.prod(shape[:-1])
    m = log_n - 2 * t
    T = 1 << t
    x4 = x.reshape(rows, T, 1 << m, T)
    flip = tuple(range(2 * t - 1, -1, -1))

    def kernel(x_ref, o_ref):
        v = x_ref[0, :, 0, :]                                         # (T, T): [a, c]
        o_ref[0, :, 0, :] = v.reshape((2,) * (2 * t)).transpose(flip).reshape(T, T)

    block = (1, T, 1, T)
    y = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x4.shape, x.dtype),
        grid=(rows, 1 << m),
        in_specs=[pl.BlockSpec(block, lambda r, b: (r, 0, b, 0))],
        out_specs=pl.BlockSpec(block, lambda r, b: (r, 0, _bit_reverse(b, m), 0)),
        compiler_params=plgpu.CompilerParams(num_warps=config.num_warps, num_stages=1),
        interpret=config.interpret,
        name="bit_reverse_tiled",
    )(x4)
    return y.reshape(shape)


# the bit reversal's form on CUDA (``_bit_reverse_last``): "tiled" (hypothesis 72; session 37
# on an H100: 2^27 38.1 -> 3.25 ms, 2^24 4.26 -> 0.40 ms; the natural-order NTT 2^24 11.62 ->
# 7.68 ms, 2^27 101.3 -> 66.3 ms), "gather" the XLA gather; tiles of 2^TILE_LOG × 2^TILE_LOG
BIT_REVERSE = "tiled"
BIT_REVERSE_FORMS = ("gather", "tiled")
TILE_LOG = 5


def _twiddles(tw, n: int, g: int, h: int):
    return tw[:, ::n // (g * h)][:, :h]                      # ω_n^(j·n/(2^r·h)), j < h


def _ordered_groups(log_n: int, dif: bool):
    groups = list(_groups(log_n))
    return groups[::-1] if dif else groups


def _parts(x, tw, log_n: int, inverse: bool, dif: bool = False):
    """The groups with slices cut out and stacked back (``_transform``)."""
    n = 1 << log_n
    lead = x.shape[:-1]
    for r, h in _ordered_groups(log_n, dif):
        g = 1 << r
        xb = x.reshape(lead + (n // (g * h), g, h))
        parts = [xb[..., q, :].reshape(lead + (n // g,)) for q in range(g)]
        if h == 1:                  # twiddles constant (``_radix_formula``'s "first"): W unread
            outs = _radix_kernel(r, inverse, dif, "first")(*parts, tw[:, :1])
        else:
            w = _twiddles(tw, n, g, h)
            w = jnp.broadcast_to(w.reshape((8,) + (1,) * (len(lead) - 1) + (1, h)),
                                 (8,) + lead[1:] + (n // (g * h), h)).reshape(lead + (n // g,))
            outs = _radix_kernel(r, inverse, dif)(*parts, w)
        x = jnp.stack([o.reshape(lead + (n // (g * h), h)) for o in outs], axis=-2).reshape(lead + (n,))
    return x


def _inplace(x, tw, log_n: int, inverse: bool, config: KernelConfig, dif: bool = False,
             loaded: bool = False):
    """The groups as in-place Pallas passes (``_radix_pass``, its twiddles
    ``loaded`` or derived); the leading axes fold into the group axis (a
    group never straddles two vectors)."""
    n = 1 << log_n
    shape = x.shape
    total = math.prod(shape[1:])
    if config.max_registers is None:
        config = dataclasses.replace(config, max_registers=PASS_MAX_REGISTERS)
    for r, h in _ordered_groups(log_n, dif):
        g = 1 << r
        x4 = x.reshape(Fr.L, total // (g * h), g, h)
        x = _radix_pass(x4, tw, r, n, inverse, config, dif, loaded)
    return x.reshape(shape)


# the in-place passes' register cap where their config names none (``KernelConfig.max_registers``;
# 255, ptxas's own limit, is no cap): 12 warps per SM instead of 8 at 184-209 registers, 80-144
# spilled bytes (bench/NOTES.md hypothesis 64; session 33 on an H100: NTT 2^24 12.52 -> 11.85 ms;
# 200: 12.76, 128: 13.16)
PASS_MAX_REGISTERS = 168

# (lanes, warps) per program of the in-place passes where they run with Fr's own kernel
# config: 32 lanes in one warp (bench/NOTES.md hypothesis 71; on an H100, 128:4 against
# 32:1 at 2^24 12.11 -> 11.74 ms in session 35 and 11.88 -> 11.62 ms in session 37, at 2^27
# 103.4 -> 101.3 ms; 64:2 11.78, 256:8 13.52)
PASS_BLOCK = (32, 1)

# the transforms' passes (``_transform``) on CUDA: in place with the twiddles loaded from the
# domain's table (bench/NOTES.md hypotheses 31 and 54; session 30 on the H200: 2^24 13.84 ->
# 11.97 ms, 2^27 122.3 -> 104.8 ms); every transform takes ``passes=`` to choose
PASSES = "loaded"
PASS_FORMS = ("parts", "inplace", "loaded")
_jit = functools.partial(jax.jit, static_argnames=("passes",))


@_jit
def ntt(x, dom: Domain, passes: str = PASSES):
    """Forward NTT along the last axis (natural order in and out)."""
    _check(x, dom, "ntt")
    return _transform(x, dom.twiddles, dom.log_n, False, passes)


@_jit
def intt(X, dom: Domain, passes: str = PASSES):
    """Inverse NTT along the last axis."""
    _check(X, dom, "intt")
    return Fr.mul(_transform(X, dom.inv_twiddles, dom.log_n, True, passes), dom.n_inv)


@_jit
def coset_ntt(x, dom: Domain, passes: str = PASSES):
    """Evaluations on the coset g·⟨ω⟩: ntt(g^i · x_i)."""
    _check(x, dom, "coset_ntt", cosets=True)
    return _transform(scale_by_powers(x, dom.coset), dom.twiddles, dom.log_n, False, passes)


@_jit
def coset_intt(X, dom: Domain, passes: str = PASSES):
    """Inverse of coset_ntt: g^(−i) · intt(X)_i."""
    _check(X, dom, "coset_intt", cosets=True)
    return scale_by_powers(_transform(X, dom.inv_twiddles, dom.log_n, True, passes), dom.inv_coset)


# Bit-reversed orders (bench/NOTES.md hypothesis 34): Groth16's h never needs natural-order
# coefficients in between, so its transforms pair a DIF (natural in, bit-reversed out) with
# a DIT (bit-reversed in, natural out) and skip the bit-reversal gathers.

@jax.jit
def bit_reverse(x):
    """x ``(8, *batch, n)`` with its last axis (n = 2^k) in bit-reversed
    order: y_i = x_rev(i) (an involution; ``_bit_reverse_last``)."""
    n = x.shape[-1]
    if n & (n - 1):
        raise ValueError(f"bit_reverse: the last axis must be a power of two, got {n}")
    return _bit_reverse_last(x, n.bit_length() - 1)


@_jit
def intt_to_bitrev(X, dom: Domain, passes: str = PASSES):
    """bit_reverse(intt(X)): natural evaluations in, coefficients out in
    bit-reversed order (DIF passes; no gather)."""
    _check(X, dom, "intt_to_bitrev")
    return Fr.mul(_transform(X, dom.inv_twiddles, dom.log_n, True, passes, "nr"), dom.n_inv)


@_jit
def coset_ntt_from_bitrev(x, dom: Domain, passes: str = PASSES):
    """coset_ntt(bit_reverse(x)): coefficients in bit-reversed order in
    (x_k the coefficient of X^rev(k), scaled by g^rev(k)), evaluations on
    the coset g·⟨ω⟩ out in natural order (DIT passes; no gather)."""
    _check(x, dom, "coset_ntt_from_bitrev", cosets=True)
    x = scale_by_powers(x, dom.coset, bitrev=True)
    return _transform(x, dom.twiddles, dom.log_n, False, passes, "rn")


@_jit
def to_coset(X, dom: Domain, passes: str = PASSES):
    """coset_ntt(intt(X)): natural evaluations on ⟨ω⟩ in, natural
    evaluations on the coset g·⟨ω⟩ out — Groth16's unit of h.  The DIF
    inverse without its n⁻¹ (bit-reversed coefficients times n), one
    scaling by n⁻¹·g^rev(k) (n⁻¹ folded into the coset table's short hi
    factor: one product per element and one pass over memory fewer than
    ``coset_ntt_from_bitrev(intt_to_bitrev(X))``), then the DIT passes; no
    gather."""
    _check(X, dom, "to_coset", cosets=True)
    t = _transform(X, dom.inv_twiddles, dom.log_n, True, passes, "nr")
    lo, hi = dom.coset
    t = scale_by_powers(t, PowerTable(lo, Fr.mul(hi, dom.n_inv)), bitrev=True)
    return _transform(t, dom.twiddles, dom.log_n, False, passes, "rn")


@_jit
def coset_intt_to_bitrev(X, dom: Domain, passes: str = PASSES):
    """bit_reverse(coset_intt(X)): natural evaluations on the coset in,
    coefficients out in bit-reversed order (DIF passes, then g^(−rev(k))·n⁻¹;
    no gather)."""
    _check(X, dom, "coset_intt_to_bitrev", cosets=True)
    t = _transform(X, dom.inv_twiddles, dom.log_n, True, passes, "nr")
    return scale_by_powers(t, dom.inv_coset, bitrev=True)


def naive_ntt(xs: list[int], omega: int) -> list[int]:
    """O(n²) reference evaluation Σ_i x_i ω^(ij) with Python ints (tests)."""
    p, n = Fr.p, len(xs)
    return [sum(x * pow(omega, i * j, p) for i, x in enumerate(xs)) % p for j in range(n)]
