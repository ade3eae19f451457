"""Compiled programs kept across processes, found without tracing.

A restart with a warm persistent compilation cache still spends most of a
first proof in Python: JAX computes that cache's key from the *lowered*
program, so every program is traced and lowered again (bench/NOTES.md,
hypothesis 23: on the H200, 125 cache hits cost 99 s of tracing and 17 s of
lowering against 45 s of XLA for the 4 misses).  ``program`` is ``jax.jit``
plus a store of serialized executables
(``jax.experimental.serialize_executable``) under a key known *before*
tracing:

    key = sha256(module.qualname or the given name with its compiler
                 options, source hash of
                 jaxprove/ops/circuits and of the defining module, jax
                 version, platform and device kind, the device's id,
                 the environment of PROGRAM_ENV (XLA_FLAGS, JAXPROVE_PTX,
                 JAXPROVE_SPMV), x64, repr of the static arguments,
                 tree structure + (shape, dtype, weak type) of every
                 dynamic argument)

A call computes the key (microseconds), looks it up among the executables
this wrapper has loaded, then on disk (``DIR/<name>-<key>.exe``), and only
then traces, lowers and compiles, storing the result (written to a
temporary name, then renamed).  The store is ``$JAXPROVE_AOT`` (opt-in
until measured on the GPU).  Only fresh compiles are stored: an executable
that JAX's own persistent cache supplied re-serializes incompletely on
XLA:CPU, so it is used but not kept.  With a store the function body runs
(is traced) only on a miss.  Calls made while tracing (inside another
jitted function), with arguments on several devices, with static arguments
whose repr names a memory address, with keyword arguments, or whose
executable cannot be serialized go to the plain ``jax.jit``, as does
everything when the store is off.  A damaged or unloadable file, or a
stored executable that refuses this call's arguments, is compiled again and
replaced.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import re
import sys
import threading
from pathlib import Path
from typing import Callable, Sequence

import jax
import numpy as np

ENV = "JAXPROVE_AOT"
# environment variables that change what a traced program is (so they key it):
# XLA's flags, the PTX field operations (ops.ptx.default_ops) and the SpMV's
# fixed-width form (ops.spmv.default_form)
PROGRAM_ENV = ("XLA_FLAGS", "JAXPROVE_PTX", "JAXPROVE_SPMV")
log = logging.getLogger(__name__)
_PACKAGES = ("jaxprove", "ops", "circuits")


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over the .py files of the packages whose code is traced (path
    and bytes, sorted): any edit changes every key."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def module_hash(module: str) -> str:
    """sha256 of a module's source file ("" without one): programs defined
    outside the hashed packages (scripts, benchmarks, tests) change key when
    their own file changes."""
    f = getattr(sys.modules.get(module), "__file__", None)
    return hashlib.sha256(Path(f).read_bytes()).hexdigest() if f and os.path.exists(f) else ""


def store_dir() -> str | None:
    """Where executables are kept: ``$JAXPROVE_AOT`` (unset, "", "0" or
    "off": nowhere; opt-in until measured on the GPU)."""
    env = os.environ.get(ENV)
    return None if env is None or env.lower() in ("", "0", "off") else env


_hits = threading.local()


def _on_event(event: str, **_) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _hits.count = getattr(_hits, "count", 0) + 1


jax.monitoring.register_event_listener(_on_event)


def _compile(jitted, args):
    """(executable, whether it may be stored): not when JAX's persistent
    cache supplied it — on XLA:CPU such an executable serializes
    incompletely (loaded, it fails with "Function wrapped_iota not found")."""
    before = getattr(_hits, "count", 0)
    exe = jitted.lower(*args).compile()
    return exe, getattr(_hits, "count", 0) == before


def _leaf_sig(x):
    """(shape, dtype, weak type) of an array leaf; None for anything else."""
    if isinstance(x, (jax.Array, np.ndarray, np.generic)):
        return (tuple(x.shape), str(x.dtype), bool(getattr(x, "weak_type", False)))
    if isinstance(x, (bool, int, float, complex)):        # Python scalars: weakly typed
        return ((), type(x).__name__, True)
    return None


def _device(leaves):
    """The one device the array leaves live on (the default device if none
    is committed); None if they span several."""
    devs = set()
    for x in leaves:
        if isinstance(x, jax.Array):
            d = x.devices()
            if len(d) != 1:
                return None
            devs |= d
    if len(devs) > 1:
        return None
    return next(iter(devs)) if devs else jax.devices()[0]


def program_key(name: str, static: Sequence, dynamic: Sequence, module: str = "") -> str | None:
    """The store key of ``name`` (defined in ``module``) called with these
    static and dynamic arguments, or None when the call cannot be keyed (a
    tracer, several devices, a non-array leaf, a static repr naming an
    address or abbreviated with "...")."""
    leaves, tree = jax.tree_util.tree_flatten(list(dynamic))
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        return None
    sigs = [_leaf_sig(x) for x in leaves]
    if any(s is None for s in sigs):
        return None
    dev = _device(leaves)
    stat = repr(tuple(static))
    if dev is None or " at 0x" in stat or "..." in stat:
        return None
    parts = (name, source_hash(), module_hash(module), jax.__version__, dev.platform,
             getattr(dev, "device_kind", ""), dev.id, [os.environ.get(v, "") for v in PROGRAM_ENV],
             bool(getattr(jax.config, "jax_enable_x64", False)), stat, str(tree), sigs)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def program(fn: Callable | None = None, *, static_argnums: Sequence[int] = (),
            donate_argnums: Sequence[int] = (), name: str | None = None,
            compiler_options: dict | None = None):
    """``jax.jit(fn, static_argnums, donate_argnums, compiler_options)`` whose executables are
    kept in the ``JAXPROVE_AOT`` directory and reloaded by later processes
    without tracing (module docstring).  Usable as a decorator, with or
    without arguments.  ``name`` (default: module and qualified name of
    ``fn``) must identify the program together with the arguments: a
    function built at run time names what it closes over; a name holding an
    address, "...", "<locals>" or "<lambda>" is never stored.
    ``compiler_options`` (XLA debug options, e.g. ``ops.msm.COMMAND_BUFFER``)
    apply where the program is called at the top level, not inside another
    traced function.  ``.jitted`` is the plain jitted function,
    ``.compiler_options`` its options; ``.stats`` counts hits in the process
    (``mem``), loads from disk (``disk``) and compiles (``compiled``)."""
    if fn is None:
        return functools.partial(program, static_argnums=static_argnums,
                                 donate_argnums=donate_argnums, name=name,
                                 compiler_options=compiler_options)
    static_argnums = tuple(static_argnums)
    # the compiler options key the store with the name; JAX takes them on a top-level
    # jit only, so a call while tracing goes to a jit without them
    jitted = jax.jit(fn, static_argnums=static_argnums, donate_argnums=tuple(donate_argnums),
                     compiler_options=compiler_options)
    nested = jax.jit(fn, static_argnums=static_argnums, donate_argnums=tuple(donate_argnums)) \
        if compiler_options else jitted
    module = getattr(fn, "__module__", "") or ""
    name = name or f"{module}.{getattr(fn, '__qualname__', '<locals>')}"
    # a closure's qualified name does not say what it closed over: no store
    keyed = not any(x in name for x in (" at 0x", "...", "<locals>", "<lambda>"))
    ident = f"{name}{sorted(compiler_options.items())}" if compiler_options else name
    prefix = re.sub(r"[^A-Za-z0-9_.]", "_", name.rsplit(".", 1)[-1])[:48]
    loaded: dict = {}
    stats = {"mem": 0, "disk": 0, "compiled": 0}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if nested is not jitted and _tracing(args, kwargs):
            return nested(*args, **kwargs)
        directory = store_dir()
        if not directory or kwargs or not keyed:
            return jitted(*args, **kwargs)
        static = [args[i] for i in static_argnums if i < len(args)]
        dynamic = [a for i, a in enumerate(args) if i not in static_argnums]
        key = program_key(ident, static, dynamic, module)
        if key is None:
            return jitted(*args)
        exe = loaded.get(key)
        if exe is not None:
            stats["mem"] += 1
            return exe(*dynamic)
        path = Path(directory) / f"{prefix}-{key}.exe"
        exe = _load(path)
        if exe is not None:
            try:
                out = exe(*dynamic)            # refused before it runs if it does not fit
            except Exception as e:  # noqa: BLE001 - a stored executable this process cannot run
                log.warning("aot: %s refused (%s); compiling it again", path.name, e)
            else:
                stats["disk"] += 1
                loaded[key] = exe
                return out
        exe, fresh = _compile(jitted, args)
        stats["compiled"] += 1
        if fresh:
            _store(path, exe)
        loaded[key] = exe
        return exe(*dynamic)

    call.jitted = jitted
    call.compiler_options = compiler_options
    call.stats = stats
    call.lower = jitted.lower
    return call


def _tracing(args, kwargs) -> bool:
    """Whether any argument is a tracer (the call is inside another traced function)."""
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs)))


def _load(path: Path):
    """The executable stored at path, or None (absent, damaged, or not
    loadable here)."""
    from jax.experimental import serialize_executable as se
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data, in_tree, out_tree = pickle.loads(blob)
        return se.deserialize_and_load(data, in_tree, out_tree)
    except Exception:  # noqa: BLE001 - a damaged or foreign file: compile again
        return None


def _store(path: Path, exe) -> bool:
    """Serialize exe to path; False (nothing written) if it cannot be."""
    from jax.experimental import serialize_executable as se
    try:
        blob = pickle.dumps(se.serialize(exe))
    except Exception:  # noqa: BLE001 - e.g. closed-over constants: not serializable
        return False
    from jaxprove.atomic import write_bytes          # stdlib only: no import cycle
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, blob)
    return True
