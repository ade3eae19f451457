"""Device -> host copies at the link's rate.

JAX's plain fetch of a GPU array (``np.asarray``, after or without
``copy_to_host_async``) moved 1.3–1.6 GB/s on the H200 host, against
47–55 GB/s for one ``jax.device_put`` of the same array into ``pinned_host``
memory (``python3 -m bench.host_transfer``, bench/results/
host_transfer_h200_run1.jsonl, 2^23 and 2^27 Fr vectors; the plain fetch
stages through a small pinned buffer and a pageable copy, jax issue 21438).
The out-of-core sweeps fetch every block they compute, so that fetch set
their rate (bench/NOTES.md, hypothesis 38).

``start_fetch(x)`` starts x's copy to the host and returns the array to
read: where x lives on a GPU (or ``pinned=True`` and the device has the
memory kind), a copy of x in ``pinned_host`` memory, whose ``np.asarray``
is a view of the pinned buffer; otherwise x itself with its
``copy_to_host_async`` started.  Either way the copy runs while the caller
goes on, and ``np.asarray`` of the result waits for it.  Treat the numpy
array as read-only.
"""
from __future__ import annotations

import jax
import numpy as np

PINNED = "pinned_host"


def pinned_sharding(x: jax.Array, pinned: bool | None = None):
    """The ``pinned_host`` sharding of x's single device, or None: where x is
    not on one device, the device lacks that memory kind, or (``pinned``
    None, the default) the device is not a GPU; ``pinned=False``: None."""
    if pinned is False or not isinstance(x, jax.Array) or len(x.devices()) != 1:
        return None
    (dev,) = x.devices()
    if pinned is None and dev.platform != "gpu":
        return None
    try:
        kinds = {m.kind for m in dev.addressable_memories()}
    except (AttributeError, NotImplementedError, RuntimeError):
        return None
    if PINNED not in kinds or x.sharding.memory_kind == PINNED:
        return None
    return jax.sharding.SingleDeviceSharding(dev, memory_kind=PINNED)


def start_fetch(x: jax.Array, pinned: bool | None = None) -> jax.Array:
    """Start copying device array x to host memory; ``np.asarray`` of the
    returned array gives its values (waiting for the copy).  ``pinned``:
    None picks the pinned copy on GPUs, True wherever the device has
    ``pinned_host`` memory, False never."""
    s = pinned_sharding(x, pinned)
    if s is None:
        x.copy_to_host_async()
        return x
    return jax.device_put(x, s)


def fetch(x, pinned: bool | None = None) -> np.ndarray:
    """x's values in host memory (numpy; read-only where x was on a device):
    ``np.asarray(start_fetch(x))``; a numpy x is returned as it is."""
    if not isinstance(x, jax.Array):
        return np.asarray(x)
    return np.asarray(start_fetch(x, pinned))
