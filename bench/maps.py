"""Memory mappings per compiled MSM program on the CPU backend.

XLA:CPU's JIT maps three one-page regions (r-x, r--, rw-) per compiled
kernel, and an MSM program in Pallas interpret mode holds hundreds of
kernels.  A process may hold at most ``vm.max_map_count`` mappings (65,530
by default); past it the next compile aborts inside
``backend_compile_and_load`` (bench/NOTES.md, session 49: why
tests/conftest.py drops compiled programs near half the limit).

    python3 -m bench.maps [--windows 4 5] [--points 16]

prints one JSON record: the mappings after each MSM compile, and after
``jax.clear_caches()``.  Run it with ``XLA_FLAGS=...`` to see whether a
flag changes the count.
"""
from __future__ import annotations

import argparse
import collections
import gc
import random
import sys

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import emit, environment


def mappings() -> int | None:
    """Lines of /proc/self/maps: the process's memory mappings (None off
    Linux)."""
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def map_limit() -> int | None:
    """``vm.max_map_count``: the most mappings a process may hold (None off
    Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def by_permission() -> dict:
    """Anonymous mappings by permission, e.g. {"r-xp": 1259, ...}."""
    c = collections.Counter()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6:
                c[parts[1]] += 1
    return dict(c)


def main(argv=None) -> int:
    from ops import msm as M
    from ops.curve import G1
    from ops.field import Fr
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, nargs="+", default=[4, 5])
    ap.add_argument("--points", type=int, default=16)
    a = ap.parse_args(argv)
    if mappings() is None:
        print("bench.maps: needs Linux's /proc", file=sys.stderr)
        return 2
    from py_ecc import optimized_bls12_381 as ob      # the test oracle: random bases
    rng = random.Random(7)
    pts = [ob.normalize(ob.multiply(ob.G1, rng.randrange(1, 1 << 64))) for _ in range(a.points)]
    g = G1.from_affine_ints([(int(x), int(y)) for x, y in pts])
    start, after = mappings(), []
    for w in a.windows:
        cfg = M.MSMConfig(window=w, lanes=8, small_lanes=4, min_steps=4)
        ks = np.array([rng.randrange(1 << 64) for _ in range(a.points)], dtype=object)
        s = jnp.asarray(Fr.from_int(ks))[:, None, :]
        jax.block_until_ready(M.msm(G1, g, s, cfg))
        after.append(mappings() - start)
    held = mappings() - start
    perms = by_permission()
    jax.clear_caches()
    gc.collect()
    emit({"case": "maps.msm", "windows": a.windows, "points": a.points,
          "mappings_after_each": after, "anonymous_by_permission": perms,
          "freed_by_clear_caches": held - (mappings() - start), "map_limit": map_limit(),
          **environment()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
