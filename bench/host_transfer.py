"""Host <-> device copies of Fr vectors: the primitives of the out-of-core sweeps.

Hypothesis 38 (bench/NOTES.md, session 19): the out-of-core h at 2^23 moves its
18 vectors at 2.44 GB/s (1.98 s against 52.5 ms in core), far below PCIe.
Which copy sets that rate?  Cases, on one random vector x ``(8, 2^log_m)``
uint32 (its ``(8, n1, n2)`` matrix view as in ``ops.four_step``, a column
block = ``--cols`` columns of it):

* ``memcpy``: ``np.copyto`` of the whole vector, contiguous (the host's own rate);
* ``memcpy.threads`` / ``memcpy.fresh.threads`` / ``memcpy.fresh``: the same a
  limb plane per thread, into a destination written before / into a fresh
  ``np.empty`` one each call (its first-touch page faults: every proof of the
  16 GB mode allocates its host a, b, c afresh, 3 vectors, bench/NOTES.md
  session 41) / into a fresh one on one thread;
* ``gather_cols`` / ``gather_cols.threads``: a column block made contiguous,
  on one thread / one limb plane per thread (``ops.four_step.put_block``'s gather);
* ``scatter_cols.threads``: a contiguous block written into the column view,
  one plane per thread (``write_block``'s strided write);
* ``h2d.pageable`` / ``h2d.pageable.threads``: ``jax.device_put`` of the
  contiguous vector from numpy memory, whole / one plane per thread;
* ``h2d.pinned``: the same from a copy already in ``pinned_host`` memory
  (skipped where the platform has no such memory kind);
* ``d2h``: ``np.asarray`` of a fresh device vector (after ``copy_to_host_async``);
* ``d2h.pinned``: a fresh device vector put into ``pinned_host`` memory;
* ``fetch``: ``ops.transfer.fetch`` of a fresh device vector, to numpy (the
  pinned copy and its ``np.asarray`` on a GPU: what the sweeps use);
* ``put_planes`` / ``put_planes.stack``: ``ops.transfer.put_planes`` of the
  vector, in pieces of at most ``--piece-mib`` MiB, one per thread, each
  written into the result as it arrives with ``--in-flight`` pieces put
  ahead / its limb planes all put, then stacked (the function before
  hypothesis 47: each put vector briefly twice on the device);
  ``put_planes.nopool``: the same without a thread pool (the puts issued
  from one thread, the one ``--in-flight`` back waited: how ``ops.msm``
  streams its host bases and scalars); the records
  give the device's peak bytes beyond what was in use before the case
  (``peak_extra_bytes``; the peak is the process's, so run the case of the
  lower peak first, or alone);
* ``put_block.col`` / ``write_block.col``: ``ops.four_step``'s own functions on
  a column block of the vector (what a sweep pays per block; as in the sweep,
  the result's ``transfer.start_fetch`` is started just before ``write_block``).

Each: one warm-up, then ``--reps`` timed calls; GB/s = bytes moved / median.

    python -m bench.host_transfer --log-m 23 --out bench/results/host_transfer_h200.jsonl
"""
from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import argv_command, emit, environment
from bench.host_copy import _stack
from ops import four_step as FS
from ops import transfer
from ops.field import Fr

CASES = ("memcpy", "memcpy.threads", "memcpy.fresh.threads", "memcpy.fresh", "gather_cols",
         "gather_cols.threads", "scatter_cols.threads",
         "h2d.pageable", "h2d.pageable.threads", "h2d.pinned", "d2h", "d2h.pinned", "fetch",
         "put_planes", "put_planes.nopool", "put_planes.stack", "put_block.col", "write_block.col")


def memory_sharding(kind: str):
    """A single-device sharding in memory ``kind`` of the default device, or
    None where the platform does not have it."""
    dev = jax.devices()[0]
    try:
        kinds = {m.kind for m in dev.addressable_memories()}
    except Exception:              # noqa: BLE001  (older runtimes: no memory kinds)
        return None
    if kind not in kinds:
        return None
    return jax.sharding.SingleDeviceSharding(dev, memory_kind=kind)


def put_planes_stacked(x: np.ndarray, pool) -> jax.Array:
    """``ops.transfer.put_planes`` before hypothesis 47 (the baseline): every
    plane put on ``pool``'s threads, then stacked on the device."""
    planes = x.reshape((-1, x.shape[-1]))
    out = list(pool.map(lambda p: jax.device_put(np.ascontiguousarray(p)), planes))
    return _stack(out).reshape(x.shape)


def _device_bytes(key: str):
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get(key)


