"""Where a computation runs, decided while it is traced.

Every kernel in ``ops`` has two forms: a Pallas kernel for CUDA and an XLA
form for everything else (the CPU).  In a process with a CUDA backend the
choice is made at lowering time (``lax.platform_dependent``), which traces
*both* forms; tracing the Pallas form of a large formula costs seconds to
minutes (the engine's verification on the host CPU of an H200 machine: 243 s
of tracing for the IC sum's MSM, 86 s for the pairing; bench/NOTES.md,
session 14).  When the computation is known to run on the CPU -- a
``jax.default_device`` CPU context, or committed CPU arrays -- only the CPU
form is traced.

``jax_default_device`` is part of JAX's jit key and trace context, so a
function traced under a CPU context is never reused for the GPU (or the
other way round).
"""
from __future__ import annotations

import functools

import jax


@functools.lru_cache(maxsize=None)
def has_cuda() -> bool:
    """Whether this process has a CUDA backend (else tracing the Pallas
    branch of every kernel is wasted work: ~90% of the CPU trace time)."""
    try:
        return len(jax.devices("cuda")) > 0
    except RuntimeError:
        return False


def platform(*like) -> str:
    """The platform a computation on ``like`` (pytrees of arrays) runs on:
    the device of the first committed concrete array among them (numpy
    arrays and tracers say nothing), else the default device (a
    ``jax.default_device`` context: a device or a platform name), else the
    default backend.  "gpu" for CUDA and ROCm devices."""
    for x in jax.tree_util.tree_leaves(like):
        if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
            return _name(next(iter(x.devices())).platform)
    dev = jax.config.jax_default_device
    if isinstance(dev, str):                         # a platform name: "cpu", "cuda", ...
        return _name(dev.split(":")[0])
    if dev is not None:
        return _name(dev.platform)
    return _name(jax.default_backend())


def _name(p: str) -> str:
    p = p.lower()
    return "gpu" if p in ("cuda", "rocm", "gpu") else p


def cuda_possible(*like) -> bool:
    """Whether a computation traced now (on ``like``) may be lowered for
    CUDA: the process has a CUDA backend and the computation is not placed on
    another platform (``platform``).  False: trace the CPU form only."""
    return has_cuda() and platform(*like) == "gpu"
