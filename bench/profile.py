"""Where a stage's device time goes: one JAX profiler trace, summed per kernel.

A stage's wall time says how far it is from its floor, not why.  This runs
one stage a few times under ``jax.profiler.trace``, reads the trace back
(``jax.profiler.ProfileData``: no TensorBoard needed, so it works on the
device machine, which installs nothing) and prints one JSON record: per
call, the wall time, the device's busy time, and the events (kernels, XLA
ops) that cost most, each with its share and, where the trace has it, the
HLO text that names what it is (a fusion of slices, a gather, a Pallas
kernel).  Cases:

* ``ntt``: ``ops.ntt.ntt`` of 2^k random Fr (Montgomery forms), with
  ``--passes`` (``ops.ntt._transform``: parts, inplace);
* ``to_coset``: ``groth16._to_coset``, coset_ntt(intt(x)), the unit of the
  proof's h stage (three of its seven transforms' pairs);
* ``h``: ``groth16._h_coefficients`` of random a, b, c: the whole ntt stage
  of a proof (seven transforms, the quotient);
* ``msm``: ``ops.msm.msm`` of 2^k random points of ``--curve`` (G1 or G2)
  and scalars (default configuration; ``--window`` c, ``--budget-gib`` G:
  within G GiB, in chunks as the proof's msm_h; with ``--host`` too, bases
  and scalars in host memory and no 0/1 split: the 16 GB mode's msm_h, its
  spans ``msm.put`` (within it ``msm.put_bases``, ``msm.put_scalars``),
  ``msm.chunk``, ``msm.wait``; ``--pinned`` with it: the
  bases as a ``transfer.PinnedVector``, hypothesis 84; ``--device-scalars``:
  the scalars stay on the device, as the device h leaves them, 93);
* ``spmv_host`` / ``h_resident``: the 16 GB mode's spmv and ntt stages:
  ``pce.evaluate_host`` of a Filecoin circuit (as ``spmv``) within
  ``--budget-gib`` (default 9) over its prepared ``pce.host_plan``, the
  satisfaction check after it (``pce.check_host``); and
  ``groth16.h_coefficients_resident`` (``overwrite``, the prover's form) of
  random host a, b, c at 2^k within the same budget (a and b its work
  buffers in every call: their values change, the work does not);
  ``spmv_device``: the host witness's spmv stage (hypothesis 83: a and b
  into device limb planes, c to host memory, ``pce.evaluate_host(on_device=
  (0, 1))`` from a host witness over the row blocks planned for
  ``groth16.device_h_budget``);
  ``h_device``: ``groth16.h_coefficients_device`` (the host witness's h,
  hypothesis 83: random a and b as device limb planes, copied there anew
  each call, host c, the check included) within ``--budget-gib``.  Their host work
  (puts, fetches, row writes) shows as the named spans of the record's
  ``spans`` (``jax.profiler.TraceAnnotation`` in the library: ms and count
  per call, each span's time on the thread that ran it), beside the
  device's busy time;
* ``spmv``: ``pce.evaluate`` of a Filecoin circuit (``--kind``, ``--size``,
  ``--challenges``) on a random witness (the gathers and additions do not
  depend on the values); its matrices from ``--circuit-dir`` where
  ``bench.filecoin --circuit-dir`` stored them (the 32GiB partition: minutes
  to record otherwise), else recorded and extracted here; ``--form``: the
  ``ops.spmv`` form (gather or fused).

    python3 -m bench.profile --case ntt --log-n 24 --out bench/results/profile_h200.jsonl
    python3 -m bench.profile --case spmv --kind porep --size 2KiB

Timings under the profiler are a little slower than without; ``wall_s`` is
measured outside the trace (``bench.common.time_fn``).  On the CPU (tests)
there are no device planes: the host's XLA threads stand in, and their
events nest, so shares overlap there.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import shutil
import tempfile
from collections import defaultdict

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import argv_command, emit, environment, time_fn
from bench.ntt_msm import make_bases, rand_fr
from ops import spmv

CASES = ("ntt", "to_coset", "h", "msm", "spmv", "spmv_host", "spmv_device", "h_resident",
         "h_device")
SPANS = ("evaluate_host.", "check_host.", "h_resident.", "msm.")   # the library's named host spans
SKIP_LINES = ("XLA Modules", "Steps", "Framework", "Source", "python", "TraceMe", "Task")


def _vector(key, n):
    """One instance of n random Fr values ``(8, 1, n)`` (``ntt_msm.rand_fr``)."""
    return rand_fr(key, n)[:, None, :]


def stage(case: str, log_n: int = 20, kind: str = "porep", size: str = "2KiB",
          challenges: int | None = None, circuit_dir: str | None = None,
          passes: str | None = None, form: str | None = None, window: int | None = None,
          budget_gib: float | None = None, curve: str = "G1", host_inputs: bool = False,
          pinned: bool = False, piece_mib: float | None = None,
          device_scalars: bool = False, put_ahead: bool = True):
    """(function, arguments, size label) of a case (module docstring)."""
    from jaxprove import groth16 as G
    from ops import ntt as N
    key = jax.random.PRNGKey(7)
    if case == "ntt":
        dom = N.domain(log_n, cosets=False)
        f = jax.jit(functools.partial(N.ntt, passes=passes or N.PASSES))
        return f, (_vector(key, 1 << log_n), dom), f"2^{log_n}"
    if case == "to_coset":
        dom = N.domain(log_n)
        x = _vector(key, 1 << log_n)
        # _to_coset donates its input: each call gets a fresh copy
        return (lambda x, dom: G._to_coset(jnp.copy(x), dom)), (x, dom), f"2^{log_n}"
    if case == "h":
        dom = N.domain(log_n)
        abc = [_vector(jax.random.fold_in(key, i), 1 << log_n) for i in range(3)]
        return (lambda a, b, c, dom: G._h_coefficients(jnp.copy(a), jnp.copy(b), jnp.copy(c),
                                                         dom)), (*abc, dom), f"2^{log_n}"
    if case == "msm":
        from ops import msm as M
        from ops import curve as CV
        if curve not in ("G1", "G2"):
            raise ValueError(f"profile: curve must be G1 or G2, got {curve!r}")
        C = getattr(CV, curve)
        bases = make_bases(C, rand_fr(key, 1 << log_n))
        s = _vector(jax.random.fold_in(key, 1), 1 << log_n)
        cfg = M.default_config(bases)
        cfg = dataclasses.replace(cfg, window=window, budget_bytes=None if budget_gib is None
                                  else int(budget_gib * 2**30), put_ahead=put_ahead)
        if host_inputs and budget_gib is None:
            raise ValueError("profile: --host streams the MSM's inputs: it needs --budget-gib")
        if pinned and not host_inputs:
            raise ValueError("profile: --pinned is a form of --host")
        if piece_mib is not None and not (pinned and piece_mib > 0):
            raise ValueError(f"profile: --piece-mib is a positive size of --pinned's pieces, "
                             f"got {piece_mib}" + ("" if pinned else " without --pinned"))
        if device_scalars and not host_inputs:
            raise ValueError("profile: --device-scalars is a form of --host")
        if host_inputs:             # the 16 GB mode's msm_h (groth16.prove_msms): host
            bases = np.asarray(bases)                     # bases, and scalars unless the
            if not device_scalars:                        # device h left them there (93),
                s = np.asarray(s)                         # no 0/1 split
            cfg = dataclasses.replace(cfg, split_threshold=None)
        if pinned:                  # hypothesis 84: the key's vectors in pinned memory
            from ops import transfer
            bases = transfer.pin_vector(bases, jax.devices()[0], transfer.PIECE_BYTES
                                        if piece_mib is None else int(piece_mib * 2**20))
        c, chunk = M.plan(C, 1 << log_n, 1, cfg,
                          M.streaming_bytes(C, 1, host_inputs, host_inputs and not device_scalars,
                                            put_ahead))
        return ((lambda b, s: M.msm(C, b, s, cfg)), (bases, s),
                f"{curve} 2^{log_n}, c={c}, chunks of 2^{chunk.bit_length() - 1}"
                + ((", host bases" if device_scalars else ", host bases and scalars")
                   if host_inputs else "")
                + (f", the bases pinned in pieces of 2^{bases.piece.bit_length() - 1}"
                   if pinned else ""))
    budget = int((9 if budget_gib is None else budget_gib) * 2**30)
    if case == "h_resident":
        abc = [np.array(_vector(jax.random.fold_in(key, i), 1 << log_n)) for i in range(3)]

        def h(a, b, c):     # overwrite: a and b are its work buffers, reused by every call
            return G.h_coefficients_resident(a, b, c, log_n, budget, overwrite=True)
        return h, tuple(abc), f"2^{log_n} within {budget / 2**30:.3g} GiB"
    if case == "h_device":
        from ops import four_step as FS
        n1 = 1 << FS.default_log_n1(log_n)
        a, b, c = (_vector(jax.random.fold_in(key, i), 1 << log_n) for i in range(3))
        planes = [tuple(jnp.copy(p) for p in FS.matrix(x, n1)) for x in (a, b)]
        c = np.asarray(c)

        def h_device(c):    # a's and b's planes are consumed: fresh device copies each call
            ua, ub = (tuple(jnp.copy(p) for p in x) for x in planes)
            return G.h_coefficients_device(ua, ub, c, log_n, budget, check=lambda first: None)
        return h_device, (c,), f"2^{log_n} within {budget / 2**30:.3g} GiB, three vectors"
    if case in ("spmv", "spmv_host", "spmv_device"):
        from bench import filecoin as F
        from jaxprove import pce
        spec = F.spec_for(kind, size, challenges)
        m = pce.load(circuit_dir, pce.cache_key(spec.topology)) if circuit_dir else None
        if m is None:
            m = pce.extract(spec.record())
        w = _vector(key, m.num_vars)
        label = f"{kind} {size}" + (f" c{challenges}" if challenges else "")
        if case == "spmv":
            return (jax.jit(lambda m, w: pce.evaluate.jitted(m, w, form)), (m, w),
                    f"{label}: {m.rows} rows")
        host = pce.to_host(m)
        del m
        length = 1 << G.domain_log(host.rows)
        if case == "spmv_device":
            from ops import four_step as FS
            from ops import transfer
            plan = G.out_of_core_plan(host, budget, host_witness=True)
            if not plan.on_device:
                raise ValueError(f"profile: {budget} bytes hold no device h for {label}")
            n1 = 1 << FS.default_log_n1(G.domain_log(host.rows))
            wh = transfer.fetch_held(w)               # as the prover's: held on the host (91)

            def spmv_device(w):                       # as _h_on_device: C held (94)
                return pce.evaluate_host(host, w, budget, length=length, plan=plan,
                                         on_device=(0, 1), plane_shape=(n1, length // n1),
                                         held=(2,), put_ahead=put_ahead)
            return spmv_device, (wh,), (f"{label}: {host.rows} rows within "
                                        f"{budget / 2**30:.3g} GiB, a and b on the device")
        plan = pce.host_plan(host, 1, budget)

        def spmv_host(w):
            a, b, c = pce.evaluate_host(host, w, budget, length=length, plan=plan,
                                        put_ahead=put_ahead)
            return pce.check_host(a, b, c, host.rows, budget)
        return spmv_host, (w,), f"{label}: {host.rows} rows within {budget / 2**30:.3g} GiB"
    raise ValueError(f"profile: unknown case {case!r} (one of {', '.join(CASES)})")


def summarize(xplane: str, calls: int, top: int = 25) -> dict:
    """A trace file's events per call: on the device planes (or, without
    any, the host's XLA threads) the busy nanoseconds per line and the
    ``top`` events by total time, each {name, line, ms, count, share,
    hlo}."""
    from jax.profiler import ProfileData
    data = ProfileData.from_file(xplane)
    planes = [p for p in data.planes if p.name.startswith("/device:")]
    host = not planes
    if host:
        planes = [p for p in data.planes if p.name.startswith("/host:CPU")]
    spans = defaultdict(lambda: [0.0, 0])
    for plane in data.planes:
        if plane.name.startswith("/host:"):
            for line in plane.lines:
                for ev in line.events:
                    if ev.name.startswith(SPANS):
                        spans[ev.name][0] += ev.duration_ns
                        spans[ev.name][1] += 1
    per_line, events, hlo = defaultdict(float), defaultdict(lambda: [0.0, 0]), {}
    for plane in planes:
        for line in plane.lines:
            name = line.name
            if any(name.startswith(s) for s in SKIP_LINES) or (host and "XLA" not in name):
                continue
            for ev in line.events:
                per_line[name] += ev.duration_ns
                acc = events[(ev.name, name)]
                acc[0] += ev.duration_ns
                acc[1] += 1
                if ev.name not in hlo:
                    for k, v in ev.stats:
                        if k in ("long_name", "hlo_op", "tf_op") and isinstance(v, str):
                            hlo[ev.name] = v[:240]
                            break
    # the ops line repeats what the streams ran: busy time is the busiest line
    busy = max(per_line.values(), default=0.0)
    ranked = sorted(events.items(), key=lambda kv: -kv[1][0])[:top]
    return {
        "planes": [p.name for p in planes],
        "busy_ms_per_call": busy / calls / 1e6,
        "lines_ms_per_call": {k: v / calls / 1e6 for k, v in sorted(per_line.items())},
        "top": [{"name": n, "line": ln, "ms": t / calls / 1e6, "count": c / calls,
                 "share": t / busy if busy else 0.0, "hlo": hlo.get(n, "")}
                for (n, ln), (t, c) in ranked],
        "spans": {n: {"ms": t / calls / 1e6, "count": c / calls}
                  for n, (t, c) in sorted(spans.items())},
    }


def profile(case: str, log_n: int = 20, reps: int = 3, kind: str = "porep", size: str = "2KiB",
            challenges: int | None = None, top: int = 25, circuit_dir: str | None = None,
            passes: str | None = None, form: str | None = None, window: int | None = None,
            budget_gib: float | None = None, curve: str = "G1", host_inputs: bool = False,
            pinned: bool = False, piece_mib: float | None = None,
            device_scalars: bool = False, put_ahead: bool = True) -> dict:
    """One case: timed (``time_fn``, 5 repetitions after a warm-up), then
    ``reps`` calls traced and summarized (``summarize``)."""
    if reps < 1:
        raise ValueError(f"profile: reps must be >= 1, got {reps}")
    fn, args, label = stage(case, log_n, kind, size, challenges, circuit_dir, passes, form,
                            window, budget_gib, curve, host_inputs, pinned, piece_mib,
                            device_scalars, put_ahead)
    timing = time_fn(fn, args, reps=5, target_s=0.0)
    d = tempfile.mkdtemp(prefix="jaxprove-profile-")
    try:
        with jax.profiler.trace(d):
            for _ in range(reps):
                jax.block_until_ready(fn(*args))
        files = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
        if not files:
            raise RuntimeError(f"profile: the trace wrote no .xplane.pb under {d}")
        summary = summarize(files[0], reps, top)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {"case": f"profile.{case}", "size": label, "passes": passes, "form": form,
            "log_n": None if case.startswith("spmv") else log_n, "traced_calls": reps,
            "wall_s": timing["median_s"], "min_s": timing["min_s"], "max_s": timing["max_s"],
            "timed_reps": timing["reps"], **summary}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", choices=CASES, required=True)
    ap.add_argument("--log-n", type=int, default=20, help="ntt, to_coset, h, msm: 2^k elements")
    ap.add_argument("--kind", default="porep", help="spmv: the Filecoin proof kind")
    ap.add_argument("--size", default="2KiB", help="spmv: the sector size")
    ap.add_argument("--challenges", type=int, default=None, help="spmv: fewer challenges")
    ap.add_argument("--circuit-dir", default=None,
                    help="spmv: matrices stored there by bench.filecoin --circuit-dir")
    ap.add_argument("--passes", default=None, help="ntt: parts, inplace or loaded (ops.ntt._transform)")
    ap.add_argument("--form", default=None, choices=spmv.FORMS,
                    help="spmv: the ops.spmv form (fixed-width rows gathered or fused; "
                         "default $JAXPROVE_SPMV or gather)")
    ap.add_argument("--window", type=int, default=None, help="msm: window bits (default: chosen)")
    ap.add_argument("--budget-gib", type=float, default=None,
                    help="msm: within this many GiB, in chunks (the proof's msm_h); "
                         "spmv_host, spmv_device, h_resident, h_device: the out-of-core "
                         "budget (default 9)")
    ap.add_argument("--curve", default="G1", choices=("G1", "G2"), help="msm: the group")
    ap.add_argument("--host", action="store_true",
                    help="msm: bases and scalars in host memory, streamed in chunks within "
                         "--budget-gib (the 16 GB mode's msm_h)")
    ap.add_argument("--pinned", action="store_true",
                    help="msm --host: the bases in pinned host memory (hypothesis 84)")
    ap.add_argument("--piece-mib", type=float, default=None,
                    help="msm --pinned: MiB of one pinned piece (default 16; one chunk's "
                         "bases, e.g. 192 for G1 chunks of 2^21: one put a chunk, "
                         "hypothesis 89)")
    ap.add_argument("--device-scalars", action="store_true",
                    help="msm --host: the scalars on the device (the partition's msm_h: the "
                         "device h leaves them there, hypothesis 93)")
    ap.add_argument("--no-put-ahead", dest="put_ahead", action="store_false",
                    help="msm --host, spmv_host, spmv_device: each chunk's (row block's) put "
                         "just before its run, the order before hypotheses 97 and 98 "
                         "(MSMConfig.put_ahead, evaluate_host's put_ahead False), for measuring")
    ap.add_argument("--reps", type=int, default=3, help="calls traced")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cache", action="store_true", help="persistent compilation cache")
    ap.add_argument("--out", default=None, help="append the JSON record here")
    a = ap.parse_args(argv)
    if not 1 <= a.log_n <= 28:
        ap.error(f"--log-n must be in [1, 28], got {a.log_n}")
    if a.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    rec = profile(a.case, a.log_n, a.reps, a.kind, a.size, a.challenges, a.top, a.circuit_dir,
                  a.passes, a.form, a.window, a.budget_gib, a.curve, a.host, a.pinned,
                  a.piece_mib, a.device_scalars, a.put_ahead)
    emit({**rec, "command": argv_command(), **environment()}, a.out)


if __name__ == "__main__":
    main()
