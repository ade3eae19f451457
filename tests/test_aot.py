"""ops.aot: executables stored by a key known before tracing, and
reloaded by another process without running (tracing) the function body."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ops import aot

ROOT = Path(__file__).resolve().parent.parent


def _counted():
    """A fresh aot program (as a new process would build it) and its trace count."""
    traced = []

    def affine(x, k, y):
        traced.append(1)
        return x * k + y

    affine.__qualname__ = "affine"           # the same store name for every fresh wrapper
    return aot.program(affine, static_argnums=(1,), donate_argnums=(0,)), traced


def test_off_by_default_is_plain_jit(monkeypatch, tmp_path):
    monkeypatch.delenv(aot.ENV, raising=False)
    assert aot.store_dir() is None
    monkeypatch.setenv(aot.ENV, "off")
    assert aot.store_dir() is None
    f, traced = _counted()
    x = jnp.arange(4, dtype=jnp.uint32)
    np.testing.assert_array_equal(f(x, 3, jnp.ones(4, jnp.uint32)), np.arange(4) * 3 + 1)
    assert f.stats == {"mem": 0, "disk": 0, "compiled": 0} and traced == [1]


def test_store_compiles_once_then_loads_without_tracing(monkeypatch, tmp_path):
    monkeypatch.setenv(aot.ENV, str(tmp_path))
    f, traced = _counted()
    y = jnp.ones(4, jnp.uint32)
    out = f(jnp.arange(4, dtype=jnp.uint32), 3, y)
    np.testing.assert_array_equal(out, np.arange(4) * 3 + 1)
    assert f.stats["compiled"] == 1 and len(traced) == 1
    files = list(tmp_path.glob("affine-*.exe"))
    assert len(files) == 1 and not list(tmp_path.glob(".*tmp*"))
    x = jnp.arange(4, dtype=jnp.uint32)
    f(x, 3, y)                                      # the same key: the loaded executable
    assert f.stats["mem"] == 1 and len(traced) == 1
    assert x.is_deleted()                           # donation kept by the executable
    # a fresh wrapper (another process) loads it from disk; the body never runs
    g, traced2 = _counted()
    np.testing.assert_array_equal(g(jnp.arange(4, dtype=jnp.uint32), 3, y), out)
    assert g.stats == {"mem": 0, "disk": 1, "compiled": 0} and traced2 == []
    # another static value, shape or dtype: another key, compiled and stored
    np.testing.assert_array_equal(g(jnp.arange(4, dtype=jnp.uint32), 5, y), np.arange(4) * 5 + 1)
    g(jnp.arange(8, dtype=jnp.uint32), 3, jnp.ones(8, jnp.uint32))
    g(jnp.arange(4, dtype=jnp.int32), 3, jnp.ones(4, jnp.int32))
    assert g.stats["compiled"] == 3 and len(list(tmp_path.glob("affine-*.exe"))) == 4


@pytest.mark.parametrize("var", aot.PROGRAM_ENV)
def test_program_settings_in_the_environment_key_the_store(monkeypatch, var):
    """A setting that changes what a traced program is (XLA's flags, the PTX
    operations, the SpMV's form) changes the key, so a program stored under
    one setting is never loaded under another."""
    x = jnp.arange(4, dtype=jnp.uint32)
    monkeypatch.delenv(var, raising=False)
    before = aot.program_key("affine", [3], [x])
    monkeypatch.setenv(var, "other")
    assert before is not None and aot.program_key("affine", [3], [x]) != before


def test_damaged_file_is_compiled_again(monkeypatch, tmp_path):
    monkeypatch.setenv(aot.ENV, str(tmp_path))
    f, _ = _counted()
    f(jnp.arange(4, dtype=jnp.uint32), 3, jnp.ones(4, jnp.uint32))
    (path,) = tmp_path.glob("affine-*.exe")
    path.write_bytes(path.read_bytes()[:100])
    g, traced = _counted()
    out = g(jnp.arange(4, dtype=jnp.uint32), 3, jnp.ones(4, jnp.uint32))
    np.testing.assert_array_equal(out, np.arange(4) * 3 + 1)
    assert g.stats["compiled"] == 1 and traced == [1]
    h, traced = _counted()                          # replaced by a good one
    h(jnp.arange(4, dtype=jnp.uint32), 3, jnp.ones(4, jnp.uint32))
    assert h.stats["disk"] == 1 and traced == []


def test_an_executable_from_the_xla_cache_is_not_stored(monkeypatch, tmp_path):
    """JAX's persistent cache supplied the executable (a cache-hit event
    during the compile): used, not stored (it would not load whole)."""
    monkeypatch.setenv(aot.ENV, str(tmp_path))
    f, traced = _counted()
    real = f.jitted.lower

    class Lowered:
        def __init__(self, low):
            self.low = low

        def compile(self):
            jax.monitoring.record_event("/jax/compilation_cache/cache_hits")
            return self.low.compile()

    monkeypatch.setattr(f.jitted, "lower", lambda *a: Lowered(real(*a)), raising=False)
    out = f(jnp.arange(4, dtype=jnp.uint32), 3, jnp.ones(4, jnp.uint32))
    np.testing.assert_array_equal(out, np.arange(4) * 3 + 1)
    assert f.stats["compiled"] == 1 and not list(tmp_path.iterdir())


def test_a_stored_executable_that_refuses_the_call_is_replaced(monkeypatch, tmp_path):
    monkeypatch.setenv(aot.ENV, str(tmp_path))

    def refuses(*args):
        raise TypeError("compiled for another device")

    monkeypatch.setattr(aot, "_load", lambda path: refuses)
    f, traced = _counted()
    out = f(jnp.arange(4, dtype=jnp.uint32), 3, jnp.ones(4, jnp.uint32))
    np.testing.assert_array_equal(out, np.arange(4) * 3 + 1)
    assert f.stats == {"mem": 0, "disk": 0, "compiled": 1} and traced == [1]
    assert len(list(tmp_path.glob("affine-*.exe"))) == 1


def test_calls_that_cannot_be_keyed_go_to_jit(monkeypatch, tmp_path):
    monkeypatch.setenv(aot.ENV, str(tmp_path))
    f, traced = _counted()

    @jax.jit
    def outer(x):                                   # inside a trace: tracers, inlined
        return f(x, 2, x)

    np.testing.assert_array_equal(outer(jnp.arange(3.0)), np.arange(3.0) * 3)
    f(jnp.arange(3.0), 2, y=jnp.ones(3))            # keyword arguments
    class Two:                                      # a static whose repr names an address
        def __rmul__(self, x):
            return x * 2

    f(jnp.arange(3.0), Two(), jnp.ones(3))
    assert f.stats == {"mem": 0, "disk": 0, "compiled": 0} and not list(tmp_path.iterdir())
    assert aot.program_key("n", [], [jnp.ones(2)]) != aot.program_key("n", [], [jnp.ones(3)])
    assert aot.program_key("n", [], [object()]) is None


def test_another_process_loads_without_tracing(tmp_path):
    """The real use: a second interpreter finds the first one's executable
    (pytree arguments, a static curve and config as the MSM programs take)."""
    script = textwrap.dedent("""
        import functools, sys
        import jax.numpy as jnp, numpy as np
        from ops import aot
        traced = []

        @functools.partial(aot.program, static_argnums=(0,))
        def scale(k, pair):
            traced.append(1)
            a, b = pair
            return {"s": a * k + b}

        out = scale(3, (jnp.arange(5.0), np.ones(5, np.float32)))["s"]
        print(len(traced), scale.stats["disk"], float(out.sum()))
    """)
    env = dict(os.environ, JAXPROVE_AOT=str(tmp_path), JAX_PLATFORMS="cpu",
               PYTHONPATH=str(ROOT))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=300, cwd=tmp_path) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert runs[0].stdout.split() == ["1", "0", "35.0"]
    assert runs[1].stdout.split() == ["0", "1", "35.0"]


def test_witness_programs_are_keyed_by_circuit_and_static_arguments(monkeypatch, tmp_path):
    """circuits.cs.witness through the store: the cubic circuit at k = 2 and
    k = 3 are two programs (their own files), a new process's builder loads
    them without tracing, and a circuit defined in a function (a closure)
    is never stored."""
    from circuits import cs as C
    from circuits.examples import cubic, cubic_public
    from ops.field import Fr
    monkeypatch.setenv(aot.ENV, str(tmp_path))
    C._witness_fn.cache_clear()
    x = {k: jnp.asarray(Fr.from_int(np.arange(1, 2 * k + 1, dtype=object).reshape(2, k)))
         for k in (2, 3)}

    def public(w, k):
        return [int(v) for v in Fr.to_int(np.asarray(w[:, 0, 1:1 + k]))]

    for k in (2, 3):
        assert public(C.witness(cubic, x[k], k, in_axes=1), k) == cubic_public(range(1, k + 1),
                                                                               Fr.p)
    assert len(list(tmp_path.glob("cubic*.exe"))) == 2
    C._witness_fn.cache_clear()                    # as a new process
    f = C.witness_fn(cubic, 3, in_axes=1)
    assert public(f(x[3])[0], 3) == cubic_public(range(1, 4), Fr.p)
    assert f.stats == {"mem": 0, "disk": 1, "compiled": 0}

    def local(cs, x, k):
        return cubic(cs, x, k)

    g = C.witness_fn(local, 2, in_axes=1)
    g(x[2])
    assert g.stats == {"mem": 0, "disk": 0, "compiled": 0}
    C._witness_fn.cache_clear()


@pytest.mark.gpu
def test_pallas_kernel_executable_round_trips_on_the_gpu(tmp_path):
    """An executable holding a Pallas (Triton) kernel, Fr multiplication,
    stored by one process and loaded by the next without tracing."""
    script = textwrap.dedent("""
        import jax.numpy as jnp, numpy as np
        from ops import aot
        from ops.field import Fr
        traced = []

        @aot.program
        def square(x):
            traced.append(1)
            return Fr.mul(x, x)

        x = jnp.asarray(Fr.from_int(np.arange(1, 1025, dtype=object)))
        got = [int(v) for v in Fr.to_int(np.asarray(square(x)))]
        assert got == [(i * i) % Fr.p for i in range(1, 1025)]
        print(len(traced), square.stats["disk"])
    """)
    env = dict(os.environ, JAXPROVE_AOT=str(tmp_path), PYTHONPATH=str(ROOT))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=600, cwd=tmp_path) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert [r.stdout.split() for r in runs] == [["1", "0"], ["0", "1"]]


@pytest.mark.parametrize("store", [False, True])
def test_compiler_options_apply_at_the_top_level_only(monkeypatch, tmp_path, store):
    """A program with compiler options (``ops.msm.COMMAND_BUFFER``) runs with them when
    called directly, stored or not, and inside another jitted function without them (JAX
    refuses options on a nested jit)."""
    if store:
        monkeypatch.setenv(aot.ENV, str(tmp_path))
    else:
        monkeypatch.delenv(aot.ENV, raising=False)

    def double(x):
        return x * 2

    double.__qualname__ = "double_with_options"
    f = aot.program(double, compiler_options={"xla_gpu_enable_command_buffer": "WHILE"})
    x = jnp.arange(4, dtype=jnp.uint32)
    np.testing.assert_array_equal(f(x), np.arange(4) * 2)
    np.testing.assert_array_equal(jax.jit(lambda y: f(y) + 1)(x), np.arange(4) * 2 + 1)
    assert f.stats["compiled"] == (1 if store else 0)
    bad = aot.program(double, compiler_options={"xla_gpu_enable_command_buffer": "NOT_A_KIND"})
    with pytest.raises(Exception, match="not a valid enum value"):
        bad(x)                                      # the options reach XLA
