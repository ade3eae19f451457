"""Where a chunked MSM's host puts go (hypothesis 84's follow-up, bench/NOTES.md
session 45): a host vector of G1 affine bases (2, 12, N) uint32 put in chunks of
2^21, from pageable memory (``transfer.put_planes`` on a pool, as ``ops.msm``)
and from pinned pieces (``transfer.put_range``), each chunk waited for or all in
flight, and the pinned pieces' raw ``jax.device_put``; then 8 chunks fetched
into pinned memory put as a numpy view of it (``put_planes``) and as the
pinned array (hypothesis 91).  Prints one JSON line per case: seconds and
GB/s.  ``python3 bench/device/probe_put.py [log_n] [log_chunk]``."""
import json
import sys
import time

import jax
import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
from ops import transfer as T  # noqa: E402


def timed(f, reps=3):
    f()                                   # warm-up (compiles _set_piece, _piece_window)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main(log_n=25, log_chunk=21):
    n, chunk = 1 << log_n, 1 << log_chunk
    dev = jax.devices()[0]
    x = np.random.default_rng(0).integers(0, 2**32, (2, 12, n), dtype=np.uint32)
    gb = x.nbytes / 1e9
    t = time.perf_counter()
    pv = T.pin_vector(x, dev)
    jax.block_until_ready(list(pv.pieces))
    base = {"n": n, "chunk": chunk, "piece": pv.piece, "GB": gb, "device": str(dev.device_kind),
            "pinned": not isinstance(pv.pieces[0], np.ndarray), "jax": jax.__version__}
    print(json.dumps({"case": "pin", "s": time.perf_counter() - t, **base}), flush=True)

    def pageable_each():
        with T.copy_pool() as pool:
            for lo in range(0, n, chunk):
                jax.block_until_ready(T.put_planes(x[..., lo:lo + chunk], pool))

    def pinned_each():
        for lo in range(0, n, chunk):
            jax.block_until_ready(T.put_range(pv, lo, lo + chunk))

    def pinned_flight():
        out = None
        for lo in range(0, n, chunk):
            out = T.put_range(pv, lo, lo + chunk)
        jax.block_until_ready(out)

    def raw_pieces():
        s = jax.sharding.SingleDeviceSharding(dev)
        jax.block_until_ready([jax.device_put(p, s) for p in pv.pieces])

    # hypothesis 91: a host witness fetched into pinned memory is a numpy view of it
    # (transfer.fetch); put as that view (put_planes, as pce.element_major_host) or as
    # the pinned array itself
    held = T.start_fetch(jax.device_put(x[..., :chunk * 8]))   # pinned on a GPU
    view = np.asarray(held)

    def pinned_view_planes():
        with T.copy_pool() as pool:
            jax.block_until_ready(T.put_planes(view, pool))

    def pinned_array_whole():   # to the sharding (a bare Device: "memory kind mismatch", s47)
        jax.block_until_ready(jax.device_put(held, jax.sharding.SingleDeviceSharding(dev)))

    for name, f in (("pageable_each", pageable_each), ("pinned_each", pinned_each),
                    ("pinned_in_flight", pinned_flight), ("raw_pinned_pieces", raw_pieces),
                    ("pinned_view_planes", pinned_view_planes),
                    ("pinned_array_whole", pinned_array_whole)):
        s = timed(f)
        size = view.nbytes / 1e9 if name.startswith(("pinned_view", "pinned_array")) else gb
        print(json.dumps({"case": name, "s": s, "GB_s": size / s, "case_GB": size, **base}),
              flush=True)                        # each as it is measured: a failure keeps the rest


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
