"""jaxprove.memory: a step that runs out of device memory runs again within
half its budget; nothing else is retried."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxprove import memory

OOM = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.80GiB"


def flaky(fits: int, seen: list, message: str = OOM):
    """A step that needs ``fits`` bytes: the device runs out above that."""
    def run(budget):
        seen.append(budget)
        if budget > fits:
            raise jax.errors.JaxRuntimeError(message)
        return budget
    return run


def test_halving_retries_out_of_memory_within_half_the_budget(caplog):
    seen = []
    assert memory.halving(flaky(300, seen), 1000, "a step") == 250
    assert seen == [1000, 500, 250]
    assert "a step ran out of device memory within 1000 bytes; again within 500" in caplog.text
    seen.clear()
    with pytest.raises(jax.errors.JaxRuntimeError, match="RESOURCE_EXHAUSTED"):
        memory.halving(flaky(100, seen), 1000, "a step")          # two halvings: not enough
    assert seen == [1000, 500, 250]
    seen.clear()
    assert memory.halving(flaky(100, seen), 1000, "a step", retries=4) == 62
    seen.clear()
    with pytest.raises(jax.errors.JaxRuntimeError, match="INTERNAL"):
        memory.halving(flaky(0, seen, "INTERNAL: something else"), 1000, "a step")
    assert seen == [1000]                                          # other errors: never again
    with pytest.raises(ValueError):
        memory.halving(lambda b: int("x"), 1000, "a step")


def test_halving_learns_the_budget_that_served():
    """With ``learned``: a halving that serves is recorded under its step's
    name and the next call starts there (one retry per circuit, not per
    proof); a first try that serves records nothing; a smaller budget than
    the learned one is kept; other steps are not affected."""
    seen, learned = [], {}
    assert memory.halving(flaky(300, seen), 1000, "h", learned=learned) == 250
    assert learned == {"h": 250} and seen == [1000, 500, 250]
    seen.clear()
    assert memory.halving(flaky(300, seen), 1000, "h", learned=learned) == 250
    assert seen == [250]                                    # no failed tries the second time
    assert memory.halving(flaky(300, seen), 100, "h", learned=learned) == 100
    assert memory.halving(flaky(300, seen), 1000, "spmv", learned=learned) == 250
    assert seen == [250, 100, 1000, 500, 250] and learned == {"h": 250, "spmv": 250}
    seen.clear()
    assert memory.halving(flaky(3000, seen), 1000, "check", learned=learned) == 1000
    assert "check" not in learned


def test_out_of_memory_is_the_runtime_error_only():
    assert memory.out_of_memory(jax.errors.JaxRuntimeError(OOM))
    assert not memory.out_of_memory(jax.errors.JaxRuntimeError("INTERNAL: no"))
    assert not memory.out_of_memory(MemoryError(OOM))


def test_host_fits_keeps_the_reserve(monkeypatch):
    """``host_fits``: n more bytes fit where the available memory less n is
    at least the reserve; an unknown host fits; this host reports a value."""
    have = memory.host_available()
    assert have is None or have > 0
    monkeypatch.setattr(memory, "host_available", lambda: 100)
    assert memory.host_fits(60, reserve=40) and not memory.host_fits(61, reserve=40)
    monkeypatch.setattr(memory, "host_available", lambda: None)
    assert memory.host_fits(1 << 60)


def test_pinned_pool_reads_xlas_variable_in_gib():
    """``pinned_pool_bytes``: XLA's cap, the variable's GiB; 64 GiB where it is
    unset or not an integer (as XLA reads it)."""
    v = memory.PINNED_POOL_VAR
    assert memory.pinned_pool_bytes({}) == 64 << 30
    assert memory.pinned_pool_bytes({v: "110"}) == 110 << 30
    assert memory.pinned_pool_bytes({v: "lots"}) == 64 << 30


def test_widen_pinned_pool_caps_the_pool_at_the_planned_pins_before_the_backend(monkeypatch,
                                                                               caplog):
    """``widen_pinned_pool``: before the backend starts, an unset cap becomes what
    the process plans to pin plus the reserve, in whole GiB rounded up, at least
    XLA's 64 and at most the host's share (the pool pins regions up to its cap:
    hypothesis 95); a value the user set stays, with a warning above the host's
    share; after the backend has started nothing changes (XLA read it then)."""
    v = memory.PINNED_POOL_VAR
    monkeypatch.setattr(memory, "_backend_started", lambda: False)
    env = {}                 # 68 GiB planned + 2 reserve: 70, well within 0.6 of 500
    assert memory.widen_pinned_pool(68 << 30, env, total=500 << 30) == 70 << 30
    assert env == {v: "70"}
    env = {}                 # a part of a GiB rounds up
    assert memory.widen_pinned_pool((68 << 30) + 1, env, total=500 << 30) == 71 << 30
    env = {}                 # the host's share bounds it: 0.6 of 125 GiB is 75
    assert memory.widen_pinned_pool(94 << 30, env, total=125 << 30) == 75 << 30
    assert env == {v: "75"}
    env = {}                 # a small plan keeps XLA's default, and sets nothing
    assert memory.widen_pinned_pool(1 << 30, env, total=500 << 30) == 64 << 30 and env == {}
    env = {}                 # no plan on a small host: the default within the host's share
    assert memory.widen_pinned_pool(None, env, total=32 << 30) == 19 << 30
    assert env == {v: "19"}
    env = {v: "80"}          # the user's value stays
    assert memory.widen_pinned_pool(200 << 30, env, total=500 << 30) == 80 << 30
    assert env == {v: "80"} and not caplog.records
    env = {v: "120"}         # ... with a warning where it exceeds the host's share
    assert memory.widen_pinned_pool(None, env, total=125 << 30) == 120 << 30
    assert env == {v: "120"} and "may lock 120 GiB of this host's 125 GiB" in caplog.text
    env, host = {}, memory.host_total()       # total None: this host's memory
    want = 64 if host is None else min(64, int(host * memory.PINNED_HOST_SHARE) >> 30)
    assert memory.widen_pinned_pool(None, env, total=None) == want << 30
    monkeypatch.setattr(memory, "_backend_started", lambda: True)
    env = {}
    assert memory.widen_pinned_pool(200 << 30, env, total=500 << 30) == 64 << 30 and env == {}
    jax.devices()                                # this process's backend has started
    monkeypatch.undo()
    assert memory._backend_started()


def test_pinned_room_is_the_cap_less_use_reserve_and_margin(monkeypatch):
    """``pinned_room``: None on a device without pinned host memory (the CPU);
    else the cap less what is pinned, the reserve and ``PINNED_RESERVE``,
    never below 0."""
    from ops import transfer
    dev = jax.devices()[0]
    assert memory.pinned_room(dev) is None
    monkeypatch.setattr(transfer, "device_pinned_sharding", lambda d, pinned=None: object())
    monkeypatch.setenv(memory.PINNED_POOL_VAR, "10")
    assert memory.pinned_room(dev, 3 << 30, in_use=1 << 30) == (6 << 30) - memory.PINNED_RESERVE
    assert memory.pinned_room(dev, 9 << 30, in_use=1 << 30) == 0


def test_pinned_in_use_counts_live_pinned_arrays():
    """``pinned_in_use``: the bytes of every live jax Array in pinned host
    memory, whoever holds it; a pageable array or a freed one is not
    counted."""
    from ops import transfer
    dev = jax.devices()[0]
    s = transfer.device_pinned_sharding(dev, pinned=True)
    if s is None:
        pytest.skip("no pinned_host memory kind on this device")
    before = memory.pinned_in_use()
    x = jax.device_put(np.arange(3000, dtype=np.uint32), s)
    y = jax.device_put(np.arange(5000, dtype=np.uint32), dev)      # device memory: not counted
    assert memory.pinned_in_use() == before + x.nbytes
    x.delete()
    assert memory.pinned_in_use() == before
    del y
