"""Shared benchmark plumbing: environment facts, timing, JSON records."""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

import jax

from ops.ptx import default_max_registers, default_ops


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=os.path.dirname(__file__), timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=os.path.dirname(__file__),
                               timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") or "unknown"
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("JAXPROVE_COMMIT", "unknown")


def environment() -> dict:
    d = jax.devices()[0]
    return {"device": getattr(d, "device_kind", str(d)), "platform": d.platform,
            "jax": jax.__version__, "python": platform.python_version(),
            "commit": os.environ.get("JAXPROVE_COMMIT") or git_commit(),
            "ptx": ",".join(default_ops()) or "off", "max_registers": default_max_registers(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "pinned_pool_gib": os.environ.get("XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB", "")}


def time_fn(fn, args, reps: int = 5, target_s: float = 0.05) -> dict:
    """Median/min/max seconds per call over ``reps`` repetitions after one
    warm-up; each repetition runs k back-to-back calls (k chosen so a
    repetition lasts about ``target_s``) and blocks once at the end."""
    jax.block_until_ready(fn(*args))
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    one = max(time.perf_counter() - t, 1e-6)
    k = max(1, min(100, int(target_s / one)))
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(k):
            out = None           # at most one result alive: a big one must fit twice otherwise
            out = fn(*args)
        jax.block_until_ready(out)
        ts.append((time.perf_counter() - t) / k)
    return {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts),
            "reps": reps, "calls_per_rep": k}


def emit(record: dict, path: str | None = None):
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def peak_memory_bytes():
    try:
        st = jax.devices()[0].memory_stats() or {}
        return st.get("peak_bytes_in_use")
    except Exception:  # noqa: BLE001 - not every backend has memory stats
        return None


def host_rss_bytes() -> tuple[int | None, int]:
    """(resident, peak resident) host bytes of this process: VmRSS and VmHWM
    from /proc/self/status (None and ``ru_maxrss`` where there is none)."""
    import resource
    try:
        with open("/proc/self/status") as f:
            kib = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in f)
                   if k in ("VmRSS", "VmHWM")}
        return kib["VmRSS"] * 1024, kib["VmHWM"] * 1024
    except (OSError, KeyError, ValueError):
        return None, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class InUseSampler:
    """The largest ``bytes_in_use`` of the first device seen while the block
    runs, polled every ``every`` seconds on a thread (``max_bytes``; None where
    the backend reports no memory stats).  The allocator's own peak
    (``peak_memory_bytes``) covers the whole process and cannot be reset, so
    it cannot tell a proof's peak from an earlier setup's; this can, at the
    price of sampling: a spike shorter than ``every`` may be missed.

        with InUseSampler() as s:
            ...proofs...
        s.max_bytes
    """

    def __init__(self, every: float = 0.002):
        self.every, self.max_bytes = every, None
        self._stop = threading.Event()

    def _poll(self):
        try:
            dev = jax.devices()[0]
            while True:
                st = dev.memory_stats() or {}
                if "bytes_in_use" not in st:
                    return
                self.max_bytes = max(self.max_bytes or 0, int(st["bytes_in_use"]))
                if self._stop.wait(self.every):
                    return
        except Exception:  # noqa: BLE001 - not every backend has memory stats
            return

    def __enter__(self):
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


def argv_command() -> str:
    return " ".join([os.path.basename(sys.executable)] + sys.argv)