def _fresh(x_dev):
    """A new device array equal to x_dev (its host copy not cached yet)."""
    return jax.block_until_ready(x_dev + jnp.uint32(0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-m", type=int, default=16)
    ap.add_argument("--cols", type=int, default=None,
                    help="columns per block (default: half of them)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--in-flight", type=int, default=transfer.PIECES_IN_FLIGHT,
                    help="put_planes: pieces put ahead of the one written")
    ap.add_argument("--piece-mib", type=int, default=transfer.PIECE_BYTES >> 20,
                    help="put_planes: the most MiB of one put")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; choose from {CASES}")
    log_n1 = FS.default_log_n1(args.log_m)
    n1, n2 = 1 << log_n1, 1 << (args.log_m - log_n1)
    cols = args.cols or max(1, n2 // 2)
    if not 0 < cols <= n2:
        raise SystemExit(f"--cols {cols} outside 1..{n2}")
    workers = args.workers or transfer.WORKERS
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2**32, (Fr.L, 1 << args.log_m), dtype=np.uint32)
    dst = np.empty_like(x)
    view, dview = FS.matrix(x, n1), FS.matrix(dst, n1)
    block = np.ascontiguousarray(FS._block(view, "col", 0, cols))
    pinned = memory_sharding("pinned_host")
    base = {**environment(), "command": argv_command(), "size": args.log_m,
            "log_m": args.log_m, "n1": n1, "cols": cols, "workers": workers,
            "in_flight": args.in_flight, "piece_mib": args.piece_mib}
    pool = ThreadPoolExecutor(workers)
    x_dev = jax.block_until_ready(jax.device_put(x))
    blk_dev = jax.block_until_ready(jax.device_put(block))

    def put_lib(on=pool):
        return transfer.put_planes(x, on, in_flight=args.in_flight,
                                   piece_bytes=args.piece_mib << 20)

    def planes_put(v):
        return [jax.block_until_ready(p) for p in
                pool.map(lambda p: jax.device_put(np.ascontiguousarray(p)), v)]

    # case -> (setup per call or None, timed fn(setup), bytes moved)
    def prepared(case):
        if case == "memcpy":
            return None, lambda _: np.copyto(dst, x), x.nbytes
        if case in ("memcpy.threads", "memcpy.fresh.threads"):
            fresh = case == "memcpy.fresh.threads"
            return ((lambda: np.empty_like(x)) if fresh else (lambda: dst)), (
                lambda d: list(pool.map(lambda i: np.copyto(d[i], x[i]), range(len(x))))), x.nbytes
        if case == "memcpy.fresh":
            return (lambda: np.empty_like(x)), (lambda d: np.copyto(d, x)), x.nbytes
        if case == "gather_cols":
            return None, lambda _: np.ascontiguousarray(FS._block(view, "col", 0, cols)), block.nbytes
        if case == "gather_cols.threads":
            return None, lambda _: list(pool.map(np.ascontiguousarray,
                                                 FS._planes(FS._block(view, "col", 0, cols)))), block.nbytes
        if case == "scatter_cols.threads":
            return None, lambda _: list(pool.map(lambda p: np.copyto(p[0], p[1]), zip(
                FS._planes(FS._block(dview, "col", 0, cols)), FS._planes(block)))), block.nbytes
        if case == "h2d.pageable":
            return None, lambda _: jax.block_until_ready(jax.device_put(x)), x.nbytes
        if case == "h2d.pageable.threads":
            return None, lambda _: planes_put(x), x.nbytes
        if case == "h2d.pinned":
            if pinned is None:
                return None
            xp = jax.block_until_ready(jax.device_put(x, pinned))
            on_dev = memory_sharding("device")
            return None, lambda _: jax.block_until_ready(jax.device_put(xp, on_dev)), x.nbytes
        if case == "d2h":
            def fetch(y):
                y.copy_to_host_async()
                return np.asarray(y)
            return (lambda: _fresh(x_dev)), fetch, x.nbytes
        if case == "d2h.pinned":
            if pinned is None:
                return None
            return (lambda: _fresh(x_dev)), (
                lambda y: jax.block_until_ready(jax.device_put(y, pinned))), x.nbytes
        if case == "fetch":
            return (lambda: _fresh(x_dev)), transfer.fetch, x.nbytes
        if case == "put_planes":
            return None, lambda _: jax.block_until_ready(put_lib()), x.nbytes
        if case == "put_planes.nopool":
            return None, lambda _: jax.block_until_ready(put_lib(None)), x.nbytes
        if case == "put_planes.stack":
            return None, lambda _: jax.block_until_ready(put_planes_stacked(x, pool)), x.nbytes
        if case == "put_block.col":
            return None, lambda _: jax.block_until_ready(
                FS.put_block(FS._block(view, "col", 0, cols), pool)), block.nbytes
        if case == "write_block.col":
            return (lambda: transfer.start_fetch(_fresh(blk_dev))), (
                lambda r: FS.write_block(FS._block(dview, "col", 0, cols), r, pool)), block.nbytes
        raise AssertionError(case)

    try:
        for case in cases:
            prep = prepared(case)
            if prep is None:
                emit({**base, "case": f"host_transfer.{case}", "skipped":
                      "no pinned_host memory on this platform"}, args.out)
                continue
            setup, fn, nbytes = prep
            before = _device_bytes("bytes_in_use")
            ts = []
            for i in range(args.reps + 1):
                arg = setup() if setup else None
                t = time.perf_counter()
                fn(arg)
                if i:
                    ts.append(time.perf_counter() - t)
            med = statistics.median(ts)
            emit({**base, "case": f"host_transfer.{case}", "bytes": nbytes, "median_s": med,
                  "min_s": min(ts), "max_s": max(ts), "reps": args.reps, "compile_s": None,
                  "gb_s": nbytes / med / 1e9,
                  "peak_extra_bytes": None if before is None else
                  _device_bytes("peak_bytes_in_use") - before}, args.out)
        for case, put in (("put_planes", put_lib), ("put_planes.nopool", lambda: put_lib(None)),
                          ("put_planes.stack", lambda: put_planes_stacked(x, pool))):
            if case in cases and not np.array_equal(np.asarray(put()), x):
                raise SystemExit(f"{case} put the wrong elements")
        if set(cases) >= {"gather_cols", "put_block.col", "write_block.col"}:
            got = np.asarray(FS.put_block(FS._block(view, "col", 0, cols), pool))
            if not (np.array_equal(got, block)
                    and np.array_equal(FS._block(dview, "col", 0, cols), block)):
                raise SystemExit("put_block / write_block moved the wrong elements")
    finally:
        pool.shutdown()


if __name__ == "__main__":
    main()
