"""Where a computation runs, decided while it is traced.

Every kernel in ``ops`` has two forms: a Pallas kernel for CUDA and an XLA
form for everything else (the CPU).  In a process with a CUDA backend the
choice is made at lowering time (``lax.platform_dependent``), which traces
*both* forms; tracing the Pallas form of a large formula costs seconds to
minutes (the engine's verification on the host CPU of an H200 machine: 243 s
of tracing for the IC sum's MSM, 86 s for the pairing; bench/NOTES.md,
session 14).  When the computation is known to run on the CPU -- a
``jax.default_device`` CPU context, or committed CPU arrays -- only the CPU
form is traced; when it is explicitly placed on a GPU, only the CUDA form
(``by_platform``).

``jax_default_device`` is part of JAX's jit key and trace context, so a
function traced under a CPU context is never reused for the GPU (or the
other way round).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable

import jax
from jax import lax


@functools.lru_cache(maxsize=None)
def has_cuda() -> bool:
    """Whether this process has a CUDA backend (else tracing the Pallas
    branch of every kernel is wasted work: ~90% of the CPU trace time)."""
    try:
        return len(jax.devices("cuda")) > 0
    except RuntimeError:
        return False


def _placed(like) -> str | None:
    """The platform a computation on ``like`` is explicitly placed on: the
    device of the first committed concrete array among them (numpy arrays
    and tracers say nothing), else the default device (a
    ``jax.default_device`` context: a device or a platform name); None when
    neither says."""
    for x in jax.tree_util.tree_leaves(like):
        if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
            return _name(next(iter(x.devices())).platform)
    dev = jax.config.jax_default_device
    if isinstance(dev, str):                         # a platform name: "cpu", "cuda", ...
        return _name(dev.split(":")[0])
    if dev is not None:
        return _name(dev.platform)
    return None


def platform(*like) -> str:
    """The platform a computation on ``like`` (pytrees of arrays) runs on:
    where it is placed (``_placed``), else the default backend.  "gpu" for
    CUDA and ROCm devices."""
    return _placed(like) or _name(jax.default_backend())


def _name(p: str) -> str:
    p = p.lower()
    return "gpu" if p in ("cuda", "rocm", "gpu") else p


def cuda_possible(*like) -> bool:
    """Whether a computation traced now (on ``like``) may be lowered for
    CUDA: the process has a CUDA backend and the computation is not placed on
    another platform (``platform``).  False: trace the CPU form only."""
    return has_cuda() and platform(*like) == "gpu"


def cpu_possible(*like) -> bool:
    """Whether a computation traced now may be lowered for a platform other
    than CUDA: false only when it is explicitly placed on a GPU (a
    ``jax.default_device`` GPU context, as the engine's workers use, or
    committed GPU arrays).  Without a placement a function jitted once may
    still run on committed CPU inputs, so both forms are traced."""
    return _placed(like) != "gpu"


def by_platform(*args, default: Callable, cuda: Callable, like=None):
    """``cuda(*args)`` where the computation is lowered for CUDA, else
    ``default(*args)``: only the form that can run is traced when the
    placement decides it (``cuda_possible``, ``cpu_possible``), else the
    choice is made at lowering time (``lax.platform_dependent``, which
    traces both).  ``like``: what to judge the placement by (default args)."""
    like = args if like is None else like
    if not cuda_possible(*like):
        return default(*args)
    if not cpu_possible(*like):
        return cuda(*args)
    return lax.platform_dependent(*args, default=default, cuda=cuda)


def placed_like(x):
    """A context that places the computations inside it where ``x`` (an
    array) lives: ``jax.default_device`` of its device, so only the forms
    that can run there are traced (``by_platform``).  A no-op when a default
    device is already set (the caller placed it: the engine's workers), or
    when x is not an array on exactly one device."""
    if jax.config.jax_default_device is not None or not isinstance(x, jax.Array) \
            or isinstance(x, jax.core.Tracer):
        return contextlib.nullcontext()
    devs = x.devices()
    if len(devs) != 1:
        return contextlib.nullcontext()
    return jax.default_device(next(iter(devs)))
