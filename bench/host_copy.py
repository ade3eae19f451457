"""Host → device copies of one chunk of host-resident bases (hypothesis 25).

A streaming MSM (``ops.msm.msm`` / ``bits_sum`` with bases in host memory)
copies each chunk of its bases, a last-axis slice ``bases[..., lo:hi]`` of
an affine ``(2, *fp, N)`` uint32 host array, to the device.  The slice is
strided (one contiguous run of ``hi − lo`` words per limb row), so some
gather is needed.  This times, for one chunk of K G1 points (96 bytes each)
out of N, the ways to do it; every variant's result is checked equal to the
first's:

* ``asarray``: ``jnp.asarray(view)`` (the path of session 10: JAX gathers
  into a fresh host buffer, then copies);
* ``gather_fresh``: ``np.ascontiguousarray(view)`` alone (host side only:
  the fresh buffer's first-touch page faults);
* ``staged``: ``np.copyto`` into one of two staging buffers allocated (and
  touched) once, then ``jax.device_put`` (the two reused staging buffers
  of NOTES's hypothesis 25);
* ``rows``: ``jax.device_put`` of each contiguous limb row of the view (no
  host gather at all), then one stack on the device;
* ``contiguous``: ``jax.device_put`` of an already contiguous chunk (the
  floor: the transfer alone).

Each variant: one warm-up (compiles the stack), then ``--reps`` timed
copies of successive chunks (median / min / max, each blocked until the
device holds the result).

    python -m bench.host_copy --log-n 26 --log-chunk 24 --out bench/results/host_copy_h200.jsonl
"""
from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import argv_command, emit, environment

FP_LIMBS = 12                # a G1 coordinate: 12 limbs of 32 bits


@jax.jit
def _stack(rows):
    return jnp.stack(rows)


def variants(bases: np.ndarray):
    """{name: copy(lo, hi) -> device array (or host array for gather_fresh)}
    over the host bases ``(2, 12, N)``."""
    stage = [np.empty(bases.shape[:-1] + (0,), bases.dtype)] * 2
    turn = [0]

    def staged(lo, hi):
        i = turn[0] = 1 - turn[0]
        if stage[i].shape[-1] != hi - lo:
            stage[i] = np.empty(bases.shape[:-1] + (hi - lo,), bases.dtype)
            stage[i].fill(0)                       # touched once, reused after
        np.copyto(stage[i], bases[..., lo:hi])
        return jax.device_put(stage[i])

    def rows(lo, hi):
        flat = bases.reshape(-1, bases.shape[-1])
        out = _stack([jax.device_put(flat[r, lo:hi]) for r in range(flat.shape[0])])
        return out.reshape(bases.shape[:-1] + (hi - lo,))

    return {
        "asarray": lambda lo, hi: jnp.asarray(bases[..., lo:hi]),
        "gather_fresh": lambda lo, hi: np.ascontiguousarray(bases[..., lo:hi]),
        "staged": staged,
        "rows": rows,
    }


def run(log_n: int, log_chunk: int, reps: int = 5, out: str | None = None,
        env: dict | None = None) -> list[dict]:
    if not 0 <= log_chunk <= log_n or reps < 1:
        raise ValueError(f"need 0 <= log_chunk <= log_n and reps >= 1, got {log_chunk}, "
                         f"{log_n}, {reps}")
    env = environment() if env is None else env
    n, k = 1 << log_n, 1 << log_chunk
    rng = np.random.default_rng(0)
    bases = rng.integers(0, 2**32, (2, FP_LIMBS, n), dtype=np.uint32)
    chunks = [(lo, lo + k) for lo in range(0, n, k)]
    pick = lambda i: chunks[i % len(chunks)]                      # noqa: E731
    reference = {lo: None for lo, _ in chunks}
    recs = []
    todo = variants(bases)
    contiguous = np.ascontiguousarray(bases[..., :k])
    todo["contiguous"] = lambda lo, hi: jax.device_put(contiguous)
    for name, fn in todo.items():
        x = jax.block_until_ready(fn(*pick(0)))
        ts = []
        for i in range(reps):
            lo, hi = pick(i + 1)
            t = time.perf_counter()
            x = jax.block_until_ready(fn(lo, hi))
            ts.append(time.perf_counter() - t)
            if name != "contiguous":
                got = np.asarray(x)
                if reference[lo] is None:
                    reference[lo] = got
                elif not np.array_equal(reference[lo], got):
                    raise RuntimeError(f"host_copy: {name} copied chunk {lo} wrongly")
            x = None                               # one chunk alive at a time
        rec = {"case": f"host_copy.{name}", "log_n": log_n, "log_chunk": log_chunk,
               "chunk_bytes": bases[..., :k].nbytes, "median_s": statistics.median(ts),
               "min_s": min(ts), "max_s": max(ts), "reps": reps,
               "gb_per_s": bases[..., :k].nbytes / statistics.median(ts) / 1e9,
               "command": argv_command(), **env}
        emit(rec, out)
        recs.append(rec)
    return recs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log-n", type=int, default=26, help="host bases: 2^n G1 points")
    ap.add_argument("--log-chunk", type=int, default=24, help="one chunk: 2^k points")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None, help="append JSON records here")
    a = ap.parse_args(argv)
    run(a.log_n, a.log_chunk, a.reps, a.out)


if __name__ == "__main__":
    main()
