"""Device -> host copies at the link's rate.

JAX's plain fetch of a GPU array (``np.asarray``, after or without
``copy_to_host_async``) moved 1.3–1.6 GB/s on the H200 host, against
47–55 GB/s for one ``jax.device_put`` of the same array into ``pinned_host``
memory (``python3 -m bench.host_transfer``, bench/results/
host_transfer_h200_run1.jsonl, 2^23 and 2^27 Fr vectors; the plain fetch
stages through a small pinned buffer and a pageable copy, jax issue 21438).
The out-of-core sweeps fetch every block they compute, so that fetch set
their rate (bench/NOTES.md, hypothesis 38).

``start_fetch(x)`` starts x's copy to the host and returns the array to
read: where x lives on a GPU (or ``pinned=True`` and the device has the
memory kind), a copy of x in ``pinned_host`` memory, whose ``np.asarray``
is a view of the pinned buffer; otherwise x itself with its
``copy_to_host_async`` started.  Either way the copy runs while the caller
goes on, and ``np.asarray`` of the result waits for it.  Treat the numpy
array as read-only.

The other way: ``to_pinned`` places host data that goes to the device
again and again (the 16 GB mode's matrix row blocks) in ``pinned_host``
memory once, so that every later ``jax.device_put`` of it runs at the link's
rate (46.9 / 54.7 GB/s from pinned memory against 7.1 / 6.8 GB/s from
pageable numpy, whole, at 2^23 / 2^27); ``put_planes`` puts pageable numpy
one plane per thread (17 / 28 GB/s).  ``fetch_held`` fetches an array that
will go back (the 16 GB mode's host witness) as a ``PinnedView``: numpy
that keeps its pinned buffer, so ``put_held`` puts it back by one DMA
instead of through pageable staging (a numpy view of pinned memory goes at
the pageable rate: ``jax.device_put`` copies numpy into its own staging).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import os
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.profiler import TraceAnnotation as span   # named host spans in a profile

PINNED = "pinned_host"
WORKERS = min(16, os.cpu_count() or 1)    # threads for host copies: the CPUs, at most 16


@contextlib.contextmanager
def copy_pool(pool: Executor | None = None, workers: int | None = None):
    """``pool``, or for the block a thread pool of ``workers`` (default
    ``WORKERS``) threads for host copies."""
    if pool is not None:
        yield pool
        return
    with ThreadPoolExecutor(workers or WORKERS) as own:
        yield own


def default_device(dev=None):
    """dev, or where it is None the device a new array goes to (the default
    device, ``jax.default_device``'s context included)."""
    if dev is None:
        (dev,) = jnp.zeros(()).devices()
    return dev


def device_pinned_sharding(dev, pinned: bool | None = None):
    """The ``pinned_host`` sharding of device ``dev``, or None: where the
    device lacks that memory kind, or (``pinned`` None, the default) it is
    not a GPU; ``pinned=False``: None."""
    if pinned is False or (pinned is None and dev.platform != "gpu"):
        return None
    try:
        kinds = {m.kind for m in dev.addressable_memories()}
    except (AttributeError, NotImplementedError, RuntimeError):
        return None
    return jax.sharding.SingleDeviceSharding(dev, memory_kind=PINNED) if PINNED in kinds else None


def pinned_sharding(x: jax.Array, pinned: bool | None = None):
    """``device_pinned_sharding`` of x's single device, or None where x is
    not a device array on one device or already lives in pinned memory."""
    if pinned is False or not isinstance(x, jax.Array) or len(x.devices()) != 1:
        return None
    if x.sharding.memory_kind == PINNED:
        return None
    (dev,) = x.devices()
    return device_pinned_sharding(dev, pinned)


def to_pinned(tree, dev, pinned: bool | None = None):
    """Every numpy leaf of ``tree`` copied into ``dev``'s pinned host memory
    (jax Arrays of memory kind ``pinned_host``), once, for repeated puts;
    the tree as it is where ``device_pinned_sharding`` is None."""
    s = device_pinned_sharding(dev, pinned)
    return tree if s is None else jax.device_put(tree, s)


def put(tree, dev, pool: Executor | None = None):
    """Every leaf of ``tree`` (numpy, or jax Arrays in host memory) on
    ``dev``'s default memory: ``jax.device_put``, from pinned memory at the
    link's rate.  With ``pool``, a numpy leaf of more than ``PIECE_BYTES``
    goes by ``put_planes`` on its threads: one thread puts pageable memory
    at 6.4 GB/s, sixteen at 30.2 (H200 host, 2 GiB: bench/NOTES.md
    hypothesis 49)."""
    s = jax.sharding.SingleDeviceSharding(dev)

    def one(x):
        if pool is not None and isinstance(x, np.ndarray) and x.ndim and x.nbytes > PIECE_BYTES:
            return put_planes(x, pool, plane_ndim=x.ndim, dev=dev, piece_bytes=PIECE_BYTES)
        return jax.device_put(x, s)
    return jax.tree.map(one, tree)


def pipeline(n: int, put, run, on_step=None, put_ahead: bool = True, wait=None,
             span_name: str = "transfer.wait") -> None:
    """Steps k = 0 … n − 1 of streamed device work: ``run(k, put(k))``,
    with at most two steps in flight (before step k is dispatched step
    k − 2 has finished, ``wait(out)`` on what its ``run`` returned, default
    ``jax.block_until_ready``), so its buffers are free: without the wait
    the host loop runs ahead of the device and every step's inputs land on
    the device at once (the budget ignored).

    ``put(k)`` (step k's inputs to the device) is called for step k + 1
    before ``run`` dispatches step k: a host-to-device copy on a GPU waits
    for the work the compute stream holds when it is enqueued (PjRt's
    allocations are compute-synchronized), so a put issued after step k
    waits for it to end and the device idles for the copy; put ahead, it
    waits for step k − 1 and runs beside step k (bench/NOTES.md hypotheses
    97, 98).  So ``STEPS_HELD`` steps' inputs exist at once (k − 1 running,
    k queued, k + 1 being copied).  Without ``put_ahead`` each step's put
    comes just before its run (for measuring; two steps' inputs).
    ``on_step()``, if given, is called before every step but the first: an
    interruption point (the engine runs a more urgent proof there)."""
    wait = jax.block_until_ready if wait is None else wait
    pending = collections.deque()
    ahead = put(0) if n > 0 and put_ahead else None
    for k in range(n):
        if k and on_step is not None:
            on_step()
        if len(pending) == 2:
            with span(span_name):
                wait(pending.popleft())
        if put_ahead:
            inputs, ahead = ahead, put(k + 1) if k + 1 < n else None
        else:
            inputs = put(k)
        pending.append(run(k, inputs))


STEPS_HELD = 3   # pipeline: the inputs of this many steps exist at once (put ahead)


PIECE_BYTES = 16 << 20   # put_planes: the most bytes of one put
PIECES_IN_FLIGHT = 16    # put_planes: pieces put (or being put) beyond the result


@functools.partial(jax.jit, donate_argnums=0)
def _set_piece(out, at, piece):
    """out with piece written at index ``at`` (one per axis of out; piece
    has out's rank), in place (out donated)."""
    return jax.lax.dynamic_update_slice(out, piece, tuple(at))


def _pieces(shape, plane_ndim: int, itemsize: int, piece_bytes: int):
    """The pieces of an array of ``shape`` that ``put_planes`` puts: per plane
    (the last ``plane_ndim`` axes), runs of the plane's first axis of at most
    ``piece_bytes`` (one row at least): (index, slices) pairs."""
    lead, plane = shape[:len(shape) - plane_ndim], shape[len(shape) - plane_ndim:]
    if not plane:
        raise ValueError("put_planes: plane_ndim must be at least 1")
    row = itemsize * int(np.prod(plane[1:], dtype=np.int64))
    step = max(1, piece_bytes // max(row, 1))
    out = []
    for at in np.ndindex(*lead):
        for r0 in range(0, plane[0], step):
            r1 = min(plane[0], r0 + step)
            out.append((at + (r0,) + (0,) * (plane_ndim - 1),
                        tuple(slice(i, i + 1) for i in at) + (slice(r0, r1),)))
    return out


def put_planes(x: np.ndarray, pool: Executor | None, plane_ndim: int = 1,
               dev=None, in_flight: int = PIECES_IN_FLIGHT,
               piece_bytes: int = PIECE_BYTES, out: jax.Array | None = None) -> jax.Array:
    """Host x on the device (``dev``, default the default device), put in
    pieces on ``pool``'s threads (None: in turn on this one): each plane
    (x's last ``plane_ndim`` axes) in runs of its first axis of at most
    ``piece_bytes``, each made contiguous on its own thread, so that a
    strided slice is never gathered by one thread (hypothesis 25 in
    bench/NOTES.md: per-row puts 5.4× one ``jnp.asarray`` of a strided
    slice on the H200 host).

    Each piece is written into the result (allocated first, zeros) in place
    as it arrives, with at most ``in_flight`` pieces put ahead (each put
    waited for on its thread; without a pool, the put ``in_flight`` back
    waited for): the device holds x once plus about ``in_flight ·
    piece_bytes``, not twice (stacking whole planes held them all beside
    the stack: hypothesis 47; ``jax.device_put`` returns before its copy
    ends, so only a wait bounds the pieces in flight).

    ``out``: a device array of x's shape and dtype to write into instead
    (donated: every element is overwritten, and its buffer is the result's),
    so a caller that allocated its long-lived vectors first keeps their
    places in the device's pool (``groth16.h_coefficients_resident``); x then
    goes to out's device."""
    if in_flight < 1:
        raise ValueError(f"put_planes: in_flight must be at least 1, not {in_flight}")
    pieces = _pieces(x.shape, plane_ndim, x.itemsize, piece_bytes)
    dtype = jax.dtypes.canonicalize_dtype(x.dtype)   # as device_put puts it (int64: int32
    if out is not None:                              # unless x64 is on)
        if out.shape != x.shape or out.dtype != dtype:
            raise ValueError(f"put_planes: out is {out.dtype}{list(out.shape)}, "
                             f"x is {x.dtype}{list(x.shape)}")
        if len(out.devices()) != 1:
            raise ValueError(f"put_planes: out must live on one device, not "
                             f"{len(out.devices())}")
        (dev,) = out.devices()
    s = None if dev is None else jax.sharding.SingleDeviceSharding(dev)
    if out is None:
        out = jnp.zeros(x.shape, dtype, device=s)  # None: the default device (its context too)

    def put(k):
        return jax.device_put(np.ascontiguousarray(x[pieces[k][1]]), s)

    if pool is None:                 # puts run on as issued; wait for the one in_flight back
        held = collections.deque()
        for k, (at, _) in enumerate(pieces):
            held.append(put(k))
            out = _set_piece(out, at, held[-1])
            if len(held) > in_flight:
                jax.block_until_ready(held.popleft())
        return out

    def put_waited(k):
        return jax.block_until_ready(put(k))

    window = collections.deque(pool.submit(put_waited, k)
                               for k in range(min(in_flight, len(pieces))))
    for k, (at, _) in enumerate(pieces):
        piece = window.popleft().result()
        if k + len(window) + 1 < len(pieces):
            window.append(pool.submit(put_waited, k + len(window) + 1))
        out = _set_piece(out, at, piece)
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class PinnedVector:
    """A host array ``(*lead, N)`` held as pieces of ``piece`` elements along
    its last axis (``pin_vector``): each ``(*lead, piece)``, the last one
    zero-padded, in a device's pinned host memory (jax Arrays of memory kind
    ``pinned_host``) where it has that memory, else numpy.  ``put_range``
    puts any piece-aligned range at the link's rate, one DMA a piece, with
    no pageable staging and no host gather (bench/NOTES.md hypothesis 84:
    the 16 GB mode's MSMs put their bases at ~9 GB/s from pageable memory).
    Not a pytree: a key's tree holds it as one leaf (its pieces are not
    device arrays to count or to move)."""
    pieces: tuple
    n: int
    piece: int
    lead: tuple
    dtype: Any

    @property
    def shape(self) -> tuple:
        return self.lead + (self.n,)

    @property
    def ndim(self) -> int:
        return len(self.lead) + 1

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


def pin_vector(x: np.ndarray, dev, piece_bytes: int = PIECE_BYTES,
               pinned: bool | None = None) -> PinnedVector:
    """x ``(*lead, N)`` as a ``PinnedVector`` on ``dev`` (``pinned`` as
    ``to_pinned``): pieces of the largest power of two of elements whose
    ``(*lead, piece)`` bytes are at most ``piece_bytes`` (one element at
    least), copied one at a time (the host holds x and one piece more, and
    the caller drops x after)."""
    x = np.asarray(x)
    if x.ndim < 1:
        raise ValueError(f"pin_vector: x must have a last axis, got shape {x.shape}")
    row = max(1, x.nbytes // max(x.shape[-1], 1))          # bytes of one element's column
    piece = 1 << max(0, (max(1, piece_bytes // row)).bit_length() - 1)
    s = device_pinned_sharding(dev, pinned)
    n, pieces = x.shape[-1], []
    for lo in range(0, n, piece):
        p = x[..., lo:lo + piece]
        if p.shape[-1] < piece:
            p = np.pad(p, [(0, 0)] * (x.ndim - 1) + [(0, piece - p.shape[-1])])
        pieces.append(np.ascontiguousarray(p) if s is None else jax.device_put(p, s))
    return PinnedVector(tuple(pieces), n, piece, tuple(x.shape[:-1]), x.dtype)


@functools.partial(jax.jit, static_argnames=("size",))
def _piece_window(piece, start, size: int):
    """piece[..., start:start + size] (within the piece; start traced: one
    program per size, not one per chunk of a chunked MSM)."""
    return jax.lax.dynamic_slice_in_dim(piece, start, size, axis=-1)


def put_range(v: PinnedVector, lo: int, hi: int, size: int | None = None, dev=None,
              in_flight: int = PIECES_IN_FLIGHT) -> jax.Array:
    """``v[..., lo:hi]`` zero-padded to ``size`` (default hi − lo) on ``dev``
    (default the default device).  Piece-aligned ranges (lo a multiple of
    the piece, hi too or N: a power-of-two chunk of a chunked MSM, or the
    whole vector) put whole pieces into a zero array (the last one's head
    where the size ends inside it), at most ``in_flight`` ahead of their
    writes, except that a range of exactly one piece is that piece's own
    put (no device program: a chunk-sized piece, hypothesis 89); a range
    within one piece (a chunk smaller than a piece) is that piece's window;
    any other range is gathered on the host first (slow, correct)."""
    size = hi - lo if size is None else size
    if not (0 <= lo <= hi <= v.n) or size < hi - lo:
        raise ValueError(f"put_range: [{lo}, {hi}) of {v.n} elements into {size}")
    dev = default_device(dev)
    s = jax.sharding.SingleDeviceSharding(dev)
    P = v.piece
    k0, k1 = lo // P, -(-hi // P)
    if lo % P == 0 and size == P and (hi == lo + P or hi == v.n > lo):
        return jax.device_put(v.pieces[k0], s)   # one whole piece (its padding zeros): one DMA
    if lo % P == 0 and (hi % P == 0 or hi == v.n):
        out = jnp.zeros(v.lead + (size,), v.dtype, device=s)
        held = collections.deque()
        zero = (0,) * len(v.lead)
        for k in range(k0, k1):
            held.append(jax.device_put(v.pieces[k], s))
            room = size - (k * P - lo)          # < P: the last piece's head (its tail: padding)
            piece = held[-1] if room >= P else _piece_window(held[-1], 0, room)
            out = _set_piece(out, zero + (k * P - lo,), piece)
            if len(held) > in_flight:
                jax.block_until_ready(held.popleft())
        return out
    if k1 - k0 == 1 and lo - k0 * P + size <= P:
        out = _piece_window(jax.device_put(v.pieces[k0], s), lo - k0 * P, size)
        if hi - lo < size:                       # the window's tail past hi: zeros
            keep = jnp.arange(size) < hi - lo
            out = jnp.where(keep, out, jnp.zeros((), v.dtype))
        return out
    host = np.concatenate([np.asarray(v.pieces[k]) for k in range(k0, k1)], axis=-1)
    host = host[..., lo - k0 * P:hi - k0 * P]
    host = np.pad(host, [(0, 0)] * len(v.lead) + [(0, size - (hi - lo))])
    return jax.device_put(host, s)


def put_pieces(v: PinnedVector, lo: int, hi: int, size: int | None = None,
               dev=None) -> tuple | None:
    """``v[..., lo:hi]`` zero-padded to ``size`` (default hi − lo) on ``dev``
    as a tuple of whole pieces, their concatenation along the last axis (the
    consumer's program concatenates them: ``ops.msm.point_major``), where
    the range is whole pieces (lo a multiple of the piece, hi too or N, size
    a multiple of it; zero pieces fill the size past hi); None otherwise
    (``put_range`` serves those).  Each piece is one DMA and nothing runs on
    the device to assemble them: no ``_set_piece`` programs queued behind
    the running work on the compute stream (bench/NOTES.md hypothesis 96)."""
    size = hi - lo if size is None else size
    if not (0 <= lo <= hi <= v.n) or size < hi - lo:
        raise ValueError(f"put_pieces: [{lo}, {hi}) of {v.n} elements into {size}")
    P = v.piece
    if lo % P or size % P or not (hi % P == 0 or hi == v.n) or size == 0:
        return None
    s = jax.sharding.SingleDeviceSharding(default_device(dev))
    k0, k1 = lo // P, -(-hi // P)
    pieces = [jax.device_put(v.pieces[k], s) for k in range(k0, k1)]
    if len(pieces) < size // P:               # past hi: zeros (identity bases, zero rows)
        zero = jnp.zeros(v.lead + (P,), v.dtype, device=s)
        pieces += [zero] * (size // P - len(pieces))
    return tuple(pieces)


def start_fetch(x: jax.Array, pinned: bool | None = None) -> jax.Array:
    """Start copying device array x to host memory; ``np.asarray`` of the
    returned array gives its values (waiting for the copy).  ``pinned``:
    None picks the pinned copy on GPUs, True wherever the device has
    ``pinned_host`` memory, False never."""
    s = pinned_sharding(x, pinned)
    if s is None:
        x.copy_to_host_async()
        return x
    return jax.device_put(x, s)


class PinnedView(np.ndarray):
    """A read-only numpy view of an array's copy in pinned host memory that
    keeps that copy (a ``pinned_host`` jax Array) as ``pinned``
    (``fetch_held``).  Any array derived from it (a slice, a reshape, a
    ufunc's result) is a view like it with ``pinned`` None: only the whole
    fetched array goes back by ``put_held``."""
    pinned = None

    def __array_finalize__(self, obj):
        self.pinned = None


def fetch_held(x, pinned: bool | None = None) -> np.ndarray:
    """``fetch(x, pinned)``, as a ``PinnedView`` keeping its pinned copy
    where there is one (on a GPU), for an array that goes back to the
    device later (bench/NOTES.md hypothesis 91); a plain numpy array
    elsewhere."""
    if not isinstance(x, jax.Array):
        return np.asarray(x)
    y = start_fetch(x, pinned)
    v = np.asarray(y)
    if y is not x and y.sharding.memory_kind == PINNED:
        v = v.view(PinnedView)
        v.pinned = y
    return v


def held(x) -> jax.Array | None:
    """x's pinned copy where x is a whole ``PinnedView`` (``fetch_held``),
    else None."""
    return x.pinned if isinstance(x, PinnedView) else None


def put_held(x: jax.Array, dev=None) -> jax.Array:
    """A ``pinned_host`` jax Array (``held``) on ``dev``'s default memory
    (default the default device): one DMA at the link's rate (53 GB/s on
    an H100 from pinned pieces, bench/results/h100_s46_probe_put.jsonl),
    the whole array on the device at once."""
    dev = default_device(dev)
    return jax.device_put(x, jax.sharding.SingleDeviceSharding(dev))


def fetch(x, pinned: bool | None = None) -> np.ndarray:
    """x's values in host memory (numpy; read-only where x was on a device):
    ``np.asarray(start_fetch(x))``; a numpy x is returned as it is."""
    if not isinstance(x, jax.Array):
        return np.asarray(x)
    return np.asarray(start_fetch(x, pinned))
