"""JAX's persistent compilation cache, switched on explicitly by entry points.

Pallas curve kernels take 10-20 s to compile on an H200 (bench/NOTES.md); the
cache keeps the compiled executables across processes, so a machine pays that
once (a warm restart still traces and lowers every program: bench/NOTES.md,
hypothesis 23; ``ops.aot`` with ``JAXPROVE_AOT`` skips that too).  Importing
jaxprove never changes JAX's configuration: scripts call
``enable_compilation_cache()`` themselves.
"""
from __future__ import annotations

import os

import jax

DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jaxprove", "xla")


def enable_compilation_cache(path: str | None = None) -> str:
    """Turn on the persistent cache at ``path`` (default: $JAXPROVE_CACHE or
    ~/.cache/jaxprove/xla) for every compile, however short; returns the path."""
    path = path or os.environ.get("JAXPROVE_CACHE") or DEFAULT_DIR
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
