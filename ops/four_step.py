"""Out-of-core NTTs over Fr: Bailey's four-step split, vectors in host memory.

For n = n1·n2 (powers of two) a length-n vector is viewed as the row-major
matrix x[i1, i2] = x[i1·n2 + i2] (``(8, *batch, n1, n2)``, a free reshape of
the host array ``(8, *batch, n)``).  With ω = ω_n, ω_{n1} = ω^n2, ω_{n2} = ω^n1:

    X[k1 + n1·k2] = Σ_{i2} ω_{n2}^(i2·k2) · ω^(i2·k1) · Σ_{i1} x[i1, i2] ω_{n1}^(i1·k1)

    pass 1 (columns): length-n1 NTTs down each column i2, then the twiddle ω^(i2·k1);
    pass 2 (rows):    length-n2 NTTs along each row k1.

The result Y[k1, k2] = X[k1 + n1·k2] is stored row-major: the *transposed*
layout (index j at position (j mod n1)·n2 + j div n1).  Read backwards,
with input index j = j1 + n1·j2 held at (j1, j2), the same identity
(ω^(n1·n2·j2·k1) = 1) gives a natural output:

    X[k1·n2 + k2] = Σ_{j1} ω_{n1}^(j1·k1) · ω^(j1·k2) · Σ_{j2} x[j1, j2] ω_{n2}^(j2·k2)

    pass 1 (rows): length-n2 NTTs along each row j1, then the twiddle ω^(j1·k2);
    pass 2 (columns): length-n1 NTTs down each column k2.

So a *natural* input runs columns-then-rows and comes out transposed, a
*transposed* input runs rows-then-columns and comes out natural; neither
needs a transpose pass.  The inverse is the same with ω⁻¹ and ``ops.ntt.intt``
for the short transforms (their n1⁻¹·n2⁻¹ is the n⁻¹).  A chain of transforms
alternates layouts for free; where it must end natural after a natural
input (Groth16's h: three transforms), the last row pass writes each block
transposed into the (n2, n1) view of the natural output (a strided host
write of contiguous runs, not a separate pass).

Every pass is a *sweep*: blocks of lines (whole columns or whole rows) go
to the device, each block runs one jitted program, and the results come
back.  On the device a block is held *lines-last*, ``(8, *batch, lines, L)``
(a column block is swapped there), line q (global), position p < L.  One
element's factors, both products of two short power tables (``Tables``,
O(√n) each, so no length-n domain arrays exist anywhere):

    twiddle  ω^(±q·p mod n)      (after the first pass's short transforms)
    coset    g^(±(p·n/L + q))    g = 7: p·n/L + q is the element's index in
                                 the layout it is in (natural for a column,
                                 transposed for a row), so coset_ntt's g^i
                                 multiplies the first pass's input and
                                 coset_intt's g^(−i) the last pass's output.

Device memory: ``step_bytes`` estimates one program's peak from the block
size; ``chunk_lines`` picks the largest power-of-two number of lines per
block that fits a byte budget.  At n = 2^27 (n1 = 2^13, n2 = 2^14, batch 1)
and a 16 GiB budget the three-vector column program of Groth16's h takes
2048 columns per block (8.1 GiB estimated), the one-vector ones 4096
columns or 2048 rows (10.3 GiB each; the next power of two would not fit).
"""
from __future__ import annotations

import dataclasses
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ops import ntt as N
from ops import transfer
from ops.field import Fr

FR_BYTES = 4 * Fr.L
BLOCK_COPIES = 3           # per vector: its input block, its transformed block, and the next
                           # block's input, put while this one runs (``sweep`` is pipelined)
TRANSFORM_TEMPS = 3        # one running short NTT: bit-reversal gather, 2^r parts, kernel outputs
STAGED = 1                 # one block more: the previous block's result waiting to be written,
                           # or the planes of an input being put (before their stack)
FACTOR_COPIES = 3          # one factor: two table gathers and their product (unbatched)
INDEX_BYTES = 2 * 4        # its exponent and a masked copy (uint32)


def default_log_n1(log_n: int) -> int:
    """The balanced split n1 = 2^⌊log n/2⌋ ≤ n2."""
    return log_n // 2


@dataclasses.dataclass(frozen=True)
class Stage:
    """One pass's arithmetic on a lines-last block: optionally x·g^index,
    the short ntt (intt if ``inverse``) along the lines, optionally the
    twiddle ω^(±q·p), optionally x·g^(−index)."""
    inverse: bool
    pre_coset: bool = False
    twiddle: bool = False
    post_coset: bool = False


class Tables(NamedTuple):
    """The ``ops.ntt.PowerTable`` of ω, ω⁻¹, g and g⁻¹ for exponents < n."""
    omega: N.PowerTable
    omega_inv: N.PowerTable
    g: N.PowerTable
    g_inv: N.PowerTable


