"""Groth16 over BLS12-381 with bellperson's conventions (DESIGN.md §5).

For an R1CS with rows i < n_rows (constraints, then one row per public input),
variables j (ONE, public inputs, aux) and a domain of m = 2^k ≥ n_rows points
ω^i, the QAP polynomials are u_j(ω^i) = A[i][j], v_j(ω^i) = B[i][j],
w_j(ω^i) = C[i][j] (zero on padding rows), Z(X) = X^m − 1.

setup (toxic waste τ, α, β, γ, δ from a CSPRNG):
    A_j = u_j(τ)·G1, B1_j = v_j(τ)·G1, B2_j = v_j(τ)·G2,
    L_j = (β·u_j(τ) + α·v_j(τ) + w_j(τ))/δ · G1   (aux j),
    IC_j = (β·u_j(τ) + α·v_j(τ) + w_j(τ))/γ · G1  (inputs j, verifying key),
    H_i = τ^i·Z(τ)/δ · G1                          (i < m − 1),
with the u, v, w values from the Lagrange basis at τ:
ℓ_i(τ) = (τ^m − 1)/m · ω^i/(τ − ω^i), u(τ) = Aᵀ·ℓ etc.

prove (blinding r, s from a CSPRNG, per instance):
    a, b, c = A·w, B·w, C·w                        (jaxprove.pce, SpMV)
    h = coset_intt((coset_ntt(intt a)·coset_ntt(intt b) − coset_ntt(intt c)) / (g^m − 1))
        (ops.ntt's bit-reversed-order forms: one bit-reversal gather, not seven)
    A = α + Σ w_j A_j + r·δ            (G1)
    B = β + Σ w_j B2_j + s·δ           (G2), B1 likewise in G1
    C = Σ_aux w_j L_j + Σ_i h_i H_i + s·A + r·B1 − r·s·δ   (G1)

verify: e(A, B) = e(α, β)·e(IC(x), γ)·e(C, δ), IC(x) = Σ_j x_j IC_j with
x_0 = 1, checked as one multi-Miller loop and one final exponentiation of
e(A, B)·e(−α, β)·e(−IC, γ)·e(−C, δ).

Points in keys and proofs are affine device arrays (``ops.curve`` layouts,
the identity as (0, 0)); a batch of proofs has a leading batch shape after
the coordinate prefix.  The whole setup runs on the device; the host only
lists each matrix entry's row (``ops.spmtv``).
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import math
import random
import secrets
import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.profiler import TraceAnnotation as span   # named host spans in a profile
import numpy as np

from jaxprove import memory, pce, store
from jaxprove.modes import domain_log
from ops import aot, encoding
from ops import four_step as FS
from ops import msm as M
from ops import ntt as N
from ops import pairing as PA
from ops.platform import placed_like
from ops import spmtv, transfer
from ops.curve import G1, G2
from ops.field import Fq, Fr
from ops.fq12 import Fq12

R = Fr.p
log = logging.getLogger(__name__)


class ProvingKey(NamedTuple):
    alpha_g1: jnp.ndarray      # (2, 12)
    beta_g1: jnp.ndarray       # (2, 12)
    beta_g2: jnp.ndarray       # (2, 2, 12)
    delta_g1: jnp.ndarray      # (2, 12)
    delta_g2: jnp.ndarray      # (2, 2, 12)
    a: jnp.ndarray             # (2, 12, n_vars)
    b_g1: jnp.ndarray          # (2, 12, n_vars)
    b_g2: jnp.ndarray          # (2, 2, 12, n_vars)
    l: jnp.ndarray             # (2, 12, num_aux)
    h: jnp.ndarray             # (2, 12, m - 1)


class VerifyingKey(NamedTuple):
    alpha_g1: jnp.ndarray      # (2, 12)
    beta_g2: jnp.ndarray       # (2, 2, 12)
    gamma_g2: jnp.ndarray      # (2, 2, 12)
    delta_g2: jnp.ndarray      # (2, 2, 12)
    ic: jnp.ndarray            # (2, 12, num_inputs)


class Proof(NamedTuple):
    a: jnp.ndarray             # (2, 12, *batch)
    b: jnp.ndarray             # (2, 2, 12, *batch)
    c: jnp.ndarray             # (2, 12, *batch)


def _rng(seed):
    """The CSPRNG (default), or a seeded generator for tests and golden proofs."""
    return secrets.SystemRandom() if seed is None else random.Random(seed)


def _nonzero(rng) -> int:
    return rng.randrange(1, R)


def out_of_core_host_bytes(rows: int, batch: int = 1, device_h: bool = False) -> int:
    """Host bytes an out-of-core proof of ``batch`` instances of a ``rows``-row
    circuit allocates (``_h_out_of_core``): a, b, c of the domain size, h
    written over a, counted as four vectors (the fetches' planes in flight,
    the SpMV's pinned block results); with ``device_h`` (``_h_on_device``: a,
    b and h on the device) c and one vector of staging, two."""
    return (2 if device_h else 4) * 32 * batch << domain_log(rows)


# ------------------------------------------------------------------ setup
def lagrange_at(tau: int, log_m: int, rows: int) -> jnp.ndarray:
    """ℓ_i(τ) = (τ^m − 1)/m · ω^i/(τ − ω^i) for i < rows over the domain of
    size m = 2^log_m, as Fr ``(8, rows)`` on the device (one batch inversion)."""
    m = 1 << log_m
    zt = (pow(tau, m, R) - 1) % R
    if zt == 0:
        raise ValueError("τ lies in the evaluation domain; draw again")
    pts = N._powers(N.root_of_unity(log_m), rows)
    inv = Fr.batch_inv(Fr.sub(Fr.constant(tau, (rows,)), pts))
    return Fr.mul(Fr.mul(pts, inv), Fr.constant(zt * pow(m, -1, R) % R, (rows,)))


def qap_at(r1cs, tau: int, log_m: int):
    """(u(τ), v(τ), w(τ)): for every variable j, Σ_i M[i][j]·ℓ_i(τ) for M =
    A, B, C, each Fr ``(8, n_vars)`` on the device (``ops.spmtv``: the
    entries sorted by column and summed there; planning the transposed
    matrices on the host took 200 s at 10^8 rows, bench/NOTES.md)."""
    n_vars = r1cs.num_inputs + r1cs.num_aux
    rows = r1cs.num_constraints + r1cs.num_inputs
    ell = lagrange_at(tau, log_m, rows)                                    # (8, rows)
    coeffs = list(r1cs.coeffs)
    table = jnp.asarray(Fr.from_int(coeffs) if coeffs else np.zeros((Fr.L, 0), np.uint32))
    return tuple(spmtv.spmtv(m.indptr, m.cols, m.coeff_ids, table, ell, n_vars)
                 for m in (r1cs.a, r1cs.b, r1cs.c))


@functools.partial(aot.program, static_argnums=(0, 2))
def _fixed_base_chunk(curve, s, window: int):
    return curve.to_affine(curve.fixed_base_mul(curve.generator_affine(), s, window=window))


def fixed_base_points(curve, s, chunk: int | None = None, host: bool = False,
                      size: int | None = None):
    """Affine s_i·G for Fr scalars ``(8, n)`` on the device, in chunks of a
    fixed size (one compiled program, 2^20 points on a GPU by default),
    each written into the output as it is made, so the peak is the output
    plus one chunk (``host``: the output is a numpy array in host memory
    and the device holds one chunk).  8-bit windows on a GPU, 4-bit on the
    CPU, where building the table dominates.  Returns ``(2, *fp, size)``
    (``size`` ≥ n, default n; the words past n are zero, as
    ``ops.msm.split_bases`` pads)."""
    window = 8 if jax.default_backend() == "gpu" else 4
    n = s.shape[-1]
    size = n if size is None else size
    if size < n:
        raise ValueError(f"fixed_base_points: size {size} < {n} scalars")
    chunk = chunk or default_chunk(n)
    shape = curve.aff + (size,)
    out = np.zeros(shape, np.uint32) if host else jnp.zeros(shape, jnp.uint32)
    for lo in range(0, n, chunk):
        k = min(chunk, n - lo)
        sc = s[:, lo:lo + k]
        if k < chunk:                                   # the last chunk: same program, padded
            sc = jnp.pad(sc, ((0, 0), (0, chunk - k)))
        pts = _fixed_base_chunk(curve, sc, window)
        if k < chunk:
            pts = pts[..., :k]
        if host:
            out[..., lo:lo + k] = np.asarray(pts)
        else:
            out = _write_at(out, pts, lo)
    return out


def _split_points(points, curve, s, pos: M.Positions, extra: int | None,
                  dense_size: int | None) -> M.SplitBases:
    """``ops.msm.split_bases`` of the points s_i·G (``points``: a
    ``fixed_base_points``), built split: the scalars are gathered by ``pos``
    on the device (``extra``·G appended to the dense part: δ), so the
    unsplit vector never exists (at 2^27 variables the unsplit key and its
    split copy do not fit the H200 host's memory together).  Equal word for
    word to ``streaming_key``'s split of the unsplit points."""
    n = s.shape[-1]
    bits, dense = np.asarray(pos.bits), np.asarray(pos.dense)
    ds = s if M.covers_all(pos, n) else jnp.take(s, jnp.asarray(dense), axis=-1)
    if extra is not None:
        ds = jnp.concatenate([ds, jnp.asarray(Fr.from_int([extra]))], axis=-1)
        n += 1
    dense_pts = points(curve, ds, size=max(ds.shape[-1], dense_size or 0))
    if not len(bits):
        bit_pts = (np.zeros if isinstance(dense_pts, np.ndarray) else jnp.zeros)(
            curve.aff + (0,), np.uint32)
    else:
        bit_pts = points(curve, jnp.take(s, jnp.asarray(bits), axis=-1),
                         size=M._pow2(len(bits)))
    return M.SplitBases(bit_pts, dense_pts, n)


def default_chunk(n: int) -> int:
    """Points per fixed-base chunk for vectors of up to n points: 2^20 on a
    GPU whatever n (one compiled program for every circuit, so the
    persistent compilation cache serves every later setup; padding a small
    vector costs milliseconds there), on the CPU 2^12 or the next power of
    two of n if smaller (the CPU's cost is the points, not the compile)."""
    if jax.default_backend() == "gpu":
        return 1 << 20
    return min(1 << 12, 1 << max(n - 1, 0).bit_length())


@functools.partial(aot.program, donate_argnums=(0,))
def _write_at(out, x, lo):
    """out[..., lo:lo + len(x)] = x, in place (out is donated)."""
    return lax.dynamic_update_slice_in_dim(out, x, lo, axis=out.ndim - 1)


def points_at_nonzero(points, curve, s, host: bool = False):
    """``points(curve, s)`` (``fixed_base_points`` with its settings bound;
    ``host``: it returns numpy arrays in host memory) computed only where the
    scalar is not 0: the other points are the identity, (0, 0), as the
    multiplication gives them (a query's variables absent from its matrix: B
    leaves out ~75% of a PoRep circuit's).  The same array, for the share of
    the work."""
    n = s.shape[-1]
    nz = np.flatnonzero(np.asarray(jnp.any(s != 0, axis=0)))
    if len(nz) == n:
        return points(curve, s)
    shape = curve.aff + (n,)
    if not len(nz):
        return np.zeros(shape, np.uint32) if host else jnp.zeros(shape, jnp.uint32)
    pts = points(curve, s[:, jnp.asarray(nz)])
    if host:
        out = np.zeros(shape, np.uint32)
        out[..., nz] = pts
        return out
    return jnp.zeros(shape, jnp.uint32).at[..., jnp.asarray(nz)].set(pts)


def setup(r1cs, seed: int | None = None, progress=None, chunk: int | None = None,
          host: bool = False, positions: MSMPositions | None = None):
    """Proving and verifying keys for an ``R1CS`` (``circuits.cs``).

    Toxic waste from the CSPRNG unless ``seed`` is given (tests only: a
    seeded setup is insecure).  The QAP evaluation at τ (``qap_at``) and all
    point multiplications (``fixed_base_points``, ``chunk`` points at a time)
    run on the device, each query written into its own array chunk by
    chunk (device peak: the key plus the QAP values and one chunk; with
    ``host`` the proving key's queries are numpy arrays in host memory and
    the device holds only the QAP values and one chunk — the key for a
    card smaller than the key, proved in streaming mode).  With the
    circuit's ``positions`` (``msm_positions``) the key comes out as
    ``streaming_key`` would split it, built split, so the unsplit vectors
    never exist (a 32GiB PoRep partition's key is 70 GiB: unsplit and split
    together exceed the H200 host's 125 GiB).  ``progress(stage, seconds)`` is called after each stage.  Returns
    (ProvingKey, VerifyingKey)."""
    rng = _rng(seed)
    t0 = time.perf_counter()
    report = progress or (lambda stage, s: log.info("setup: %s (%.2f s)", stage, s))
    n_vars, n_in = r1cs.num_inputs + r1cs.num_aux, r1cs.num_inputs
    rows = r1cs.num_constraints + r1cs.num_inputs
    log_m = domain_log(rows)
    m = 1 << log_m
    while True:
        tau = _nonzero(rng)
        if pow(tau, m, R) != 1:
            break
    alpha, beta, gamma, delta = (_nonzero(rng) for _ in range(4))
    u, v, w = jax.block_until_ready(qap_at(r1cs, tau, log_m))
    report("qap", time.perf_counter() - t0)
    comb = Fr.add(Fr.add(Fr.mul(u, Fr.constant(beta, (n_vars,))),
                         Fr.mul(v, Fr.constant(alpha, (n_vars,)))), w)
    ic = Fr.mul(comb[:, :n_in], Fr.constant(pow(gamma, -1, R), (n_in,)))
    lq = Fr.mul(comb[:, n_in:], Fr.constant(pow(delta, -1, R), (n_vars - n_in,)))
    zt_d = (pow(tau, m, R) - 1) * pow(delta, -1, R) % R
    hq = Fr.mul(N._powers(tau, m - 1), Fr.constant(zt_d, (m - 1,)))
    chunk = chunk or default_chunk(max(n_vars, m - 1))    # one size: one program per curve
    consts = fixed_base_points(G1, jnp.asarray(Fr.from_int([alpha, beta, delta])), chunk)
    points = functools.partial(fixed_base_points, chunk=chunk, host=host)
    if positions is None:   # B's points only where v ≠ 0 (B's density: ~25% of a PoRep's)
        a, b_g1, l_q = points(G1, u), points_at_nonzero(points, G1, v, host), \
            points(G1, lq)
    else:             # only the points of each query's positions: B's density is ~25%
        sizes = _streaming_sizes(positions, m - 1)
        a = _split_points(points, G1, u, positions.a, delta, sizes[0])
        b_g1 = _split_points(points, G1, v, positions.b, delta, sizes[1])
        l_q = _split_points(points, G1, lq, positions.l, None, sizes[2])
    h_q = points(G1, hq)
    ic_pts = fixed_base_points(G1, ic, chunk)
    jax.block_until_ready((a, b_g1, l_q, h_q, ic_pts))
    report("g1 points", time.perf_counter() - t0)
    consts2 = fixed_base_points(G2, jnp.asarray(Fr.from_int([beta, gamma, delta])), chunk)
    b_g2 = points_at_nonzero(points, G2, v, host) if positions is None else \
        _split_points(points, G2, v, positions.b, delta, None)
    jax.block_until_ready(b_g2)
    report("g2 points", time.perf_counter() - t0)
    pk = ProvingKey(alpha_g1=consts[..., 0], beta_g1=consts[..., 1], beta_g2=consts2[..., 0],
                    delta_g1=consts[..., 2], delta_g2=consts2[..., 2],
                    a=a, b_g1=b_g1, b_g2=b_g2, l=l_q, h=h_q)
    vk = VerifyingKey(alpha_g1=pk.alpha_g1, beta_g2=pk.beta_g2, gamma_g2=consts2[..., 1],
                      delta_g2=pk.delta_g2, ic=ic_pts)
    return pk, vk


# ------------------------------------------------------------------ prove
def _h_coefficients(a, b, c, dom: N.Domain):
    """The m − 1 coefficients of h = (a·b − c)/Z over the coset (bellperson),
    a, b, c ``(8, *batch, m)`` **donated**: one vector at a time goes to the
    coset, in its own buffer, and the quotient takes ea's, so the device
    holds about five vectors of the domain at once instead of nine (at 2^27
    one is 4 GiB: the difference decides whether a 32GiB partition's proof
    fits beside its resident 70 GiB key)."""
    ea, eb, ec = (_to_coset(x, dom) for x in (a, b, c))
    t = _quotient(ea, eb, ec, dom.n)
    del ea, eb, ec           # eb, ec are not held through the interpolation (8 GiB at 2^27)
    return _coefficients(t, dom)


@functools.partial(aot.program, donate_argnums=(0,))
def _to_coset(x, dom: N.Domain):
    """coset_ntt(intt(x)): the evaluations on the coset gD (x donated),
    through bit-reversed coefficients (``ops.ntt.to_coset``: a DIF inverse,
    then a DIT, no bit-reversal gather, n⁻¹ folded into the coset powers;
    bench/NOTES.md hypotheses 34 and 68)."""
    return N.to_coset(x, dom)


@functools.partial(aot.program, static_argnums=(3,), donate_argnums=(0,))
def _quotient(ea, eb, ec, m: int):
    """(ea·eb − ec)/Z(g·ω^i), Z(gx) = g^m − 1 on the whole coset (in ea's buffer)."""
    return _over_z(ea, eb, ec, m)


@functools.lru_cache(maxsize=None)
def _over_z_kernel():
    """(a·b − c)·z elementwise in ONE kernel: one pass over memory (three
    vectors read, one written) instead of three kernels' eight vector
    transfers (bench/NOTES.md hypothesis 68)."""
    return Fr._ew(lambda ar, a, b, c, z: ar.mul(ar.sub(ar.mul(a, b), c), z), 4, name="over_z")


def _over_z(ea, eb, ec, m: int):
    """(ea·eb − ec)·(g^m − 1)⁻¹, elementwise (any matching shapes)."""
    zinv = Fr.constant(pow((pow(N.GENERATOR, m, R) - 1) % R, -1, R), (1,))
    return _over_z_kernel()(ea, eb, ec, zinv)


@aot.program
def _coefficients(t, dom: N.Domain):
    """The coefficients of t's interpolant over the coset, less the last (h
    has degree ≤ m − 2): a DIF inverse and the one bit-reversal gather of h
    (H's bases are in natural order)."""
    return N.bit_reverse(N.coset_intt_to_bitrev(t, dom))[..., :dom.n - 1]


def _check_vectors(who: str, a, b, c, log_m: int) -> None:
    """ValueError unless host a, b, c are uint32 Fr vectors of one shape (8, *batch, 2^log_m)."""
    for name, x in (("a", a), ("b", b), ("c", c)):
        if FS.check(x, f"{who}: {name}") != log_m or x.shape != a.shape:
            raise ValueError(f"{who}: {name} has shape {x.shape}, expected "
                             f"{a.shape[:-1] + (1 << log_m,)}")


# The stages (``ops.four_step.Stage``) of the out-of-core h's sweeps, shared by
# ``h_coefficients_host`` and ``h_coefficients_resident``: A, the columns' intt
# with its twiddles; B, the rows' intt, then x·g^index and their ntt with its
# twiddles (onto the coset); C is ``_quotient_columns``; D, the rows' intt and
# x·g^(−index) (back from the coset).
SWEEP_A = (FS.Stage(True, twiddle=True),)
SWEEP_B = (FS.Stage(True), FS.Stage(False, pre_coset=True, twiddle=True))
SWEEP_D = (FS.Stage(True, post_coset=True),)


def h_coefficients_host(a: np.ndarray, b: np.ndarray, c: np.ndarray, log_m: int, budget: int,
                        log_n1: int | None = None, *, overwrite: bool = False) -> np.ndarray:
    """``_h_coefficients`` out of core: host a, b, c ``(8, *batch, m)`` (not
    modified, unless ``overwrite``: then they are the sweeps' work buffers
    and h is written over b, so host memory holds three vectors, not
    seven) -> host h ``(8, *batch, m − 1)`` (a view of an m-long buffer), equal bit for bit,
    with at most ``budget`` device bytes per program (``ops.four_step``;
    split m = n1·n2, n1 = 2^log_n1).

    The three transforms are four sweeps, fusing passes that share an axis:
      A  columns, each vector: intt's first pass (natural in);
      B  rows, each vector: intt's second pass (coefficients, transposed
         layout), then coset_ntt's first pass (·g^i, transposed in);
      C  columns, a, b, c together: coset_ntt's second pass (natural
         evaluations on the coset), (ea·eb − ec)/(g^m − 1), coset_intt's
         first pass;
      D  rows: coset_intt's second pass (·g^(−i)), each block written
         transposed, so h comes out natural.
    Host traffic: 18 vector transfers (10 in, 8 out) instead of 32 unfused."""
    _check_vectors("h_coefficients_host", a, b, c, log_m)
    log_n1 = FS.default_log_n1(log_m) if log_n1 is None else log_n1
    n1, n2 = 1 << log_n1, 1 << (log_m - log_n1)
    batch = FS.batch_size(a)
    tabs = FS.tables(log_m)
    dom = {"col": N.domain(log_n1, cosets=False), "row": N.domain(log_m - log_n1, cosets=False)}
    log_len = {"col": log_n1, "row": log_m - log_n1}

    def chunk(axis, vectors):
        return FS.chunk_lines(log_len[axis], vectors, batch, log_m, log_n1, budget)

    def program(axis, out_axis, *stages):
        return functools.partial(FS.stages_program, tabs=tabs, dom=dom[axis], stages=stages,
                                 axis=axis, out_axis=out_axis, log_n=log_m)

    work = _writable(a, b, c) if overwrite else [np.empty_like(x) for x in (a, b, c)]
    views = [FS.matrix(w, n1) for w in work]
    pass_a = program("col", "col", *SWEEP_A)
    pass_b = program("row", "row", *SWEEP_B)
    for x, v in zip((a, b, c), views):
        FS.sweep(pass_a, [(FS.matrix(x, n1), "col")], [(v, "col")], n2, chunk("col", 1))
        FS.sweep(pass_b, [(v, "row")], [(v, "row")], n1, chunk("row", 1))
    pass_c = functools.partial(_quotient_columns, tabs=tabs, dom=dom["col"], log_m=log_m)
    FS.sweep(pass_c, [(v, "col") for v in views], [(views[0], "col")], n2, chunk("col", 3))
    h = work[1] if overwrite else np.empty_like(a)       # b's buffer: read by sweep C only
    pass_d = program("row", "col", *SWEEP_D)
    FS.sweep(pass_d, [(views[0], "row")], [(FS.matrix(h, n2), "col")], n1, chunk("row", 1))
    return h[..., :-1]


def h_coefficients_resident(a: np.ndarray, b: np.ndarray, c: np.ndarray, log_m: int,
                            budget: int, log_n1: int | None = None, *,
                            overwrite: bool = False,
                            check: Callable[[np.ndarray], None] | None = None
                            ) -> jax.Array | np.ndarray:
    """``h_coefficients_host`` with whole vectors on the device (hypothesis 39,
    bench/NOTES.md): host a, b, c ``(8, *batch, m)`` (not modified, unless
    ``overwrite``) -> h ``(8, *batch, m − 1)`` on the device, equal bit for
    bit, holding at most two vectors plus one block program's
    ``ops.four_step.step_bytes`` within ``budget`` (ValueError if that cannot
    hold one line).  With ``overwrite`` a's and b's transforms come back into
    their buffers and h into a's, a limb plane at a time (``fetch_into``; no
    device copy of h): the result is the host view ``a[..., :m − 1]``, and
    host memory holds three vectors, not five.  The transforms come back as
    sweep C's column blocks (``_column_blocks``, as many planes at a time
    as the budget beside the two vectors holds, at least one), so its puts
    read contiguous host memory.

    ``check``: called with the first i where a_i·b_i != c_i per instance (int
    ``batch``, −1 where satisfied; the satisfaction check: a, b, c are the
    circuit's A·w, B·w, C·w, zero on the padding) before any transform, so
    it may raise: a and b are then on the device whole, c's rows stream past
    them in blocks (one vector's traffic, against ``pce.check_host``'s three).

    The same four sweeps as ``h_coefficients_host``, run on the device in
    place (``four_step.resident_step``): a and b go up whole, each into one
    of the two device vectors (checked there against c's rows), through
    sweeps A and B and back; then c goes up into a's vector and through A
    and B; sweep C streams a's and b's column blocks in and writes the
    quotient over c's columns; sweep D writes h transposed into b's vector.
    Both device vectors are allocated first and reused, so no whole vector
    is allocated after the step's temporaries have come and gone (the 32GiB
    16 GB mode's third vector found 4.7 GiB free in two pieces, bench/NOTES.md
    session 39), each as its 8 limb planes (``four_step.put_limbs``), so a
    pool cut up by earlier steps holds them wherever an eighth of a vector
    fits (session 41: even allocated first, a 4 GiB vector found 4.5 GiB
    free in two pieces).
    Host traffic: 7 vector transfers (5 in, 2 out) and with ``check`` an
    eighth (c's rows), all whole vectors but sweep C's column blocks,
    against ``h_coefficients_host``'s 18; without ``overwrite`` h is left
    on the device, where its MSM needs it."""
    _check_vectors("h_coefficients_resident", a, b, c, log_m)
    log_n1 = FS.default_log_n1(log_m) if log_n1 is None else log_n1
    n1, n2 = 1 << log_n1, 1 << (log_m - log_n1)
    dom = _line_domains(log_m, log_n1)
    chunks = resident_chunks(a, log_m, budget, log_n1)
    tabs = FS.tables(log_m)

    def put(x, pool, into):
        with span("h_resident.put"):
            return FS.put_limbs(FS.matrix(x, n1), pool, out=into)  # whole, a limb plane at a time

    def sweeps_a_b(v):
        return _sweeps_a_b(v, chunks, tabs, dom, log_m, log_n1)

    k_c = chunks["quotient"]                     # sweep C's columns per block
    in_flight = max(1, (budget - 2 * a.nbytes) // (a.nbytes // a.shape[0]))

    def back(v, x, pool):   # host (8, *batch, n2/k_c, n1, k_c): x's buffer, or a new one
        out = (x if overwrite else np.empty_like(x)).reshape(
            x.shape[:-1] + (n2 // k_c, n1, k_c))
        with span("h_resident.fetch"):                 # (v is reused)
            return fetch_into(out, v, pool, in_flight, lambda p: _column_blocks(p, k_c))

    def first_bad(u, v, pool):   # a in u, b in v; c's row blocks put past them
        k, rows = chunks["check"], FS.matrix(c, n1)

        def block(q0):
            return FS.put_block(rows[..., q0:q0 + k, :], pool)
        return _first_bad(u, v, block, n1, n2, k, a.shape[1:-1])

    if overwrite:
        _writable(a, b)
    with transfer.copy_pool() as pool:
        plane = FS.matrix(a, n1).shape[1:]       # the two vectors, first
        u, v = (tuple(jnp.zeros(plane, a.dtype) for _ in range(a.shape[0])) for _ in range(2))
        u, v = put(a, pool, u), put(b, pool, v)
        if check is not None:
            check(first_bad(u, v, pool))
        u = sweeps_a_b(u)
        ea = back(u, a, pool)                    # a's transform home; its vector takes c
        v = sweeps_a_b(v)
        eb = back(v, b, pool)                    # b's vector: sweep D's output
        t = sweeps_a_b(put(c, pool, u))
        for q0 in range(0, n2, k_c):
            with span("h_resident.quotient_put"):     # contiguous: (8, *batch, n1, k_c)
                blocks = [FS.put_block(e[..., q0 // k_c, :, :], pool) for e in (ea, eb)]
            with span("h_resident.quotient"):
                t = _quotient_resident(t, *blocks, jnp.uint32(q0), tabs, dom["col"],
                                       log_m=log_m, chunk=k_c)
        del ea, eb, u
        h = _sweep_d(t, v, chunks, tabs, dom, log_m, log_n1)   # b's values go
        del t, v
        if overwrite:                        # h's flat order is a's: its first m − 1
            with span("h_resident.fetch"):
                return fetch_into(FS.matrix(a, n1), h, pool).reshape(a.shape)[..., :-1]
    return _joined_head(h, a.shape)


def h_coefficients_device(a: tuple, b: tuple, c, log_m: int, budget: int,
                          log_n1: int | None = None, *,
                          check: Callable[[np.ndarray], None] | None = None) -> jax.Array:
    """``h_coefficients_resident`` with three whole vectors on the device
    (hypothesis 83, bench/NOTES.md): a and b already there as limb planes
    (8 arrays ``(*batch, n1, n2)`` each, the matrix views' planes, as
    ``pce.evaluate_host(on_device=(0, 1), plane_shape=(n1, n2))`` leaves
    them; consumed: their buffers are donated to the sweeps), c in host
    memory ``(8, *batch, m)`` -> h ``(8, *batch, m − 1)`` on the device,
    equal bit for bit.  Holds three vectors plus one block program's
    ``ops.four_step.step_bytes`` within ``budget`` (ValueError where one
    line does not fit beside them).

    c (numpy, or ``pce.HeldRows``: its blocks' results as fetched, written
    into the planes by ``pce.held_planes``, hypothesis 94) goes up whole
    into the third vector (one vector of host traffic, the only one); ``check`` (as ``h_coefficients_resident``'s) runs over the
    three vectors on the device; sweeps A and B transform each vector in
    place, sweep C reads a's and b's column blocks where they are and writes
    the quotient over c's columns, sweep D writes h transposed into a's
    vector, and h is joined from its planes (once b's and c's vectors are
    gone: two vectors at that point)."""
    log_n1 = FS.default_log_n1(log_m) if log_n1 is None else log_n1
    n1, n2 = 1 << log_n1, 1 << (log_m - log_n1)
    _check_vectors("h_coefficients_device", c, c, c, log_m)
    plane = c.shape[1:-1] + (n1, n2)
    for name, x in (("a", a), ("b", b)):
        if len(x) != c.shape[0] or any(p.shape != plane or p.dtype != c.dtype for p in x):
            raise ValueError(f"h_coefficients_device: {name} must be {c.shape[0]} limb planes "
                             f"{c.dtype}{list(plane)}, got "
                             f"{[(str(p.dtype), list(p.shape)) for p in x][:1]}...")
    dom = _line_domains(log_m, log_n1)
    chunks = resident_chunks(c, log_m, budget, log_n1, held=3)
    tabs = FS.tables(log_m)
    with transfer.copy_pool() as pool:
        with span("h_resident.put"):
            t = pce.held_planes(c, (n1, n2), pool) if isinstance(c, pce.HeldRows) else \
                FS.put_limbs(FS.matrix(c, n1), pool)
        if check is not None:
            k = chunks["check"]
            check(_first_bad(a, b, lambda q0: t, n1, n2, k, c.shape[1:-1]))
    a, b, t = (_sweeps_a_b(x, chunks, tabs, dom, log_m, log_n1) for x in (a, b, t))
    k_c = chunks["quotient"]
    with span("h_resident.quotient"):
        for q0 in range(0, n2, k_c):
            t = _quotient_resident(t, a, b, jnp.uint32(q0), tabs, dom["col"], log_m=log_m,
                                   chunk=k_c)
    del b
    h = _sweep_d(t, a, chunks, tabs, dom, log_m, log_n1)
    del t, a
    return _joined_head(h, c.shape)


def _line_domains(log_m: int, log_n1: int) -> dict:
    """The short domains of the four-step sweeps' lines: "col" (length n1),
    "row" (length n2)."""
    return {ax: N.domain(k, cosets=False) for ax, k in (("col", log_n1), ("row", log_m - log_n1))}


def _sweeps_a_b(v, chunks, tabs, dom, log_m: int, log_n1: int):
    """Sweeps A and B of the resident h over the device vector held as limb
    planes v (the matrix view's, donated: in place)."""
    with span("h_resident.sweeps"):
        for axis, stages, log_len in (("col", SWEEP_A, log_n1), ("row", SWEEP_B, log_m - log_n1)):
            k = chunks[axis]
            for q0 in range(0, 1 << (log_m - log_len), k):
                v = FS.resident_step(v, jnp.uint32(q0), tabs, dom[axis], stages=stages,
                                     axis=axis, log_n=log_m, chunk=k)
    return v


def _sweep_d(t, out, chunks, tabs, dom, log_m: int, log_n1: int):
    """Sweep D of the resident h: the rows of t (sweep C's quotient) through
    the coset intt's second pass, written transposed into ``out`` (limb
    planes of the same size, donated; every element written): h, natural."""
    k = chunks["row"]
    with span("h_resident.rows_to_cols"):
        for q0 in range(0, 1 << log_n1, k):
            out = FS.resident_rows_to_cols(t, out, jnp.uint32(q0), tabs, dom["row"],
                                           stages=SWEEP_D, log_n=log_m, chunk=k)
    return out


def _first_bad(a, b, block, n1: int, n2: int, k: int, batch: tuple) -> np.ndarray:
    """The satisfaction check of the device vectors held as limb planes a, b
    (the matrix views ``(8, *batch, n1, n2)``) against c, k rows of the view
    at a time: ``block(q0)`` gives c's rows [q0, q0 + k) ``(8, *batch, k,
    n2)``, or c's whole limb planes -> the first failing element per
    instance (int64 ``batch``, −1 where satisfied)."""
    def first_at(q0):
        with span("h_resident.check"):
            return np.asarray(_first_bad_lines(a, b, block(q0), jnp.uint32(q0), k=k))
    return pce.first_over_blocks(n1, k, first_at, batch, unit=n2)


@functools.partial(jax.jit, static_argnames=("k",))
def _first_bad_lines(a, b, c, q0, *, k: int):
    """The satisfaction check of rows [q0, q0 + k) of the matrix views
    ``(8, *batch, n1, n2)`` held as limb planes a, b (device) against c:
    their row block ``(8, *batch, k, n2)``, or c's limb planes: the first
    failing element of the block per instance, flat within it (int32
    ``batch``, −1 where satisfied)."""
    at = q0.astype(jnp.int32)
    abc = [FS.limb_block(x, at, k, x[0].ndim - 2) if isinstance(x, tuple) else x
           for x in (a, b, c)]
    return pce.rows_satisfied(*(x.reshape(x.shape[:-2] + (-1,)) for x in abc))[1]


@functools.partial(jax.jit, static_argnames=("shape",))
def _joined_head(planes, shape):
    """Limb planes -> the vector ``(8, *batch, m)`` of ``shape`` less its last
    element: one program, so beside the planes only its result is allocated."""
    return jnp.stack(planes).reshape(shape)[..., :-1]


def fetch_into(out: np.ndarray, x, pool, in_flight: int = 4,
               prepare: Callable | None = None) -> np.ndarray:
    """out (writable host ``(8, ...)``) = x (on the device: an array of out's
    shape, or its 8 limb planes, a tuple of ``out[i]``'s shape), a limb
    plane per task on ``pool``, ``in_flight`` planes at a time: beyond out,
    host and device hold that many planes' copies (2 GiB at 2^27), not a
    second vector.  ``prepare``: a device program applied to each plane
    before it comes back (its result of ``out[i]``'s shape; one temporary
    plane on the device per plane in flight)."""
    n = out.shape[0]
    prepare = prepare or (lambda p: p)
    for g in range(0, n, in_flight):
        list(pool.map(lambda i: np.copyto(out[i], transfer.fetch(prepare(x[i]))),
                      range(g, min(n, g + in_flight))))
    return out


@functools.partial(jax.jit, static_argnames=("k",))
def _column_blocks(plane, k: int):
    """A plane ``(*batch, n1, n2)`` as its column blocks of k:
    ``(*batch, n2/k, n1, k)``, block q = columns [q·k, (q + 1)·k), so each
    is contiguous in host memory (sweep C's puts; gathered from a strided
    host view they took 2.30 s of the 32GiB h, bench/NOTES.md hypothesis 81)."""
    *batch, n1, n2 = plane.shape
    return jnp.swapaxes(plane.reshape(*batch, n1, n2 // k, k), -3, -2)


def _writable(*xs: np.ndarray) -> list[np.ndarray]:
    """xs, each checked writable (the out-of-core h's ``overwrite``)."""
    for x in xs:
        if not x.flags.writeable:
            raise ValueError("h: overwrite needs writable host vectors, got a read-only one")
    return list(xs)


def resident_chunks(x: np.ndarray, log_m: int, budget: int,
                    log_n1: int | None = None, held: int = 2) -> dict[str, int]:
    """Lines per block of ``h_coefficients_resident``'s sweeps (keys "col",
    "row": one vector; "quotient": sweep C's three; "check": rows of the
    ``(n1, n2)`` view for the satisfaction check) for vectors like x
    ``(8, *batch, m)`` within ``budget`` device bytes, ``held`` whole
    vectors counted first (``h_coefficients_device``: 3); ValueError if the
    budget cannot hold them and one line."""
    log_n1 = FS.default_log_n1(log_m) if log_n1 is None else log_n1
    spare = budget - held * x.nbytes
    if spare <= 0:
        raise ValueError(f"h_coefficients_resident: a device budget of {budget} bytes cannot "
                         f"hold {held} vectors of {x.nbytes} bytes")
    batch = FS.batch_size(x)

    def lines(log_len, vectors):
        return FS.chunk_lines(log_len, vectors, batch, log_m, log_n1, spare)
    n2 = 1 << (log_m - log_n1)       # the check: rows of the (n1, n2) view, ~5 vectors' worth
    check = max(1, min(1 << log_n1, spare // (5 * 32 * batch * n2)))
    return {"col": lines(log_n1, 1), "row": lines(log_m - log_n1, 1),
            "quotient": lines(log_n1, 3), "check": check}


@functools.partial(jax.jit, static_argnames=("log_m", "chunk"), donate_argnums=(0,))
def _quotient_resident(t, ea, eb, q0, tabs, dom, *, log_m, chunk):
    """Sweep C of ``h_coefficients_resident``: columns [q0, q0 + chunk) of the
    device view held as limb planes t (c after sweeps A and B; donated)
    replaced by ``_quotient_columns`` of them and a's and b's: their column
    blocks ea, eb ``(8, *batch, n1, chunk)``, or their whole limb planes
    (``h_coefficients_device``: the blocks cut here)."""
    at, ax = q0.astype(jnp.int32), t[0].ndim - 1
    ea, eb, ec = (FS.limb_block(x, at, chunk, ax) if isinstance(x, tuple) else x
                  for x in (ea, eb, t))
    (q,) = _quotient_columns(q0, ea, eb, ec, tabs, dom, log_m=log_m)
    return FS.limb_update(t, q, at, ax)


@functools.partial(jax.jit, static_argnames=("log_m",))
def _quotient_columns(q0, a, b, c, tabs, dom, *, log_m):
    """Sweep C of ``h_coefficients_host`` on column blocks ``(8, *batch, n1, cols)``."""
    ea, eb, ec = (FS.apply_stage(FS.to_lines(x, "col"), q0, FS.Stage(False), tabs, dom, log_m)
                  for x in (a, b, c))
    t = _over_z(ea, eb, ec, 1 << log_m)
    t = FS.apply_stage(t, q0, FS.Stage(True, twiddle=True), tabs, dom, log_m)
    return (FS.from_lines(t, "col"),)


def _blinding(shape, seed):
    rng = _rng(seed)
    n = int(np.prod(shape)) if shape else 1
    vals = np.array([_nonzero(rng) for _ in range(2 * n)], dtype=object).reshape((2,) + tuple(shape))
    return jnp.asarray(Fr.from_int(vals[0])), jnp.asarray(Fr.from_int(vals[1]))


def _bcast(curve, pt, batch):
    """A single affine point -> projective ``(3, *fp, *batch)``."""
    P = curve.from_affine(pt)
    return jnp.broadcast_to(P.reshape(P.shape + (1,) * len(batch)), P.shape + tuple(batch))


class MSMPositions(NamedTuple):
    """Each MSM's terms (``ops.msm.Positions``): a circuit's boolean
    variables, 0/1 in every satisfying witness, one entry each; the
    variables with no entry in a query's matrix left out (bellperson's
    density: their points u_j(τ)·G, v_j(τ)·G are the identity).  ``a``: A
    over all variables (every input, then ``a_aux_density``); ``b``: B1 and
    B2 over all variables (``b_input_density``, ``b_aux_density``: ~25% of
    a PoRep circuit's); ``l``: L over the aux variables."""
    a: M.Positions
    b: M.Positions
    l: M.Positions


def msm_positions(matrices: pce.Matrices, device: bool = True) -> MSMPositions:
    """The circuit's boolean variables (``matrices.bit_vars``) and densities
    as resident MSM positions, built once per circuit (``prove(...,
    positions=)``); host arrays unless ``device``."""
    bits = np.flatnonzero(np.asarray(matrices.bit_vars))
    k, n = matrices.num_inputs, matrices.num_vars
    a = np.concatenate([np.ones(k, bool), np.asarray(matrices.a_aux_density, bool)])
    b = np.concatenate([np.asarray(matrices.b_input_density, bool),
                        np.asarray(matrices.b_aux_density, bool)])
    return MSMPositions(M.positions(n, bits, device, keep=a),
                        M.positions(n, bits, device, keep=b),
                        M.positions(n - k, bits[bits >= k] - k, device))


def prove(pk: ProvingKey, matrices: pce.Matrices, w, seed: int | None = None,
          msm_config: M.MSMConfig | None = None, domain: N.Domain | None = None,
          positions: MSMPositions | None = None,
          on_stage: Callable[[str], None] | None = None,
          out_of_core_budget: int | None = None, host_plan: pce.HostPlan | None = None,
          learned_budgets: dict | None = None):
    """Proofs for a batch of witnesses w ``(8, *batch, n_vars)`` (Fr, bellperson
    order, w[..., 0] = 1) -> (Proof with batch shape ``batch``, timings dict in
    seconds per stage: spmv, ntt, msm_g1 and msm_g2 (the merged MSMs; with
    host-memory bases or an MSM budget instead msm_a, msm_b_g1, msm_b_g2,
    msm_l, msm_h), combine, total).  Blinding r, s from the CSPRNG unless ``seed``.  A witness
    that does not satisfy the circuit (a∘b ≠ c) is refused with a ValueError
    naming each bad instance's first failing row, before any MSM.

    The witness values of the circuit's boolean variables (``bit_vars``, 0 or
    1 in a satisfying witness) enter the MSMs as one entry each (no
    windows); the MSMs of one curve run as one merged Pippenger pass
    (``prove_msms``).  The blinding terms r·δ (A), s·δ (B) are one more
    term of their MSMs; s·A, r·B1 and −rs·δ are one batched scalar
    multiplication.  ``domain``
    (``ops.ntt.domain`` of the circuit's size) and ``positions``
    (``msm_positions(matrices)``) may be passed to keep them resident between
    proofs.

    ``on_stage(stage)`` is called after each stage has finished on the
    device, and between the chunks of a chunked MSM (streaming mode, or an
    MSM budget: ``on_stage("msm_h")`` with the MSM's stage name while it
    runs): an interruption point (the engine runs a more urgent proof
    there).  The time spent inside it is left out of the stage times and
    of total, and reported as ``paused``.

    ``out_of_core_budget`` (bytes; the "16 GB mode"): a, b, c and h live in
    host memory and every program before the MSMs holds at most about that
    many device bytes beyond w.  ``matrices`` may then be host-resident
    (``pce.to_host``): a, b, c = A·w, B·w, C·w come back row block by row
    block (``pce.evaluate_host``, already padded to m = 2^log_m with zeros),
    a·b = c is checked in row blocks (the same refusal), and h =
    (a·b − c)/Z over the coset comes from four sweeps of the four-step
    NTT: on the device with two whole vectors there where the budget holds
    them (``h_coefficients_resident``), else over host vectors
    (``h_coefficients_host``); ``domain`` is not used.  h (8, *batch,
    m − 1) stays in host memory (its MSM, the last, puts it a chunk at a
    time), and the MSMs run within ``msm_config.budget_bytes``,
    which defaults to the same budget.  A step that runs out of device
    memory (the budgets are estimates) runs again within half its budget
    (``memory.halving``); ``learned_budgets``, a dict the caller keeps per
    circuit and device, remembers the budgets that served, so the next
    proof starts within them.  The proof is bit for bit that of the in-core
    path with the same MSM configuration and seed.
    With a host witness (w a numpy array; the caller fetched it after the
    witness program and dropped its device copy) the 16 GB mode holds no w
    on the device before the MSMs, and the budget counts all of its bytes
    there: a and b are evaluated into the device, c into host memory, h is
    computed on the device with three whole vectors there and left there
    (``h_coefficients_device``; stages spmv, check, ntt; about 25 GB of
    host traffic a 2^27 proof instead of about 50, bench/NOTES.md
    hypothesis 83), H's MSM runs first, then w goes to the device for the
    others (stage witness_put).  Where the budget does not hold the three
    vectors (``device_h_budget``) or they run out of device memory, the
    path above, with w put in pieces for the SpMV.  In core a host w is put
    on the device first.
    ``host_plan`` (``out_of_core_plan`` for one instance, or
    ``pce.host_plan(matrices, batch, out_of_core_budget)``, with a host
    witness ``device_h_plan(matrices, batch, out_of_core_budget)``, built
    once per circuit and batch size,
    like ``domain`` and ``positions``): the SpMV's row blocks prepared in
    pinned host memory; without it each proof cuts them from the matrices
    again.

    Estimated device peak at 2^27 rows, batch 1, bases in host memory (an
    estimate from the byte counts, not measured; 1 vector = 4 GiB): the
    caller's w (1 vector) plus, during the SpMV and the NTT sweeps, at most
    the budget (which counts the SpMV's element-major copy of w, 1 vector);
    during an MSM its scalars gathered at the dense positions (at most 1
    vector; the slice and w ‖ r are views, never built), plus the MSM
    budget.  E.g. out_of_core_budget = 8 GiB and
    msm_config.budget_bytes = 4 GiB: about 12 GiB at the peak; one budget
    of 6 GiB for both: about 14 GiB.  (The NTT's device form needs a budget
    above two vectors, 8 GiB at 2^27; below, h is computed over host vectors.)

    The proof runs where w lives: its programs are traced under w's device
    (``ops.platform.placed_like``), so on a GPU only the kernels' CUDA forms
    are traced (the CPU forms were about half the tracing)."""
    if host_plan is not None and out_of_core_budget is None:
        raise ValueError("prove: host_plan is the out-of-core SpMV's: it needs out_of_core_budget")
    with placed_like(w):
        return _prove(pk, matrices, w, seed, msm_config, domain, positions, on_stage,
                      out_of_core_budget, host_plan, learned_budgets)


def _prove(pk, matrices, w, seed, msm_config, domain, positions, on_stage, out_of_core_budget,
           host_plan, learned):
    pce._check_witness(matrices, w)
    batch = w.shape[1:-1]
    if key_num_vars(pk) != matrices.num_vars:
        raise ValueError(f"prove: key for {key_num_vars(pk)} variables, circuit has {matrices.num_vars}")
    log_m = domain_log(matrices.rows)
    m = 1 << log_m
    if pk.h.shape[-1] != m - 1:
        raise ValueError(f"prove: key's H query has {pk.h.shape[-1]} points, the domain needs {m - 1}")
    if domain is not None and domain.log_n != log_m:
        raise ValueError(f"prove: domain of size 2^{domain.log_n} for a circuit of size 2^{log_m}")
    times = {}
    t0 = t = time.perf_counter()

    paused = held = 0.0          # held: paused inside the running stage (between MSM chunks)

    def lap(name, x):
        nonlocal t, paused, held
        jax.block_until_ready(x)
        now = time.perf_counter()
        times[name] = now - t - held
        t, held = now, 0.0
        if on_stage is not None:
            on_stage(name)
            t = time.perf_counter()
            paused += t - now
        return x

    if out_of_core_budget is None:
        if isinstance(w, np.ndarray):      # a host witness serves the 16 GB mode only
            w = jnp.asarray(w)
        hs = [_h_in_core(matrices, w, log_m, domain, lap)]
    else:
        hs = [_h_out_of_core(matrices, w, log_m, out_of_core_budget, lap, host_plan, learned)]
        if msm_config is None or msm_config.budget_bytes is None:
            msm_config = dataclasses.replace(msm_config or M.default_config(),
                                             budget_bytes=out_of_core_budget)
    r, s = _blinding(batch, seed)

    def between_chunks(stage):
        nonlocal paused, held
        start = time.perf_counter()
        on_stage(stage)
        d = time.perf_counter() - start
        paused, held = paused + d, held + d

    # h handed over (hs.pop()): prove_msms then holds its only reference and frees it
    # after its MSM (a device h and a host w: the 16 GB mode's MSMs hold one vector, not two)
    proof = prove_msms(pk, w, hs.pop(), matrices.num_inputs,
                       positions or msm_positions(matrices), r, s, msm_config, lap,
                       between_chunks if on_stage is not None else None, learned)
    times["total"] = time.perf_counter() - t0 - paused
    if paused:
        times["paused"] = paused
    return proof, times


def _refuse_unsatisfied(matrices: pce.Matrices, first):
    """ValueError naming each bad instance's first failing row (first: −1 where
    satisfied), if any."""
    bad = [(i, int(r)) for i, r in enumerate(np.asarray(first).reshape(-1)) if r >= 0]
    if bad:
        raise ValueError(f"prove: the witness does not satisfy circuit {matrices.name!r}: "
                         f"(instance, first failing row) = {bad[:8]}")


def _h_in_core(matrices: pce.Matrices, w, log_m: int, domain: N.Domain | None, lap):
    """h (8, *batch, m − 1) on the device: a, b, c on the device, checked,
    padded to m, then ``_h_coefficients`` (stages spmv, ntt)."""
    a, b, c = lap("spmv", pce.evaluate(matrices, w))
    _refuse_unsatisfied(matrices, pce.satisfied(a, b, c)[1])
    pad = [(0, 0)] * (a.ndim - 1) + [(0, (1 << log_m) - matrices.rows)]
    a = jnp.pad(a, pad)      # one at a time: four vectors live, not six
    b = jnp.pad(b, pad)
    c = jnp.pad(c, pad)
    h = lap("ntt", _h_coefficients(a, b, c, domain or N.domain(log_m)))
    del a, b, c              # not held through the MSMs: 3 vectors of the domain size
    return h


DEVICE_H = "prove: the h on the device"    # ``learned``'s entry: 0 once it ran out of memory


DEVICE_H_PLANES = (0, 1)   # _h_on_device: a and b evaluated into the device, c into host memory


def device_h_budget(rows: int, batch: int, budget: int) -> int | None:
    """The smallest SpMV budget of ``_h_on_device`` (``pce.spmv_budgets``:
    B's, beside a's and b's device vectors) for a circuit of ``rows`` rows
    and ``batch`` instances, or None where ``budget`` cannot hold its three
    vectors and a line.  Its ``host_plan``: ``device_h_plan``."""
    log_m = domain_log(rows)
    like = np.empty((Fr.L, batch, 1 << log_m), np.uint32)
    try:
        resident_chunks(like, log_m, budget, held=3)
    except ValueError:
        return None
    sb = min(pce.spmv_budgets(batch, budget, 1 << log_m, DEVICE_H_PLANES))
    return sb if sb > 0 else None


def device_h_plan(matrices: pce.Matrices, batch: int, budget: int, dev=None,
                  **kw) -> pce.HostPlan:
    """``pce.host_plan`` of ``_h_on_device``'s SpMV within ``budget`` (a and b
    into the device, of the domain's length; ``kw``: ``host_plan``'s)."""
    return pce.host_plan(matrices, batch, budget, dev, on_device=DEVICE_H_PLANES,
                         length=1 << domain_log(matrices.rows), **kw)


def out_of_core_plan(matrices: pce.Matrices, budget: int, dev=None, *,
                     host_witness: bool = False) -> pce.HostPlan:
    """The 16 GB mode's SpMV row blocks for one instance (``pce.host_plan``,
    prepared where the host has room beside ``out_of_core_host_bytes`` of
    the path planned),
    built once per circuit and passed to every ``prove`` as ``host_plan``.
    With ``host_witness`` they are planned for the device h
    (``device_h_plan``: a's and b's results on the device), where the
    budget holds it (``device_h_budget``); else, and as the fallback, for
    the two-vector h (all results in host memory).  ValueError where not
    even ``budget`` holds a matrix's smallest block."""
    sb = device_h_budget(matrices.rows, 1, budget) if host_witness else None
    if sb is not None:
        try:
            return device_h_plan(matrices, 1, budget, dev, prepared=None,
                                 working=out_of_core_host_bytes(matrices.rows, device_h=True))
        except ValueError as e:
            log.info("the device h's row blocks do not fit beside its vectors (%s): the "
                     "proofs take the two-vector h", e)
    return pce.host_plan(matrices, 1, budget, dev, prepared=None,
                         working=out_of_core_host_bytes(matrices.rows))


def _device_h_plan(matrices: pce.Matrices, batch: int, budget: int, host_plan=None):
    """The SpMV's ``pce.HostPlan`` for ``_h_on_device`` within ``budget``:
    ``host_plan`` where it is one (``device_h_plan`` for this batch and
    budget), else one cut per call; None where the budget holds no such
    plan (its two vectors, the element-major witness and the smallest row
    blocks) or not the three vectors."""
    if device_h_budget(matrices.rows, batch, budget) is None:
        return None
    if host_plan is not None and (host_plan.batch, host_plan.budget, host_plan.on_device) == (
            batch, budget, DEVICE_H_PLANES):
        return host_plan
    try:
        return device_h_plan(matrices, batch, budget, prepared=False)
    except ValueError:
        return None


def host_plan_for(host_plan, budget: int):
    """``host_plan`` where it was built for the SpMV's ``budget`` with every
    result in host memory, else None (``pce.evaluate_host`` then cuts its
    blocks per call)."""
    return host_plan if host_plan is not None and host_plan.budget == budget \
        and not host_plan.on_device else None


def _h_on_device(matrices: pce.Matrices, w: np.ndarray, log_m: int, budget: int, lap,
                 plan: pce.HostPlan):
    """h (8, *batch, m − 1) on the device from a host witness (hypothesis 83,
    bench/NOTES.md), within ``budget`` device bytes (all of them: w is not
    there): a and b evaluated into device limb planes, c into host memory
    (``pce.evaluate_host(on_device=(0, 1), held=(2,))``: c's blocks kept as
    fetched, hypothesis 94; stage spmv), then
    ``h_coefficients_device`` (the check inside it: stage check; stage
    ntt; ``plan``: ``_device_h_plan``'s).  Host traffic: w's pieces, the
    matrices' blocks, c out and in."""
    m = 1 << log_m
    n1 = 1 << FS.default_log_n1(log_m)
    a, b, c = lap("spmv", pce.evaluate_host(matrices, w, budget, length=m, plan=plan,
                                            on_device=DEVICE_H_PLANES, held=(2,),
                                            plane_shape=(n1, m // n1)))

    def checked(first):
        _refuse_unsatisfied(matrices, lap("check", first))
    return lap("ntt", h_coefficients_device(a, b, c, log_m, budget, check=checked))


def _h_out_of_core(matrices: pce.Matrices, w, log_m: int, budget: int, lap, host_plan=None,
                   learned=None):
    """h (8, *batch, m − 1) computed out of core within ``budget``.

    With a host witness w (numpy) and a budget that holds three vectors
    and the SpMV's blocks beside two (``_device_h_plan``): ``_h_on_device``, h left on the device; where
    that runs out of device memory, once (``learned[DEVICE_H]`` = 0 then:
    later proofs go straight on), the path below, within the same budget
    (w is not on the device).

    Otherwise h in host memory, computed out of core within
    ``budget`` device bytes per program: host a, b, c (8, *batch, m) from
    ``pce.evaluate_host`` (``host_plan``, if given; stage spmv), checked
    (stage check: on the device inside the resident h, a and b there whole
    and c's rows streamed past them; else ``pce.check_host``'s row blocks),
    then, over a's, b's and c's buffers (``overwrite``: three vectors in host
    memory, where the 32GiB partition's 16 GB mode ran out of host memory
    with five, bench/NOTES.md session 25), ``h_coefficients_resident``
    where the budget holds two vectors and a line's program (h fetched back
    into a's buffer, so the other MSMs see the device as before), else
    ``h_coefficients_host`` (h in b's buffer; stages spmv, ntt).
    Each step that runs out of device memory runs again within half its
    budget (``memory.halving``: the budgets are estimates): the SpMV then
    cuts its row blocks per call instead of ``host_plan``'s; h starts over
    from a new SpMV at the budget that served (its failed try overwrote a
    and b; the ntt stage's time then includes that SpMV).  ``learned``:
    ``memory.halving``'s, for every one of these steps."""
    plan = None
    if isinstance(w, np.ndarray) and (learned is None or learned.get(DEVICE_H) != 0):
        plan = _device_h_plan(matrices, math.prod(w.shape[1:-1]), budget, host_plan)
    if plan is not None:
        try:
            return _h_on_device(matrices, w, log_m, budget, lap, plan)
        except jax.errors.JaxRuntimeError as e:
            if not memory.out_of_memory(e):
                raise
            log.warning("prove: the h on the device ran out of device memory within %d bytes; "
                        "h out of core instead", budget)
            if learned is not None:
                learned[DEVICE_H] = 0

    def spmv(b):
        return pce.evaluate_host(matrices, w, b, length=1 << log_m, check=False,
                                 plan=host_plan_for(host_plan, b), learned=learned)

    served = []                     # the SpMV's budget that served

    def evaluated(what):
        def run(b):
            served[:] = [b]
            return spmv(b)
        return memory.halving(run, served[0] if served else budget, what, learned=learned)

    abc = [lap("spmv", evaluated("prove: the out-of-core SpMV"))]

    def checked(first):
        _refuse_unsatisfied(matrices, lap("check", first))

    def h(b):
        a, bb, c = abc.pop() if abc else evaluated("prove: the out-of-core SpMV, again")
        try:
            resident_chunks(a, log_m, b)
        except ValueError:
            checked(pce.check_host(a, bb, c, matrices.rows, b, learned))
            return h_coefficients_host(a, bb, c, log_m, b, overwrite=True)
        return h_coefficients_resident(a, bb, c, log_m, b, overwrite=True, check=checked)

    return lap("ntt", memory.halving(h, budget, "prove: the out-of-core h", learned=learned))


def prove_msms(pk: ProvingKey, w, h, num_inputs: int, positions: MSMPositions, r, s,
               msm_config: M.MSMConfig | None = None, lap=lambda name, x: x,
               between_chunks: Callable[[str], None] | None = None,
               learned: dict | None = None) -> Proof:
    """The MSMs and the combination of a proof, shared by every H convention
    (ours, snarkjs's): witness w ``(8, *batch, n_vars)`` (on the device, or a
    host array: put there after H's MSM, stage witness_put), h coefficients
    ``(8, *batch, len(pk.h))`` (freed after its MSM, the per-MSM path's
    first, where this call holds the only reference), blinding r, s
    ``(8, *batch)``.
    ``positions``: where the variables are 0/1 in every satisfying witness
    (``msm_positions``; one entry each instead of a digit per window).
    ``lap(stage, x)`` is called on each stage's result (timing),
    ``between_chunks(stage)`` between the chunks of the per-MSM path's MSMs.

    With the bases on the device and a merged working set within the
    memory budget (``msm_config.budget_bytes``, or 80% of the device's free
    memory where JAX reports it), the four G1 MSMs (A + r·δ, B1 + s·δ, L, H)
    are ONE merged Pippenger pass (``ops.msm.msm_many``, stage ``msm_g1``)
    and B2 + s·δ₂ another (``msm_g2``): their fixed costs (sort, partial
    sums, bucket reduction) are paid once per curve.  Otherwise (bases in
    host memory, a key built split, or too large) each MSM runs alone in
    chunks within that budget (``ops.msm.msm_split``; stages msm_a,
    msm_b_g1, msm_b_g2, msm_l, msm_h): for bases on the device 80% of its
    free memory unless given, for host bases none unless given.  An MSM of
    the per-MSM path that runs out of device memory is run again within
    half its budget (at most ``MSM_RETRIES`` times, with a logged warning;
    ``learned``: ``memory.halving``'s, by stage)."""
    batch = w.shape[1:-1]
    vectors = (pk.a, pk.b_g1, pk.b_g2, pk.l, pk.h)
    host = any(isinstance(x.dense if isinstance(x, M.SplitBases) else x, np.ndarray)
               for x in vectors)
    split = any(isinstance(x, M.SplitBases) for x in vectors)
    fixed = tuple(jnp.asarray(x) for x in (pk.alpha_g1, pk.beta_g1, pk.beta_g2, pk.delta_g1))
    budget = msm_config.budget_bytes if msm_config is not None else None
    if budget is None and not host:       # bases on the device: within its free memory
        budget = _free_device_bytes(w)
    if budget is not None and (msm_config is None or msm_config.budget_bytes is None):
        msm_config = dataclasses.replace(msm_config or M.default_config(), budget_bytes=budget)

    def one(k):                                        # (8, *batch) -> (8, *batch, 1)
        return k[..., None]

    if not (host or split) and isinstance(w, np.ndarray):
        w = jnp.asarray(w)                 # the merged path reads w on the device
    if not (host or split) and (budget is None or
                                merged_msm_bytes(pk.a.shape[-1], pk.l.shape[-1],
                                                 pk.h.shape[-1], math.prod(batch), positions,
                                                 msm_config) <= budget):
        d1, d2 = jnp.asarray(pk.delta_g1)[..., None], jnp.asarray(pk.delta_g2)[..., None]
        g1 = lap("msm_g1", M.msm_many(G1, [
            M.Part(pk.a, w, 0, positions.a), M.Part(d1, one(r), 0),
            M.Part(pk.b_g1, w, 1, positions.b), M.Part(d1, one(s), 1),
            M.Part(pk.l, w[..., num_inputs:], 2, positions.l),
            M.Part(pk.h, h, 3)], msm_config))
        g2 = lap("msm_g2", M.msm_many(G2, [M.Part(pk.b_g2, w, 0, positions.b),
                                            M.Part(d2, one(s), 0)], msm_config))
        ax = len(G1.proj)
        msm_a, msm_b1, msm_l, msm_h = (jnp.take(g1, o, axis=ax) for o in range(4))
        msm_b2 = jnp.take(g2, 0, axis=len(G2.proj))
        return lap("combine", _combine(fixed, msm_a, msm_b1, msm_b2, msm_l, msm_h, r, s))

    # the per-MSM path: A, B1, B2, L split by the positions (done once by streaming_key for a
    # resident streaming key, here otherwise), δ the last dense base of A and B
    if not isinstance(pk.a, M.SplitBases):
        pk = streaming_key(pk, positions)
    pos_a, pos_b = (_with_delta(p, key_num_vars(pk), jnp) for p in positions[:2])

    def hook(stage):
        return None if between_chunks is None else (lambda: between_chunks(stage))

    def retried(stage, run):
        # the working sets are estimates (session 11: a sort buffer 25% above its share):
        # on running out of device memory the MSM is run again within half the budget
        cfg = msm_config
        if cfg is None or cfg.budget_bytes is None:
            return jax.block_until_ready(run(cfg))
        return memory.halving(lambda b: run(dataclasses.replace(cfg, budget_bytes=b)),
                              cfg.budget_bytes, f"prove: {stage}", MSM_RETRIES, learned)

    def split(stage, curve, bases, scalars, positions, offset=0, tail=None):
        return lap(stage, retried(stage, lambda cfg: M.msm_split(
            curve, bases, scalars, positions, cfg, on_chunk=hook(stage), offset=offset,
            tail=tail)))

    def dense(cfg):
        # H as it is: no split, no padding of its m − 1 bases (a whole copy of the vector on
        # every proof: 12.9 GB at 2^27, seconds in host memory; the chunks pad the last one)
        return M.msm(G1, pk.h, h, dataclasses.replace(cfg or M.default_config(),
                                                      split_threshold=None), hook("msm_h"))

    # H first, so that h (on the device after the 16 GB mode's h_coefficients_device) is
    # freed before w comes to the device (a host w: hypothesis 83, bench/NOTES.md)
    msm_h = lap("msm_h", retried("msm_h", dense))
    del h, dense
    if isinstance(w, np.ndarray):          # a PinnedView by one DMA (hypothesis 91)
        with span("prove.put_witness"), transfer.copy_pool() as pool:
            whole = transfer.held(w)
            w = lap("witness_put", transfer.put_planes(w, pool) if whole is None else
                    transfer.put_held(whole))
    # over w ‖ r, w ‖ s (δ's scalar last) and w's aux part, all read in place: no copy of w
    msm_a = split("msm_a", G1, pk.a, w, pos_a, tail=one(r))
    msm_b1 = split("msm_b_g1", G1, pk.b_g1, w, pos_b, tail=one(s))
    msm_b2 = split("msm_b_g2", G2, pk.b_g2, w, pos_b, tail=one(s))
    msm_l = split("msm_l", G1, pk.l, w, positions.l, offset=num_inputs)
    return lap("combine", _combine(fixed, msm_a, msm_b1, msm_b2, msm_l, msm_h, r, s))


MSM_RETRIES = memory.RETRIES     # halvings of the MSM budget after running out of device memory


def _with_delta(pos: M.Positions, n: int, xp=np) -> M.Positions:
    """``pos`` with position n (δ, the last base of A's and B's dense parts)
    appended to its dense positions."""
    at = xp.full((1,), n, np.int32)
    return M.Positions(xp.concatenate([xp.asarray(pos.dense, np.int32), at]),
                       xp.asarray(pos.bits))


def _streaming_sizes(positions: MSMPositions, n_h: int) -> list:
    """The Pippenger sizes of the per-MSM path's dense parts: A (+ δ),
    B1 (+ δ), L, and H's ``n_h`` points; those within a factor of 4 of the
    largest are padded to it, so they share one compiled program (None: its
    own size)."""
    sizes = [positions.a.dense.shape[0] + 1, positions.b.dense.shape[0] + 1,
             positions.l.dense.shape[0], n_h]
    top = 1 << (max(sizes) - 1).bit_length()
    return [top if 4 * x >= top or x == 0 else None for x in sizes]


def key_num_vars(pk: ProvingKey) -> int:
    """The circuit's variables a key is for (a streaming key's A holds δ too)."""
    return pk.a.n - 1 if isinstance(pk.a, M.SplitBases) else pk.a.shape[-1]


SPLIT_VECTORS = ("a", "b_g1", "b_g2", "l")


def streaming_key(pk: ProvingKey, positions: MSMPositions,
                  fields: tuple = SPLIT_VECTORS) -> ProvingKey:
    """The proving key for streaming proofs (bases in host memory, MSMs in
    chunks): A, B1, B2 and L split once by the circuit's MSM positions
    (``ops.msm.SplitBases``, δ appended to the dense parts of A and B, each
    part padded to its MSM size), so a proof gathers, appends and pads no
    host bases (at 2^27 variables a host gather of one vector takes about a
    minute).  The vectors stay where they are (host arrays stay on the
    host); H is unchanged.  ``prove`` takes the result as its ``pk``.
    ``fields``: the vectors to split now; splitting one at a time and
    dropping the unsplit key between calls holds the key plus about one
    vector (all at once: the key twice, 140 GiB for a 32GiB partition)."""
    pa, pb, pl = (M.Positions(np.asarray(p.dense), np.asarray(p.bits)) for p in positions)
    bad = [f for f in fields if f not in SPLIT_VECTORS or isinstance(getattr(pk, f), M.SplitBases)]
    if bad:
        raise ValueError(f"streaming_key: {', '.join(bad)} split already or not a split vector")
    n = key_num_vars(pk)
    sizes = _streaming_sizes(positions, pk.h.shape[-1])
    how = {"a": (_with_delta(pa, n), sizes[0], pk.delta_g1),
           "b_g1": (_with_delta(pb, n), sizes[1], pk.delta_g1),
           "b_g2": (_with_delta(pb, n), None, pk.delta_g2), "l": (pl, sizes[2], None)}
    return pk._replace(**{f: M.split_bases(getattr(pk, f), *how[f]) for f in fields})


def _free_device_bytes(x) -> int | None:
    """80% of the free memory of the device holding x, rounded down to a
    power of two (None where JAX does not report memory, e.g. the CPU).
    Rounded, so that the chunk sizes it leads to — compiled programs —
    do not change with every small change of the free memory (a proof paused
    by a more urgent one, another kind's key loaded): otherwise an MSM could
    compile again in the middle of a stream of proofs."""
    try:
        dev = next(iter(x.devices()))
    except Exception:  # noqa: BLE001 - not a placed array
        return None
    st = memory.device_stats(dev)
    if st is None:
        return None
    free = int(0.8 * (st["bytes_limit"] - st.get("bytes_in_use", 0)))
    return 1 << (free.bit_length() - 1) if free > 0 else 0


def merged_msm_bytes(nv: int, nl: int, nh: int, batch: int, positions: MSMPositions,
                     cfg: M.MSMConfig) -> int:
    """The larger working set of the two merged MSM passes (``prove_msms``)
    of a key of ``nv`` variables, ``nl`` L and ``nh`` H points for
    ``batch`` witnesses."""
    a, b, l = ((p.dense.shape[0], p.bits.shape[0]) for p in positions)
    g1 = [(nv, *a), (1, 1, 0), (nv, *b), (1, 1, 0), (nl, *l), (nh, nh, 0)]
    g2 = [(nv, *b), (1, 1, 0)]
    c1 = M.many_window(G1, [d for _, d, _ in g1], 4, cfg, 4 * batch)
    c2 = M.many_window(G2, [d for _, d, _ in g2], 1, cfg, batch)
    return max(M.many_working_set_bytes(G1, g1, batch, 4, c1, cfg),
               M.many_working_set_bytes(G2, g2, batch, 1, c2, cfg))


@aot.program
def _combine(fixed, msm_a, msm_b1, msm_b2, msm_l, msm_h, r, s):
    """A = α + (Σ w A + r·δ), B = β + (Σ w B + s·δ), C = Σ L + Σ H + s·A + r·B1 − rs·δ
    (the r·δ, s·δ terms are inside the MSMs; the three products of C are one
    batched double-and-add)."""
    alpha_g1, beta_g1, beta_g2, delta_g1 = fixed
    batch = r.shape[1:]
    A = G1.add(msm_a, _bcast(G1, alpha_g1, batch))
    B2 = G2.add(msm_b2, _bcast(G2, beta_g2, batch))
    B1 = G1.add(msm_b1, _bcast(G1, beta_g1, batch))
    d1 = _bcast(G1, delta_g1, batch)
    terms = G1.scalar_mul(jnp.stack([A, B1, d1], axis=-1),
                          jnp.stack([s, r, Fr.neg(Fr.mul(r, s))], axis=-1))
    C = G1.add(G1.add(msm_l, msm_h), G1.add(G1.add(terms[..., 0], terms[..., 1]), terms[..., 2]))
    return Proof(G1.to_affine(A), G2.to_affine(B2), G1.to_affine(C))


# ------------------------------------------------------------------ verify
def _neg_affine(A):
    return jnp.stack([A[0], Fq.neg(A[1])])


def _ic_sum(ic, x):
    """IC_0 + Σ_{i≥1} x_i·IC_i for x Fr ``(8, *batch, num_inputs − 1)``: one
    MSM (a per-input loop of scalar multiplications unrolled under jit made
    a program whose CPU compile took ~10 GB at 64 inputs), without the 0/1
    split: its sizes would follow how many public inputs are 0 or 1, so
    each new count compiled new programs (minutes on the CPU, in the middle
    of an engine's stream of proofs)."""
    batch = x.shape[1:-1]
    acc = _bcast(G1, ic[..., 0], batch)
    if ic.shape[-1] > 1:
        cfg = dataclasses.replace(M.default_config(ic), split_threshold=None)
        acc = G1.add(acc, M.msm(G1, ic[..., 1:], x, cfg))
    return G1.to_affine(acc)


def public_inputs_fr(vk: VerifyingKey, public_inputs) -> jnp.ndarray:
    """Public inputs (without ONE) as Fr ``(8, *batch, k)``: from Python ints
    (a list, or nested lists for a batch), or an Fr array."""
    k = vk.ic.shape[-1] - 1
    if isinstance(public_inputs, (jnp.ndarray, np.ndarray)) and public_inputs.dtype == np.uint32:
        x = jnp.asarray(public_inputs)
    else:
        vals = np.array(public_inputs, dtype=object)
        if vals.ndim == 0 or vals.shape[-1] != k:
            raise ValueError(f"verify: {vals.shape[-1] if vals.ndim else 0} public inputs per proof, "
                             f"the key expects {k}")
        x = jnp.asarray(Fr.from_int(vals))
    if x.shape[-1] != k:
        raise ValueError(f"verify: {x.shape[-1]} public inputs per proof, the key expects {k}")
    return x


def verify(vk: VerifyingKey, public_inputs, proof: Proof, device=None):
    """e(A, B) == e(α, β)·e(IC(x), γ)·e(C, δ), per proof of the batch
    (bool array of the batch shape; a Python bool for a single proof).
    ``device``: run there (e.g. ``jax.devices("cpu")[0]``: the pairing
    compiles in ~60 s on a CPU; one proof then takes ~0.17 s on a 2-core
    CPU, ten in one call ~0.36 s); None: where the arrays are (the GPU:
    0.16 s warm on an H200 after a ~70 s compile)."""
    if device is not None:
        vk, proof = jax.device_put((vk, proof), device)
        with jax.default_device(device):
            return verify(vk, public_inputs, proof)
    x = public_inputs_fr(vk, public_inputs)
    ic = _ic_sum(vk.ic, x)
    ok = PA.pairing_product_is_one(
        [proof.a, _neg_affine(vk.alpha_g1), _neg_affine(ic), _neg_affine(proof.c)],
        [proof.b, vk.beta_g2, vk.gamma_g2, vk.delta_g2])
    return bool(ok) if np.ndim(ok) == 0 else ok



def verify_batch(vk: VerifyingKey, public_inputs, proof: Proof, seed: int | None = None) -> bool:
    """All proofs of a batch (shape (k,)) at once, by a random linear
    combination with 128-bit ρ_k from the CSPRNG:
    Π_k e(ρ_k·A_k, B_k) · e(−(Σρ_k)·α, β) · e(−Σρ_k·IC(x_k), γ) · e(−Σρ_k·C_k, δ) = 1
    — k + 3 Miller loops and one final exponentiation instead of 4k pairings.
    False if any proof is invalid (except with probability ≤ 2^−128)."""
    x = public_inputs_fr(vk, public_inputs)
    if proof.a.ndim != 3:
        raise ValueError(f"verify_batch: expects a batch of shape (k,), got A of shape {proof.a.shape}")
    k = proof.a.shape[-1]
    rng = _rng(seed)
    rho = [rng.getrandbits(128) | 1 for _ in range(k)]
    rho_fr = jnp.asarray(Fr.from_int(rho))
    total = jnp.asarray(Fr.from_int([sum(rho) % R]))
    return bool(_verify_batch(vk, x, proof, rho_fr, total))


@aot.program
def _verify_batch(vk, x, proof, rho, total):
    ic = G1.from_affine(_ic_sum(vk.ic, x))                               # (3, 12, k)
    ra = G1.to_affine(G1.scalar_mul(G1.from_affine(proof.a), rho))
    f = PA.multi_miller_loop([ra], [proof.b])                           # (2, 3, 2, 12, k)
    acc = f[..., 0]
    for i in range(1, f.shape[-1]):
        acc = Fq12.mul(acc, f[..., i])

    def weighted_sum(P):
        S = G1.scalar_mul(P, rho)
        out = S[..., 0]
        for i in range(1, S.shape[-1]):
            out = G1.add(out, S[..., i])
        return _neg_affine(G1.to_affine(out[..., None]))[..., 0]

    alpha = _neg_affine(G1.to_affine(G1.scalar_mul(G1.from_affine(vk.alpha_g1)[..., None], total)))
    g = PA.multi_miller_loop([alpha[..., 0], weighted_sum(ic), weighted_sum(G1.from_affine(proof.c))],
                             [vk.beta_g2, vk.gamma_g2, vk.delta_g2])
    e = PA.final_exponentiation(Fq12.mul(acc, g))
    return jnp.all(e == Fq12.ones(()))


# ------------------------------------------------------------------ encoding
PROOF_BYTES = 192


def proof_to_bytes(proof: Proof) -> list[bytes]:
    """Each proof of the batch as 192 bytes: compressed A (48) ‖ B (96) ‖ C (48),
    zcash/bellperson point encoding."""
    a = encoding.encode(G1, proof.a.reshape(2, 12, -1), projective=False)
    b = encoding.encode(G2, proof.b.reshape(2, 2, 12, -1), projective=False)
    c = encoding.encode(G1, proof.c.reshape(2, 12, -1), projective=False)
    return [x + y + z for x, y, z in zip(a, b, c)]


def proof_from_bytes(data: bytes) -> Proof:
    """Concatenated 192-byte proofs -> a Proof with batch shape (k,); points are
    checked on the curve and in the prime-order subgroup (ValueError names the
    bad one)."""
    if len(data) == 0 or len(data) % PROOF_BYTES:
        raise ValueError(f"proof bytes: length {len(data)} is not a positive multiple of {PROOF_BYTES}")
    k = len(data) // PROOF_BYTES
    parts = [data[i * PROOF_BYTES:(i + 1) * PROOF_BYTES] for i in range(k)]
    return Proof(encoding.decode(G1, b"".join(p[:48] for p in parts)),
                 encoding.decode(G2, b"".join(p[48:144] for p in parts)),
                 encoding.decode(G1, b"".join(p[144:] for p in parts)))


# ------------------------------------------------------------------ keys on disk
KEYS_FORMAT, KEYS_VERSION = "jaxprove-groth16-keys", 1
# how a stored split key's vectors were split (``msm_positions``): a key split otherwise
# would pair its bases with the wrong scalars, so it is refused
SPLIT_BY = "density-v2"


def save_keys(pk: ProvingKey, vk: VerifyingKey, directory: str, key: str) -> str:
    """Store both keys under ``directory/key`` (orbax, checksummed, atomic:
    ``jaxprove.store``); returns the entry's path.  Query vectors built split
    (``setup(positions=)``: ``ops.msm.SplitBases``) are stored as their two
    parts, marked ``SPLIT_BY``, host (numpy) vectors as ``.npy`` files."""
    arrays, split = {}, {}
    for k, v in pk._asdict().items():
        if isinstance(v, M.SplitBases):
            arrays[f"pk.{k}.bits"], arrays[f"pk.{k}.dense"] = v.bits, v.dense
            split[k] = int(v.n)
        else:
            arrays[f"pk.{k}"] = v
    arrays.update({f"vk.{k}": v for k, v in vk._asdict().items()})
    return store.save(directory, key, arrays, KEYS_FORMAT, KEYS_VERSION,
                      {"split": split, "split_by": SPLIT_BY})


POINT_VECTORS = ("a", "b_g1", "b_g2", "l", "h")


def load_keys(directory: str, key: str, device=None, host: bool = False):
    """(ProvingKey, VerifyingKey) stored under ``directory/key``, on ``device``;
    ``host``: the proving key's point vectors (``POINT_VECTORS``) as numpy
    arrays in host memory instead, restored through the CPU device where
    there is one, so a key larger than the accelerator never passes through
    it (streaming mode).  None if there is no such entry; ValueError if the
    entry is damaged (other format or version, missing arrays, checksum
    mismatch): keys are never silently replaced."""
    staging = device
    if host:
        try:
            staging = jax.devices("cpu")[0]
        except RuntimeError:          # no CPU backend (JAX_PLATFORMS): through the device
            pass
    try:
        got = store.load(directory, key, KEYS_FORMAT, KEYS_VERSION, staging)
    except (KeyError, OSError) as e:
        raise ValueError(f"keys {key!r} in {directory}: unreadable entry ({e})") from e
    except ValueError as e:
        raise ValueError(f"keys {key!r} in {directory}: {e}") from e
    if got is None:
        return None
    arrays, split = got[0], got[1].get("split", {})
    if split and got[1].get("split_by") != SPLIT_BY:
        raise ValueError(f"keys {key!r} in {directory}: its vectors were split by the MSM "
                         f"positions of an older jaxprove (B over every variable; now B's "
                         f"density, {SPLIT_BY!r}): run the setup again")
    try:
        pk = ProvingKey(**{k: M.SplitBases(arrays[f"pk.{k}.bits"], arrays[f"pk.{k}.dense"],
                                           int(split[k])) if k in split else arrays[f"pk.{k}"]
                           for k in ProvingKey._fields})
        vk = VerifyingKey(**{k: arrays[f"vk.{k}"] for k in VerifyingKey._fields})
    except KeyError as e:
        raise ValueError(f"keys {key!r} in {directory}: missing array {e}") from e
    # keys saved from host memory (numpy) are stored as host arrays: placed like the rest
    return place_keys((pk, vk), device, host)


def _map_arrays(fn, v):
    """fn applied to a key field's arrays: an array, or a ``SplitBases``'s
    two parts (its count n stays a Python int)."""
    if isinstance(v, M.SplitBases):
        return M.SplitBases(fn(v.bits), fn(v.dense), v.n)
    return fn(v)


def pin_key(box: list, device=None, room: int | None = None) -> ProvingKey:
    """The proving key ``box.pop()`` (the caller's only reference: each
    vector's pageable copy is freed as its pinned one is made, so the host
    holds the key plus one vector, never two keys) with every host point
    vector (``POINT_VECTORS``, numpy or ``ops.msm.SplitBases`` of numpy) as
    ``ops.transfer.PinnedVector`` in ``device``'s pinned host memory
    (bench/NOTES.md hypothesis 84: the 16 GB mode's MSMs put their bases
    from pinned memory at the link's rate), in turn while they fit in
    ``room`` bytes (None: no bound; ``memory.pinned_room`` less what a
    proof pins, ``proof_pinned_bytes``: hypothesis 92).  The vectors not
    pinned stay numpy (logged): the MSMs take either; so too where
    pinning runs out of memory.  Where the device has no
    pinned memory (the CPU) the vectors are held in pieces of numpy all
    the same."""
    pk = box.pop()
    dev = device or jax.devices()[0]
    left = room

    def pin(x):
        nonlocal left
        if not isinstance(x, np.ndarray):
            return x
        if left is not None:
            if x.nbytes > left:
                raise _NoRoom(x.nbytes)
            left -= x.nbytes
        return transfer.pin_vector(x, dev)

    for f in POINT_VECTORS:
        v = getattr(pk, f)
        try:
            if isinstance(v, M.SplitBases):
                v = v._replace(bits=pin(v.bits))
                pk = pk._replace(**{f: v})
                v = v._replace(dense=pin(v.dense))
            else:
                v = pin(v)
        except _NoRoom as e:
            log.warning("pin_key: %s's %d bytes leave no room for the pinned memory a proof "
                        "needs (%d bytes were left for the key): it and the rest of the key "
                        "stay in pageable memory", f, e.args[0], room)
            return pk
        except jax.errors.JaxRuntimeError as e:
            if not memory.out_of_memory(e):
                raise
            log.warning("pin_key: pinned host memory ran out at %s (%s): the rest of the key "
                        "stays in pageable memory", f, e)
            return pk
        pk = pk._replace(**{f: v})
        del v
    return pk


class _NoRoom(Exception):
    """A vector that does not fit in ``pin_key``'s room (its bytes)."""


def pinned_bytes(pk: ProvingKey) -> int:
    """Bytes of pk's point vectors held as ``ops.transfer.PinnedVector``
    (``pin_key``'s)."""
    return sum(int(x.nbytes) for f in POINT_VECTORS
               for x in jax.tree.leaves(getattr(pk, f), is_leaf=lambda y: isinstance(
                   y, transfer.PinnedVector)) if isinstance(x, transfer.PinnedVector))


def proof_pinned_bytes(matrices: pce.Matrices | None, host_witness: bool = False,
                       witnesses: int = 1) -> int:
    """Pinned host bytes each 16 GB-mode proof takes beside the pinned key
    and row blocks (bench/NOTES.md hypothesis 92): its host vectors
    (``out_of_core_host_bytes`` of the path ``out_of_core_plan`` tries
    first, fetched into pinned memory) and, with ``host_witness``,
    ``witnesses`` witnesses (32 bytes a variable each: an engine holds the
    next batch's beside the running proof's); 0 for ``matrices`` None
    (streaming: only the key is pinned).  The SpMV's prepared row blocks
    are pinned before the key (``out_of_core_plan``), so the key's room
    counts them as they are (``memory.pinned_in_use``: padded to their
    plans' shapes, ~1.5× the matrices' bytes at 2KiB).
    ``pinned_plan_bytes`` is the whole count from sizes alone."""
    if matrices is None:
        return 0
    return pinned_plan_bytes(0, matrices.rows, matrices.num_vars, 0, host_witness, witnesses)


def pinned_plan_bytes(key_bytes: int, rows: int, num_vars: int, matrices_bytes: int | None,
                      host_witness: bool = False, witnesses: int = 1) -> int:
    """Pinned host bytes a process plans for a ``rows``-row circuit before
    anything exists (``memory.widen_pinned_pool``, before the backend
    starts): ``key_bytes`` of pinned key, ``matrices_bytes`` of prepared
    row blocks (None: streaming, no out-of-core proof) and
    ``proof_pinned_bytes``."""
    if matrices_bytes is None:
        return key_bytes
    return (key_bytes + matrices_bytes + out_of_core_host_bytes(rows, device_h=host_witness)
            + (32 * num_vars * witnesses if host_witness else 0))


def place_keys(keys, device=None, host: bool = False):
    """(pk, vk) on ``device`` (default: the first), or with ``host`` the
    proving key's point vectors (``POINT_VECTORS``) in host memory (numpy
    arrays, or ``ops.transfer.PinnedVector`` as ``pin_key`` left them) and
    the rest on the device (streaming mode)."""
    pk, vk = keys
    dev = device or jax.devices()[0]
    if not host:
        put = functools.partial(jax.device_put, device=dev)
        return ProvingKey(*(_map_arrays(put, v) for v in pk)), jax.device_put(vk, dev)
    def host_array(x):
        return x if isinstance(x, transfer.PinnedVector) else np.asarray(x)

    vectors = {f: _map_arrays(host_array, getattr(pk, f)) for f in POINT_VECTORS}
    small = jax.device_put(pk._replace(**{f: None for f in POINT_VECTORS}), dev)
    return small._replace(**vectors), jax.device_put(vk, dev)
