"""jaxprove.memory: a step that runs out of device memory runs again within
half its budget; nothing else is retried."""
from __future__ import annotations

import jax
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