def tables(log_n: int) -> Tables:
    """The four tables of a length-2^log_n transform on the default device."""
    w, g = N.root_of_unity(log_n), N.GENERATOR
    return Tables(*(N.power_table(b, log_n) for b in (w, pow(w, -1, Fr.p), g, pow(g, -1, Fr.p))))


def apply_stage(x, q0, stage: Stage, tabs: Tables, dom: N.Domain, log_n: int):
    """``stage`` on a lines-last block x ``(8, *batch, lines, L)`` (L = dom.n)
    whose first line is q0 (a uint32 scalar, traced: one program for all
    blocks).  Exponents are uint32: q·p wraps mod 2^32, a multiple of n."""
    lines, L = x.shape[-2:]
    q = q0 + jnp.arange(lines, dtype=jnp.uint32)[:, None]
    p = jnp.arange(L, dtype=jnp.uint32)[None, :]
    index = p * jnp.uint32((1 << log_n) // L) + q                 # (lines, L)
    if stage.pre_coset:
        x = N.times_powers(x, tabs.g, index)
    x = (N.intt if stage.inverse else N.ntt)(x, dom)
    if stage.twiddle:
        e = (q * p) & jnp.uint32((1 << log_n) - 1)
        x = N.times_powers(x, tabs.omega_inv if stage.inverse else tabs.omega, e)
    if stage.post_coset:
        x = N.times_powers(x, tabs.g_inv, index)
    return x


def to_lines(block, axis: str):
    """A host-layout block (``[..., :, cols]`` or ``[..., rows, :]``) lines-last."""
    return jnp.swapaxes(block, -1, -2) if axis == "col" else block


def from_lines(block, axis: str):
    return jnp.swapaxes(block, -1, -2) if axis == "col" else block


@functools.partial(jax.jit, static_argnames=("stages", "axis", "out_axis", "log_n"))
def stages_program(q0, x, tabs, dom, *, stages, axis, out_axis, log_n):
    """Stages in sequence on one block read along ``axis``, written along ``out_axis``."""
    x = to_lines(x, axis)
    for st in stages:
        x = apply_stage(x, q0, st, tabs, dom, log_n)
    return (from_lines(x, out_axis),)


def _line_axis(x, axis: str) -> int:
    """The axis of the matrix view x ``(8, *batch, rows, cols)`` that a block
    of ``axis`` lines cuts (columns: the last)."""
    return x.ndim - 1 if axis == "col" else x.ndim - 2


def limb_block(x, at, size: int, axis: int):
    """Lines [at, at + size) along ``axis`` of each limb plane of x (a tuple
    of 8 device arrays ``(*batch, n1, n2)``, see ``put_limbs``), stacked:
    the block ``(8, *batch, ...)`` (inside a jitted program)."""
    return jnp.stack([jax.lax.dynamic_slice_in_dim(p, at, size, axis) for p in x])


def limb_update(x, y, at, axis: int):
    """x's limb planes with y ``(8, ...)``'s planes written at ``at`` along ``axis``
    (in place where x is donated)."""
    return tuple(jax.lax.dynamic_update_slice_in_dim(p, y[i], at, axis) for i, p in enumerate(x))


@functools.partial(jax.jit, static_argnames=("stages", "axis", "log_n", "chunk"),
                   donate_argnums=(0,))
def resident_step(x, q0, tabs, dom, *, stages, axis, log_n, chunk):
    """One block of a sweep over a device matrix view ``(8, *batch, n1, n2)``
    held as its limb planes x (``put_limbs``: 8 arrays ``(*batch, n1, n2)``),
    in place (x donated): lines [q0, q0 + chunk) along ``axis`` through
    ``stages_program`` and back into the same lines."""
    at, ax = q0.astype(jnp.int32), _line_axis(x[0], axis)
    (y,) = stages_program(q0, limb_block(x, at, chunk, ax), tabs, dom, stages=stages,
                          axis=axis, out_axis=axis, log_n=log_n)
    return limb_update(x, y, at, ax)


@functools.partial(jax.jit, static_argnames=("stages", "log_n", "chunk"), donate_argnums=(1,))
def resident_rows_to_cols(x, out, q0, tabs, dom, *, stages, log_n, chunk):
    """Rows [q0, q0 + chunk) of the device view ``(8, *batch, n1, n2)`` held
    as limb planes x through ``stages_program``, written as columns [q0, q0 +
    chunk) of the view ``(8, *batch, n2, n1)`` held as limb planes out
    (donated; or any planes of its size, e.g. a spent vector's in x's shape,
    viewed so and returned in their own shape: updated in place either way):
    ``ntt_host``'s transposed write of a natural output, on the device."""
    at = q0.astype(jnp.int32)
    (y,) = stages_program(q0, limb_block(x, at, chunk, x[0].ndim - 2), tabs, dom,
                          stages=stages, axis="row", out_axis="col", log_n=log_n)
    shape = x[0].shape[:-2] + x[0].shape[:-3:-1]
    o = limb_update(tuple(p.reshape(shape) for p in out), y, at, len(shape) - 1)
    return tuple(p.reshape(q.shape) for p, q in zip(o, out))


def matrix(x: np.ndarray, rows: int) -> np.ndarray:
    """The host vector ``(8, *batch, n)`` as its ``(8, *batch, rows, n/rows)`` view."""
    return x.reshape(x.shape[:-1] + (rows, x.shape[-1] // rows))


def _block(view: np.ndarray, axis: str, q0: int, size: int) -> np.ndarray:
    return view[..., :, q0:q0 + size] if axis == "col" else view[..., q0:q0 + size, :]


def _planes(block: np.ndarray) -> np.ndarray:
    """A block ``(8, *batch, a, b)`` of a host view as its ``(8·B, a, b)`` planes
    (a view: the leading axes of the views merge)."""
    return block.reshape((-1,) + block.shape[-2:])


def put_block(block: np.ndarray, pool: ThreadPoolExecutor) -> jax.Array:
    """A block ``(8, *batch, a, b)`` of a host view on the device
    (``ops.transfer.put_planes`` of its (a, b) planes: a row block's planes
    are contiguous and are put as they are; a column block's are gathered
    first, each on its own thread)."""
    return transfer.put_planes(block, pool, plane_ndim=2)


def put_limbs(block: np.ndarray, pool: ThreadPoolExecutor,
              out: tuple | None = None) -> tuple:
    """A block ``(8, *batch, a, b)`` of a host view on the device as its 8
    limb planes, a tuple of ``(*batch, a, b)`` arrays (each put as
    ``put_block`` puts), written into the planes ``out`` (donated) if given.
    A whole vector held so needs no free run of the pool as large as the
    vector, only eight an eighth its size: the 32GiB 16 GB mode's h found
    4.5 GiB free for its 4 GiB vector, but in two pieces (bench/NOTES.md
    session 41)."""
    if out is not None and len(out) != block.shape[0]:
        raise ValueError(f"put_limbs: out has {len(out)} planes, the block {block.shape[0]}")
    return tuple(transfer.put_planes(block[i], pool, plane_ndim=2,
                                     out=None if out is None else out[i])
                 for i in range(block.shape[0]))


def write_block(block: np.ndarray, result: jax.Array, pool: ThreadPoolExecutor) -> None:
    """``block[...] = result`` (a block of a host view; the device result of
    its shape), the strided host writes one plane per task on ``pool``."""
    src = _planes(np.asarray(result))
    list(pool.map(lambda p: np.copyto(p[0], p[1]), zip(_planes(block), src)))


def sweep(program, ins, outs, count: int, chunk: int, workers: int | None = None):
    """For q0 = 0, chunk, … < count: program(q0, *blocks) on the device, the
    blocks being ``chunk`` lines of each (matrix view, axis) in ``ins``; its
    results are written to the same lines of each (view, axis) in ``outs``
    (which may be the views read: a block is read before it is written).

    Pipelined: block q's inputs go to the device (``put_block``), its
    program is dispatched and its results start back to the host
    (``ops.transfer.start_fetch``: into pinned memory on a GPU, a copy
    34–36× the plain fetch's rate on the H200) before block q − 1's results are written
    (``write_block``), so the device computes one block while the host
    copies the next and the previous.  So two blocks' results may be on
    the device at once, and the next block's inputs beside a running one
    (``step_bytes`` counts both).  Host copies run on
    ``workers`` threads (default: the CPUs, at most 16)."""
    with transfer.copy_pool(workers=workers) as pool:
        pending = None
        for q0 in range(0, count, chunk):
            blocks = [put_block(_block(v, ax, q0, chunk), pool) for v, ax in ins]
            results = [transfer.start_fetch(r) for r in program(jnp.uint32(q0), *blocks)]
            if pending is not None:
                _write_all(outs, *pending, chunk, pool)
            pending = (q0, results)
        if pending is not None:
            _write_all(outs, *pending, chunk, pool)


def _write_all(outs, q0: int, results, chunk: int, pool: ThreadPoolExecutor) -> None:
    for (v, ax), r in zip(outs, results):
        write_block(_block(v, ax, q0, chunk), r, pool)


def step_bytes(lines: int, log_len: int, vectors: int, batch: int, log_n: int,
               log_n1: int) -> int:
    """Estimated device bytes of one program on a block of ``lines`` lines of
    length 2^log_len, for ``vectors`` vectors of ``batch`` instances each:
    per vector its input and transformed blocks and the next block's input
    (``sweep`` is pipelined), the temporaries of one running short NTT,
    one staged block, one factor (table gathers, product, exponents), and
    the fixed tables and short domains."""
    elems = lines << log_len
    block = elems * batch * FR_BYTES
    factor = elems * (FACTOR_COPIES * FR_BYTES + INDEX_BYTES)
    fixed = 4 * 2 * FR_BYTES << ((log_n + 1) // 2)
    fixed += FR_BYTES * ((1 << log_n1) + (1 << (log_n - log_n1)) + 2)
    return (BLOCK_COPIES * vectors + TRANSFORM_TEMPS + STAGED) * block + factor + fixed


def chunk_lines(log_len: int, vectors: int, batch: int, log_n: int, log_n1: int,
                budget: int) -> int:
    """The largest power-of-two number of lines (≤ n/2^log_len) per block whose
    ``step_bytes`` fits ``budget``; ValueError if one line does not."""
    count = 1 << (log_n - log_len)
    need = step_bytes(1, log_len, vectors, batch, log_n, log_n1)
    if need > budget:
        raise ValueError(f"device budget of {budget} bytes cannot hold one line of 2^{log_len} "
                         f"elements ({vectors} vector(s), batch {batch}): needs {need} bytes")
    lines = 1
    while lines < count and step_bytes(2 * lines, log_len, vectors, batch, log_n,
                                       log_n1) <= budget:
        lines *= 2
    return lines


def check(x: np.ndarray, name: str) -> int:
    """log n of a host vector of Fr elements ``(8, *batch, n)``, n a power of two."""
    if x.ndim < 2 or x.shape[0] != Fr.L or x.dtype != np.uint32:
        raise ValueError(f"{name}: expected uint32 Fr elements (8, *batch, n), got "
                         f"{x.dtype} {x.shape}")
    n = x.shape[-1]
    if n & (n - 1) or n == 0:
        raise ValueError(f"{name}: length {n} is not a power of two")
    return n.bit_length() - 1


def batch_size(x: np.ndarray) -> int:
    return int(np.prod(x.shape[1:-1], dtype=np.int64))


def ntt_host(x: np.ndarray, budget: int, *, inverse: bool = False, coset: bool = False,
             transposed_in: bool = False, transposed_out: bool = False,
             log_n1: int | None = None) -> np.ndarray:
    """``ops.ntt.ntt`` (``intt``; with ``coset``, ``coset_ntt``/``coset_intt``) of
    the host vector x ``(8, *batch, n)`` along its last axis, in a new host
    array, with at most ``budget`` device bytes per program (estimated).

    transposed_in / transposed_out: x / the result in the transposed layout
    of the split n1 = 2^log_n1 (default ``default_log_n1``).  A natural input
    runs columns-then-rows, a transposed one rows-then-columns; a natural
    output after a natural input is written transposed by the row pass.
    Transposed in and out is refused (it would need a transpose pass)."""
    log_n = check(x, "ntt_host")
    log_n1 = default_log_n1(log_n) if log_n1 is None else log_n1
    if not 0 <= log_n1 <= log_n:
        raise ValueError(f"ntt_host: log_n1 = {log_n1} outside [0, {log_n}]")
    if transposed_in and transposed_out:
        raise ValueError("ntt_host: transposed in and out needs a transpose pass; not supported")
    n1, n2 = 1 << log_n1, 1 << (log_n - log_n1)
    log_lens = {"col": log_n1, "row": log_n - log_n1}
    tabs = tables(log_n)
    first = Stage(inverse, pre_coset=coset and not inverse, twiddle=True)
    second = Stage(inverse, post_coset=coset and inverse)
    axes = ("row", "col") if transposed_in else ("col", "row")
    work = np.empty_like(x)
    out = np.empty_like(x) if not (transposed_in or transposed_out) else work
    src, mid = matrix(x, n1), matrix(work, n1)
    dst, dst_axis = (matrix(out, n2), "col") if out is not work else (mid, axes[1])
    for (ax, st, i, o, o_ax) in ((axes[0], first, src, mid, axes[0]),
                                 (axes[1], second, mid, dst, dst_axis)):
        log_len = log_lens[ax]
        dom = N.domain(log_len, cosets=False)
        prog = functools.partial(stages_program, tabs=tabs, dom=dom, stages=(st,), axis=ax,
                                 out_axis=o_ax, log_n=log_n)
        chunk = chunk_lines(log_len, 1, batch_size(x), log_n, log_n1, budget)
        sweep(prog, [(i, ax)], [(o, o_ax)], 1 << (log_n - log_len), chunk)
    return out
