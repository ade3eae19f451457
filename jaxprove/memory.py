"""Device-memory budgets that hold under estimation error.

A program's device bytes are planned from byte counts (``pce.block_bytes``,
``ops.msm`` working sets, ``ops.four_step.step_bytes``); the counts miss what
the compiler adds (padding copies, scratch, a sort buffer 25% above its
share: bench/NOTES.md sessions 11 and 24).  ``halving`` runs a step within
a budget and, where the device runs out of memory, again within half of it,
so a plan that is a little off costs time, not the proof.  ``host_fits``
asks the host the same question before an optional host allocation, and
``pinned_room`` the pool of pinned host memory XLA keeps on a GPU.
"""
from __future__ import annotations

import logging
import os
from typing import Callable, TypeVar

import jax

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRIES = 2          # halvings after running out of device memory
# host bytes kept free for what a proof's runtime allocates beyond its counted arrays
# (pinned staging of block results, compiles): the 32GiB 16 GB mode's host OOM kill had
# ~15-19 GiB unaccounted in all (bench/NOTES.md session 25), part of it already resident
HOST_RESERVE = 8 << 30
# XLA's pool of pinned host memory on a GPU (memory kind pinned_host): a BFC allocator
# whose cap XLA reads once, when the backend starts, from this variable (GiB; 64 by
# default, below a 32GiB PoRep's pinned key, row blocks and proof vectors, 66 GiB:
# hypothesis 92).  The pool grows by regions that double, each as large as the cap
# allows (min(2x the last region, cap - pinned)), and pins a region whole: a cap of the
# host's size let it pin a 61 GiB region beside 64 GiB of pinned key and blocks, until
# the kernel killed the process (session 48, hypothesis 95).  So the cap is a bound on
# what may be locked, set to what the process plans to pin (``widen_pinned_pool``)
PINNED_POOL_VAR = "XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB"
PINNED_POOL_DEFAULT_GIB = 64
# at most this share of the host's memory may be pinned: the rest is the process's pageable
# memory (the 32GiB 16 GB mode's was ~18 GiB beside the pinned key, plus the setup's and the
# recorded circuit's peaks before it: session 48) and the system's
PINNED_HOST_SHARE = 0.6
PINNED_RESERVE = 2 << 30     # pinned bytes left to what a proof stages beyond its plan


def out_of_memory(e: BaseException) -> bool:
    """Whether a JAX runtime error is the device running out of memory."""
    return isinstance(e, jax.errors.JaxRuntimeError) and "RESOURCE_EXHAUSTED" in str(e)


