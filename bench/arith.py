"""Field and curve kernel throughput and compile time (issue: arithmetic core).

For each kernel and batch size N: compile seconds (lower + compile, fresh
process-level cache), then median/min/max seconds per call over >= 5 timed
repetitions after a warm-up, as one JSON record per case; every GPU result is
checked column-for-column against the CPU path (the register-machine
interpreter, itself tested against Python ints and py_ecc) on a sample.

    python -m bench.arith --plan 'all:rolled:20,22,24' --out bench/results/arith_h200.jsonl

Anchors and floors (research/perf-anchors.md, arith-prototype/RESULTS.md):
Fq mul: floor ~28e9/s (IMAD bound, H200), prototype Pallas 13.4e9 rolled /
16.4e9 unrolled; issue goal >= 16e9.  G1 mixed add goal >= 1.2e9/s, G2 mixed
add goal >= 0.4e9/s; every kernel compiled in <= 20 s.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import random
import time

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import emit, environment, time_fn
from ops import curve, field, tower
from ops.elementwise import KernelConfig
from ops.limbs import Unroll

VARIANTS = {
    "default": None,            # shipped settings (PTX products and sums on CUDA: ops.ptx)
    "portable": "portable",     # shipped settings without PTX (the limb code of ops.limbs)
    "rolled": Unroll(),
    "table": Unroll(table=True),
    "chains": Unroll(chains=True),
    "unrolled": Unroll(chains=True, mul=True),
    "inner": Unroll(inner=False),
    "inner_table": Unroll(inner=False, table=True),
    # shipped settings with k rows of the rolled PTX product per loop step (hypothesis 59)
    "rows2": ("rows", 2),
    "rows3": ("rows", 3),
    "rows4": ("rows", 4),
}

# kernel -> (object, method (or (method, *constant arguments)), input kinds, field
# multiplications per element).  The pow kernels are the products' rate with little memory
# traffic: a^(2^16) is 16 loop steps of a square and a product (the multiply of the
# square-and-multiply, computed at every step and selected), 32 dependent products per
# element in registers, at the small register count of a field kernel (high occupancy); set
# against G1.madd's products, a gap says the curve kernels are held back by their registers
# or latencies, not by the products' instruction count
KERNELS = {
    "Fr.mul": ("Fr", "mul", "ff", 1),
    "Fq.mul": ("Fq", "mul", "ff", 1),
    "Fq.square": ("Fq", "square", "f", 1),
    "Fr.pow16": ("Fr", ("pow", 1 << 16), "f", 32),
    "Fq.pow16": ("Fq", ("pow", 1 << 16), "f", 32),
    "Fq.add": ("Fq", "add", "ff", 0),
    "Fq2.mul": ("Fq2", "mul", "ff", 3),
    "G1.add": ("G1", "add", "PP", 12),
    "G1.madd": ("G1", "madd", "PA", 11),
    "G1.double": ("G1", "double", "P", 8),
    "G2.add": ("G2", "add", "PP", 36),
    "G2.madd": ("G2", "madd", "PA", 33),
    "G2.double": ("G2", "double", "P", 24),
}
ANCHORS = {"Fq.mul": "goal >= 16e9/s; floor ~28e9/s (IMAD); prototype 13.4e9 rolled, 16.4e9 unrolled",
           "Fr.mul": "floor ~63e9/s (IMAD); prototype 34e9/s",
           "G1.madd": "goal >= 1.2e9/s; prototype xyzz 1.0-1.14e9/s, RCB madd 1.05e9/s",
           "G2.madd": "goal >= 0.4e9/s",
           "G1.add": "prototype RCB complete 0.94e9/s"}


def objects(unroll: Unroll | None):
    """The field and curve objects, all with kernel settings ``unroll``, or
    (None, variant "default") each with its own shipped settings, or
    ("portable") those without PTX, or (("rows", k)) those with k rows of the
    rolled PTX product per loop step (``Unroll.mul_rows``)."""
    shipped = {"Fr": field.Fr, "Fq": field.Fq, "Fq2": tower.Fq2, "G1": curve.G1, "G2": curve.G2}
    if unroll is None:
        return shipped
    if unroll == "portable":
        return {k: dataclasses.replace(o, config=dataclasses.replace(o.config, ptx=()))
                for k, o in shipped.items()}
    if isinstance(unroll, tuple) and unroll[0] == "rows":
        return {k: dataclasses.replace(o, config=dataclasses.replace(
                    o.config, unroll=dataclasses.replace(o.config.unroll, mul_rows=unroll[1])))
                for k, o in shipped.items()}
    cfg = KernelConfig(unroll=unroll)
    return {"Fr": dataclasses.replace(field.Fr, config=cfg),
            "Fq": dataclasses.replace(field.Fq, config=cfg),
            "Fq2": dataclasses.replace(tower.Fq2, config=cfg),
            "G1": dataclasses.replace(curve.G1, config=cfg),
            "G2": dataclasses.replace(curve.G2, config=cfg, split=False)}


# ---------------------------------------------------------------- host points
P = field.P_FQ


def _f2mul(a, b):
    return ((a[0] * b[0] - a[1] * b[1]) % P, (a[0] * b[1] + a[1] * b[0]) % P)


def _f2inv(a):
    t = pow((a[0] * a[0] + a[1] * a[1]) % P, P - 2, P)
    return (a[0] * t % P, -a[1] * t % P)


def host_points(C, k: int):
    """k affine points G, 2G+G', ...: a chain of affine additions with Python
    ints (distinct x, so the chord formula applies)."""
    g2 = C.fp != (12,)
    mul = _f2mul if g2 else (lambda a, b: a * b % P)
    inv = _f2inv if g2 else (lambda a: pow(a, P - 2, P))
    sub = (lambda a, b: ((a[0] - b[0]) % P, (a[1] - b[1]) % P)) if g2 else (lambda a, b: (a - b) % P)
    three = (3, 0) if g2 else 3
    two = (2, 0) if g2 else 2
    G = C.generator
    x, y = G
    lam = mul(mul(three, mul(x, x)), inv(mul(two, y)))           # 2G
    x2 = sub(mul(lam, lam), mul(two, x))
    pts = [G, (x2, sub(mul(lam, sub(x, x2)), y))]
    while len(pts) < k:
        (x1, y1), (xg, yg) = pts[-1], G
        lam = mul(sub(y1, yg), inv(sub(x1, xg)))
        x3 = sub(sub(mul(lam, lam), x1), xg)
        pts.append((x3, sub(mul(lam, sub(x1, x3)), y1)))
    return pts[:k]


def make_inputs(objs, kernel: str, n: int, seed: int = 0):
    obj_name, _, kinds, _ = KERNELS[kernel]
    obj = objs[obj_name]
    key = jax.random.key(seed)
    if kinds in ("f", "ff"):
        k1, k2 = jax.random.split(key)
        return [obj.random(k1, (n,)), obj.random(k2, (n,))][:len(kinds)]
    rng = random.Random(seed)
    base = host_points(obj, 512)
    rng.shuffle(base)
    A = jnp.asarray(obj.from_affine_ints(base))                     # (2, *fp, 512)
    idx = jax.random.randint(key, (n,), 0, 512)
    Aff = jnp.take(A, idx, axis=A.ndim - 1)
    Proj = obj.from_affine(Aff)
    idx2 = jax.random.randint(jax.random.fold_in(key, 1), (n,), 0, 512)
    Aff2 = jnp.take(A, idx2, axis=A.ndim - 1)
    return {"PP": [Proj, obj.from_affine(Aff2)], "PA": [Proj, Aff2], "P": [Proj]}[kinds]


def kernel_fn(objs, kernel: str):
    """The function of ``KERNELS[kernel]`` over the objects ``objs``."""
    obj_name, method, _, _ = KERNELS[kernel]
    name, *static = method if isinstance(method, tuple) else (method,)
    f = getattr(objs[obj_name], name)
    return (lambda *xs: f(*xs, *static)) if static else f


def check_against_cpu(fn, inputs, cols: int = 128) -> bool:
    """GPU output == CPU path output on the first ``cols`` lanes."""
    cpu = jax.devices("cpu")[0]
    sub = [x[..., :cols] for x in inputs]
    got = np.asarray(fn(*sub))
    want = np.asarray(fn(*[jax.device_put(np.asarray(x), cpu) for x in sub]))
    return bool(np.array_equal(got, want))


def parse_plan(plan: str):
    """'K1,K2:v1,v2:20,24;K3:v3:20' -> [(variant, kernel, log2n), ...]."""
    jobs = []
    for part in plan.split(";"):
        if not part.strip():
            continue
        ks, vs, ss = part.split(":")
        ks = list(KERNELS) if ks == "all" else ks.split(",")
        jobs += [(v, k, int(n)) for v in vs.split(",") for k in ks for n in ss.split(",")]
    return jobs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", default="all:rolled:20,22,24",
                    help="';'-separated KERNELS:VARIANTS:LOG2SIZES items (KERNELS may be 'all')")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=8, help="parallel compiles (phase 1)")
    ap.add_argument("--deadline", type=float, default=1e9,
                    help="seconds after start: compiles still running are abandoned, no timing starts later")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    env = environment()
    t0 = time.time()
    jobs = parse_plan(a.plan)

    def compile_job(job):
        v, k, s = job
        objs = objects(VARIANTS[v])
        fn = jax.jit(kernel_fn(objs, k))
        ins = make_inputs(objs, k, 1 << s, seed=s)
        jax.block_until_ready(ins)
        t = time.time()
        comp = fn.lower(*ins).compile()
        return job, fn, comp, ins, time.time() - t

    # phase 1: compile everything in parallel (compile time is reported per kernel;
    # with several compiles at once it is an upper bound of the time alone)
    done = []
    ex = cf.ThreadPoolExecutor(a.threads)
    futs = {ex.submit(compile_job, j): j for j in jobs}
    try:
        for fut in cf.as_completed(futs, timeout=max(1.0, a.deadline - (time.time() - t0))):
            try:
                done.append(fut.result())
            except Exception as e:  # noqa: BLE001 - record and go on
                v, k, s = futs[fut]
                emit({"case": k, "variant": v, "log2n": s, "error": f"{type(e).__name__}: {str(e)[:300]}",
                      **env}, a.out)
    except cf.TimeoutError:
        for fut, (v, k, s) in futs.items():
            if not fut.done():
                emit({"case": k, "variant": v, "log2n": s, "compile_s": f"> {a.deadline - 0:.0f} (abandoned)",
                      **env}, a.out)
    ex.shutdown(wait=False, cancel_futures=True)
    # phase 2: check and time one kernel at a time
    for (v, k, s), fn, comp, ins, tc in sorted(done, key=lambda d: d[0]):
        n = 1 << s
        rec = {"case": k, "variant": v, "log2n": s, "n": n, "compile_s": round(tc, 2),
               "parallel_compiles": a.threads, **env, "anchor": ANCHORS.get(k, "")}
        if time.time() - t0 > a.deadline:
            rec["skipped"] = "deadline"
            emit(rec, a.out)
            continue
        if not a.no_check:
            rec["correct_vs_cpu"] = check_against_cpu(fn, ins)
        r = time_fn(comp, ins, reps=a.reps)
        rec.update(r)
        rec["ops_per_s"] = n / r["median_s"]
        nm = KERNELS[k][3]
        if nm:
            rec["fq_mul_equiv_per_s"] = n * nm / r["median_s"]
        emit(rec, a.out)
        del comp, ins
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    summary(a.out)
    import os
    os._exit(0)          # do not wait for abandoned compiles


def summary(path):
    """A short table of the records in ``path``."""
    import json
    if not path:
        return
    rows = [json.loads(l) for l in open(path)]
    print(f"{'case':10s} {'variant':9s} {'N':>4s} {'compile s':>9s} {'ms':>9s} {'G op/s':>8s} ok")
    for r in sorted(rows, key=lambda r: (r.get("case", ""), r.get("variant", ""), r.get("log2n", 0))):
        if "median_s" in r and "case" in r:
            print(f"{r['case']:10s} {r['variant']:9s} 2^{r['log2n']:<2d} {r['compile_s']:9.1f} "
                  f"{r['median_s'] * 1e3:9.3f} {r['ops_per_s'] / 1e9:8.3f} {r.get('correct_vs_cpu', '-')}")
        else:
            print(r)


if __name__ == "__main__":
    main()
