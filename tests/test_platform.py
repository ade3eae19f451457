"""Where a computation runs, decided at trace time (``ops.platform``): on a
GPU machine a computation placed on the host CPU traces only the CPU form of
its kernels (session 14: tracing the Pallas forms of the engine's host-CPU
verification took 243 s for the IC sum's MSM and 86 s for the pairing)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ops import platform as P
from ops.field import Fr


@pytest.fixture
def gpu_machine(monkeypatch):
    """Simulate a process with a CUDA backend that is the default."""
    monkeypatch.setattr(P, "has_cuda", lambda: True)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")


def test_platform_follows_placement(gpu_machine):
    cpu = jax.devices("cpu")[0]
    on_cpu = jax.device_put(jnp.zeros(3, jnp.uint32), cpu)
    assert P.platform() == "gpu" and P.cuda_possible()
    assert P.platform(np.zeros(3)) == "gpu"                       # host data says nothing
    assert P.platform(on_cpu) == "cpu" and not P.cuda_possible(on_cpu)
    assert P.platform([None, {"x": on_cpu}]) == "cpu"
    with jax.default_device(cpu):
        assert P.platform() == "cpu" and not P.cuda_possible()
    with jax.default_device("cpu"):
        assert not P.cuda_possible()
    with jax.default_device("gpu"):
        assert P.cuda_possible()


def test_cpu_form_is_dropped_only_when_placed_on_a_gpu(gpu_machine):
    """Without a placement a function jitted once may still run on
    committed CPU inputs, so both forms stay; a GPU context (the engine's
    workers) drops the CPU form."""
    assert P.cpu_possible()
    with jax.default_device("gpu"):
        assert not P.cpu_possible() and P.cuda_possible()
    with jax.default_device(jax.devices("cpu")[0]):
        assert P.cpu_possible() and not P.cuda_possible()


def test_by_platform_traces_what_can_run(gpu_machine):
    """Both forms and a lowering-time choice without a placement; one form
    where the placement decides."""
    x = jnp.ones(4, jnp.uint32)

    def forms():
        return str(jax.make_jaxpr(lambda x: P.by_platform(
            x, default=lambda x: x + jnp.uint32(1), cuda=lambda x: x * jnp.uint32(3)))(x))
    both = forms()
    assert "platform_index" in both and "add" in both and "mul" in both
    with jax.default_device("gpu"):
        gpu = forms()
    assert "platform_index" not in gpu and "mul" in gpu and "add" not in gpu
    with jax.default_device(jax.devices("cpu")[0]):
        cpu = forms()
    assert "platform_index" not in cpu and "add" in cpu and "mul" not in cpu


def test_no_cuda_means_cpu_form(monkeypatch):
    monkeypatch.setattr(P, "has_cuda", lambda: False)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert not P.cuda_possible()


def _kernel_forms(fn, *args):
    """How many Pallas kernels the traced program holds."""
    return str(jax.make_jaxpr(fn)(*args)).count("pallas_call")


def test_placed_on_cpu_traces_no_kernel(gpu_machine):
    """A field multiplication traced on a (simulated) GPU machine holds its
    Pallas kernel beside the CPU form; under a CPU default device it holds
    none (the old code traced both there too: this fails on it)."""
    x = jnp.asarray(Fr.from_int([3, 5]))
    mul = Fr._ew("mul", 2)                                        # a fresh, unjitted kernel
    assert _kernel_forms(mul, x, x) == 1
    with jax.default_device(jax.devices("cpu")[0]):
        assert _kernel_forms(mul, x, x) == 0
        got = jax.jit(mul)(x, x)
    assert [int(v) for v in Fr.to_int(got)] == [9, 25]


def test_kernel_traces_each_limb_routine_once(gpu_machine, monkeypatch):
    """Tracing a Pallas kernel traces each limb routine once per operand
    shape (``ops.field._traced_once``), not once per call: a G1 addition has
    a dozen products; tracing them all anew made the GPU's merged MSM take
    14.6 s to trace instead of 5.4 (bench/NOTES.md session 14).  The portable
    product (with PTX a product is one asm op, no limb routine to trace)."""
    import dataclasses

    from ops import limbs
    from ops.curve import G1 as G1_
    G1 = dataclasses.replace(G1_, config=dataclasses.replace(G1_.config, ptx=()))
    calls = []
    real = limbs.montgomery_mul

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(limbs, "montgomery_mul", counted)
    x = jnp.zeros((3, 12, 4), jnp.uint32)
    add = G1._ew("add", "PP", "P")                                # a fresh kernel
    assert _kernel_forms(add, x, x) == 1
    assert len(calls) == 1