def halving(run: Callable[[int], T], budget: int, what: str, retries: int = RETRIES,
            learned: dict | None = None) -> T:
    """``run(budget)``; where it runs out of device memory, ``run(budget // 2)``
    (a logged warning), at most ``retries`` times; the last failure, and any
    other error, propagates.  ``run`` must leave its inputs as they were when
    it fails (each try starts over).  The result is made ready inside the
    try (``jax.block_until_ready``), so an asynchronous failure is caught.

    ``learned``: budgets that served, by ``what`` (a dict the caller keeps
    for one circuit on one device): the step starts within the smaller of
    ``budget`` and the one that last served it, and a halving that serves
    is recorded there, so a plan that is off costs one retry per circuit,
    not one per proof (the 32GiB 16 GB mode's out-of-core h ran out at 9
    GiB and redid its SpMV: ~30 s a proof, bench/NOTES.md session 27)."""
    if learned is not None:
        budget = min(budget, learned.get(what, budget))
    for retry in range(retries + 1):
        try:
            out = jax.block_until_ready(run(budget))
        except jax.errors.JaxRuntimeError as e:
            if not out_of_memory(e) or retry == retries or budget < 2:
                raise
            log.warning("%s ran out of device memory within %d bytes; again within %d",
                        what, budget, budget // 2)
            budget //= 2
            continue
        if retry and learned is not None:
            learned[what] = budget
        return out
    raise AssertionError("unreachable")


def host_available() -> int | None:
    """The host's available memory in bytes (MemAvailable, /proc/meminfo:
    free plus what the kernel can reclaim), None where it cannot tell."""
    return _meminfo("MemAvailable")


def host_total() -> int | None:
    """The host's memory in bytes (MemTotal, /proc/meminfo), None where it
    cannot tell."""
    return _meminfo("MemTotal")


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_fits(nbytes: int, reserve: int = HOST_RESERVE, available: int | None = None) -> bool:
    """Whether ``nbytes`` more of host memory leave ``reserve`` of
    ``available`` (default ``host_available()``) free (True where the host
    cannot tell: the allocation is then the caller's default)."""
    have = host_available() if available is None else available
    return have is None or have - nbytes >= reserve


def pinned_pool_bytes(environ=None) -> int:
    """The cap of XLA's pinned host pool on a GPU: ``PINNED_POOL_VAR`` GiB
    (XLA's default, 64, where it is unset or not an integer)."""
    v = (os.environ if environ is None else environ).get(PINNED_POOL_VAR, "")
    try:
        return int(v) << 30
    except ValueError:
        return PINNED_POOL_DEFAULT_GIB << 30


def widen_pinned_pool(pinned: int | None = None, environ=None,
                      total: int | None = None) -> int:
    """For a process's entry point, before its JAX backend starts: where
    ``PINNED_POOL_VAR`` is unset, set the pinned pool's cap to what the
    process plans to pin, ``pinned`` bytes, plus ``PINNED_RESERVE``, in
    whole GiB (at least XLA's default, 64 GiB; None: that), never above
    ``PINNED_HOST_SHARE`` of the host's memory (``total``, default
    ``host_total()``) so that the pageable rest has room: the pool pins
    regions up to its cap whether or not they are used (hypothesis 95), so a
    cap is what may be locked, not a limit nothing reaches.  What does not
    fit the cap stays pageable (``groth16.pin_key``'s room).  A value
    already set is the user's and stays (a warning where it exceeds the
    host's share); once the backend has started, nothing changes (XLA read
    the variable then).  Returns the cap in bytes."""
    env = os.environ if environ is None else environ
    if _backend_started():
        return pinned_pool_bytes(env)
    total = host_total() if total is None else total
    share = None if total is None else int(total * PINNED_HOST_SHARE) >> 30
    if PINNED_POOL_VAR in env:
        cap = pinned_pool_bytes(env)
        if share is not None and cap >> 30 > share:
            log.warning("%s=%s: the pinned pool may lock %d GiB of this host's %d GiB, more "
                        "than %d%% of it; its regions are pinned whole (hypothesis 95), so "
                        "the process may be killed for want of pageable memory",
                        PINNED_POOL_VAR, env[PINNED_POOL_VAR], cap >> 30, total >> 30,
                        round(100 * PINNED_HOST_SHARE))
        return cap
    want = PINNED_POOL_DEFAULT_GIB << 30 if pinned is None else pinned + PINNED_RESERVE
    gib = max(-(-want >> 30), PINNED_POOL_DEFAULT_GIB)         # whole GiB, rounded up
    if share is not None:
        gib = min(gib, share)
    if gib != PINNED_POOL_DEFAULT_GIB:
        env[PINNED_POOL_VAR] = str(max(gib, 1))
    return pinned_pool_bytes(env)


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):      # another JAX: assume it has
        return True


def pinned_in_use() -> int:
    """Bytes this process holds in pinned host memory now: every live jax
    Array of memory kind ``pinned_host`` (held keys' pieces, prepared row
    blocks, a running proof's fetched vectors), whoever holds it: the pool
    is the process's, shared by every circuit and device."""
    from ops import transfer
    return sum(int(x.nbytes) for x in jax.live_arrays()
               if getattr(x.sharding, "memory_kind", None) == transfer.PINNED)


def pinned_room(device, reserve: int = 0, in_use: int = 0) -> int | None:
    """Pinned host bytes left to pin on ``device`` (its pool's cap,
    ``pinned_pool_bytes``, less ``in_use`` pinned already and ``reserve``
    kept for what is pinned later, less ``PINNED_RESERVE``; at least 0),
    or None where the device has no pinned host memory (the CPU)."""
    from ops import transfer
    if transfer.device_pinned_sharding(device) is None:
        return None
    return max(0, pinned_pool_bytes() - in_use - reserve - PINNED_RESERVE)


def device_stats(device) -> dict | None:
    """``device.memory_stats()`` where it reports the allocator's pool
    (``bytes_limit``, and ``bytes_in_use``), None where the backend does not
    say (the CPU)."""
    try:
        st = device.memory_stats()
    except Exception:  # noqa: BLE001 - backends without memory stats
        return None
    return st if st and "bytes_limit" in st else None


def device_capacity(device) -> int | None:
    """The most bytes JAX's allocator may hold on ``device`` (its pool's
    ``bytes_limit``: e.g. 75% of a GPU's memory by default), None where the
    backend does not say (the CPU)."""
    st = device_stats(device)
    return None if st is None else int(st["bytes_limit"])


def gib(n: int) -> str:
    """n bytes as GiB with one decimal, for messages."""
    return f"{n / 2**30:.1f} GiB"
