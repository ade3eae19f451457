"""bench.common.InUseSampler: the largest bytes_in_use seen while a block
runs (the proofs' own device peak, which the allocator's process-wide peak
cannot give after a larger setup); host_rss_bytes."""
import threading
import time

import jax
import numpy as np

from bench import common
from bench.common import InUseSampler


class _Device:
    def __init__(self, stats):
        self.stats, self.calls = stats, 0
        self.lock = threading.Lock()

    def memory_stats(self):
        with self.lock:
            self.calls += 1
            return self.stats()


def test_sampler_keeps_the_largest_value_seen(monkeypatch):
    level = {"v": 100}
    dev = _Device(lambda: {"bytes_in_use": level["v"], "peak_bytes_in_use": 10**9})
    monkeypatch.setattr(jax, "devices", lambda *a: [dev])
    with InUseSampler(every=0.001) as s:
        for v in (500, 7000, 300):                  # a rise and a fall inside the block
            level["v"] = v
            time.sleep(0.05)
    assert s.max_bytes == 7000 and dev.calls > 3
    calls = dev.calls
    time.sleep(0.02)
    assert dev.calls == calls                       # the thread stopped with the block


def test_sampler_without_memory_stats_says_none(monkeypatch):
    monkeypatch.setattr(jax, "devices", lambda *a: [_Device(lambda: None)])
    with InUseSampler() as s:
        time.sleep(0.01)
    assert s.max_bytes is None


def test_host_rss_counts_touched_memory():
    """``host_rss_bytes``: the resident bytes grow by a touched 256 MiB
    buffer, and the peak is never below them."""
    rss0, _ = common.host_rss_bytes()
    x = np.ones(256 << 18, np.uint32)           # 256 MiB, written
    rss1, peak = common.host_rss_bytes()
    assert rss0 is not None and rss1 - rss0 >= 200 << 20 and peak >= rss1
    del x
