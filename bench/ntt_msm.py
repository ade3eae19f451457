"""NTT and MSM benchmarks (issue: NTT and MSM on the GPU).

One JSON record per case: case, log_n, device, jax, commit, compile_s (AOT
lower + compile of the case's program), median/min/max seconds over >= 5
timed repetitions after a warm-up, XLA's memory analysis of the program
(arguments + outputs + temporaries = its peak device bytes) and whether the
result was checked:

* ntt: intt(ntt(x)) == x on the device for the timed x;
* to_coset_natural / to_coset_bitrev / to_coset_folded (``--to-coset``): Groth16's coset
  transform of 2^k values with and without the bit-reversal gathers
  (hypothesis 34) and with n⁻¹ folded into the coset powers (68), the
  others checked equal to the first; then scale_bitrev_loop / scale_bitrev_kernel, its
  coset scaling alone in ``scale_by_powers``' two forms (70), the kernel checked equal
  to the loop;
* bit_reverse_gather / bit_reverse_tiled (``--bit-reverse``): the natural-order NTT's
  bit reversal alone in its two forms (hypothesis 72), the tiled checked equal;
  ``--ntt-bitrev tiled`` runs the ntt case with it;
* msm: bases are P_i = k_i·G for device-random k_i, so Σ s_i·P_i must equal
  (Σ s_i·k_i mod r)·G, the dot product summed on the device and the right
  side computed by the fixed-base windowed multiplication;
  ``--windows 16,20`` times the plain cases at each window width (cases
  ``msm_G1_c16``, ``msm_G1_c20``; hypothesis 36);
* msm_bits75: 75% of the scalars are 0 or 1 (half each), the rest random,
  through ``msm`` with the default config (the 0/1 positions counted and,
  above ``split_threshold``, summed by ``bits_sum``; the record's ``split``
  says how many went where), timed against the plain MSM on uniform scalars
  of the same size; it is not one XLA program (the count decides on the host),
  so its record holds ``process_peak_bytes``, the allocator's peak so far:
  its own peak when ``--bits`` runs without ``--g1`` (the case runs before
  its plain comparison);
* msm_budget (``--budget LOG_N``): run in a child process whose JAX memory
  pool is capped at ``--budget-gb`` (XLA_PYTHON_CLIENT_MEM_FRACTION), bases
  in host memory, processed in chunks chosen by ``MSMConfig.budget_bytes``;
  the record holds the child's peak bytes in use.  ``--host-scalars``: the
  scalars in host memory as well (case ``msm_G1_budget_host_scalars``: the
  out-of-core H's coefficients), ``--msm-gib``: the MSM's budget, ``--hold-gib``:
  a block held on the device throughout (the proof's resident witness).

    python -m bench.ntt_msm --ntt 16,18,20,22,24 --g1 16,18,20,22,24 --g2 16,18,20 \
        --bits 22,24 --out bench/results/ntt_msm_h200.jsonl
    python -m bench.ntt_msm --budget 26 --budget-gb 16 --out bench/results/ntt_msm_h200.jsonl
    python -m bench.ntt_msm --budget 27 --budget-gb 15 --host-scalars --msm-gib 5 --hold-gib 3.9

Goals (issue) and anchors (research/perf-anchors.md): NTT 2^20 <= 0.5 ms,
2^24 <= 10 ms (no published 255-bit GPU NTT at these sizes; ICICLE's BN254
computeH implies <= 68 ms per 2^24 NTT on a 3090 Ti); MSM G1 2^20 <= 20 ms,
2^22 <= 60 ms, 2^24 <= 110 ms (anchor: Yrrid/Snarkify ~107 ms per 2^24
BLS12-381 MSM H200-scaled; floor: T·W mixed additions at the measured
1.0e9 G1 madd/s); MSM G2 2^20 <= 60 ms; bits75 >= 3x faster than plain.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bench.common import emit, environment, peak_memory_bytes, time_fn
from ops import msm as M
from ops import ntt as N
from ops.curve import G1, G2
from ops.elementwise import KernelConfig
from ops.field import Fr
from ops.limbs import Unroll

GOALS = {("ntt", 20): 0.5e-3, ("ntt", 24): 10e-3, ("msm_G1", 20): 20e-3, ("msm_G1", 22): 60e-3,
         ("msm_G1", 24): 110e-3, ("msm_G2", 20): 60e-3}


def rand_fr(key, n):
    """Uniform values < 2^254 (< r), used directly as Montgomery forms."""
    x = jax.random.bits(key, (8, n), jnp.uint32)
    return x.at[7].set(x[7] & jnp.uint32(0x3FFFFFFF))


@jax.jit
def _dot_partial(s, k):
    """Σ_i s_i·k_i as 1024 partial sums (Fr, Montgomery): (8, n) -> (8, 1024)."""
    w = min(1024, s.shape[-1])
    prod = Fr.mul(s, k).reshape(8, -1, w)

    def body(j, acc):
        return Fr.add(acc, lax.dynamic_index_in_dim(prod, j, axis=1, keepdims=False))

    return lax.fori_loop(0, prod.shape[1], body, jnp.zeros((8, w), jnp.uint32))


def dot_int(s, k) -> int:
    return int(sum(int(v) for v in Fr.to_int(np.asarray(_dot_partial(s, k))))) % Fr.p


def matches(curve, res, d: int) -> bool:
    """res == d·G, the right side by the fixed-base windowed multiplication
    (a different algorithm, tested against py_ecc on the CPU)."""
    want = curve.fixed_base_mul(curve.generator_affine(), jnp.asarray(Fr.from_int([d])), window=4)
    return bool(curve.eq(res.reshape(curve.proj + (1,)), want)[0])


def make_bases(curve, k, chunk: int = 1 << 22):
    """Affine P_i = k_i·G on the device, in chunks."""
    g = curve.generator_affine()
    outs = []
    for lo in range(0, k.shape[-1], chunk):
        kk = k[:, lo:lo + chunk]
        outs.append(curve.to_affine(curve.fixed_base_mul(g, kk, window=8)))
    return jnp.concatenate(outs, axis=-1) if len(outs) > 1 else outs[0]


def base_record(case, log_n, **kw):
    r = {"case": case, "log_n": log_n, "n": 1 << log_n, **environment()}
    r.update(kw)
    goal = GOALS.get((case, log_n))
    if goal:
        r["goal_s"] = goal
    return r


def aot(fn, *args):
    t = time.perf_counter()
    compiled = fn.lower(*args).compile()
    dt = time.perf_counter() - t
    mem = None
    try:
        ma = compiled.memory_analysis()
        mem = int(ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
                  - ma.alias_size_in_bytes)
    except Exception:  # noqa: BLE001 - not every backend reports it
        pass
    return compiled, dt, mem


def bench_ntt(log_ns, out, reps, passes=(N.PASSES,), block=None, cap=None):
    """ntt of 2^k random values for each of ``passes`` (``ops.ntt._transform``:
    "parts", "inplace"); each checked by ``intt`` (default passes) giving x back.
    ``block`` (lanes, warps) and ``cap`` (registers): the in-place passes'
    kernel block and register cap instead of ``ops.ntt.PASS_BLOCK`` and
    ``ops.ntt.PASS_MAX_REGISTERS`` (the passes run at ~50% of their multiply
    bound, bench/NOTES.md session 35; one setting per process: the
    transforms' traces are cached)."""
    if block is not None or cap is not None:
        saved = N.PASS_BLOCK, N.PASS_MAX_REGISTERS
        N.PASS_BLOCK = block if block is not None else N.PASS_BLOCK
        N.PASS_MAX_REGISTERS = cap if cap is not None else N.PASS_MAX_REGISTERS
        try:
            return bench_ntt(log_ns, out, reps, passes)
        finally:
            N.PASS_BLOCK, N.PASS_MAX_REGISTERS = saved
    key = jax.random.PRNGKey(0)
    for ln in log_ns:
        dom = N.domain(ln)
        x = rand_fr(jax.random.fold_in(key, ln), 1 << ln)
        # bring x to canonical Montgomery form (< r): values < 2^254 already are
        for kind in passes:
            f, comp, mem = aot(jax.jit(functools.partial(N.ntt, passes=kind)), x, dom)
            X = f(x, dom)
            ok = bool(jnp.all(N.intt(X, dom) == x))
            t = time_fn(f, (x, dom), reps=reps)
            emit(base_record("ntt" if kind == "parts" else f"ntt_{kind}", ln, compile_s=comp,
                             xla_peak_bytes=mem, checked=ok, passes=kind, bn=N.PASS_BLOCK[0],
                             bit_reverse=N.BIT_REVERSE, radix_log=N.RADIX_LOG,
                             num_warps=N.PASS_BLOCK[1],
                             pass_max_registers=N.PASS_MAX_REGISTERS, **t), out)


def bench_bit_reverse(log_ns, out, reps):
    """The bit reversal of one Fr vector of 2^k (``ops.ntt._bit_reverse_last``'s
    forms, hypothesis 72): the XLA gather against the tiled kernel, the tiled
    result checked equal to the gather's."""
    key = jax.random.PRNGKey(3)
    cfg = N.Fr.config if jax.default_backend() == "gpu" else \
        dataclasses.replace(N.Fr.config, interpret=True)          # the CPU: the kernel checked
    forms = {"gather": lambda x: N._gather_bit_reverse(x, x.shape[-1].bit_length() - 1),
             "tiled": lambda x: N._tiled_bit_reverse(x, x.shape[-1].bit_length() - 1,
                                                     N.TILE_LOG, cfg)}
    for ln in log_ns:
        x = rand_fr(jax.random.fold_in(key, ln), 1 << ln)
        want = None
        for form, fn in forms.items():
            f, comp, mem = aot(jax.jit(fn), x)
            y = f(x)
            want = y if want is None else want
            t = time_fn(f, (x,), reps=reps)
            emit(base_record(f"bit_reverse_{form}", ln, compile_s=comp, xla_peak_bytes=mem,
                             checked=bool(jnp.all(y == want)), tile_log=N.TILE_LOG, **t), out)
            del y
        del want


def bench_to_coset(log_ns, out, reps):
    """Groth16's unit of h (hypothesis 34): the coset evaluations of the
    interpolant of 2^k values, coset_ntt(intt(x)) in natural order (two
    bit-reversal gathers) against coset_ntt_from_bitrev(intt_to_bitrev(x))
    (none) and ``ntt.to_coset`` (none, n⁻¹ folded into the coset powers:
    hypothesis 68); each result checked equal to the natural form's."""
    key = jax.random.PRNGKey(2)
    forms = {"natural": lambda x, dom: N.coset_ntt(N.intt(x, dom), dom),
             "bitrev": lambda x, dom: N.coset_ntt_from_bitrev(N.intt_to_bitrev(x, dom), dom),
             "folded": N.to_coset}           # hypothesis 68: n⁻¹ in the coset powers
    for ln in log_ns:
        dom = N.domain(ln)
        x = rand_fr(jax.random.fold_in(key, ln), 1 << ln)
        got = {}
        for form, fn in forms.items():
            f, comp, mem = aot(jax.jit(fn), x, dom)
            got[form] = f(x, dom)
            t = time_fn(f, (x, dom), reps=reps)
            ok = form == "natural" or bool(jnp.all(got[form] == got["natural"]))
            emit(base_record(f"to_coset_{form}", ln, compile_s=comp, xla_peak_bytes=mem,
                             checked=ok, **t), out)
        del got
        # hypothesis 70: the bit-reversed coset scaling alone, the loop of gathered factors
        # against the one kernel that loads them (each call scales a copy of x: both forms
        # update their input in place, and x is not donated)
        got = {}
        for form in ("loop", "kernel"):
            fn = jax.jit(functools.partial(N.scale_by_powers, bitrev=True, form=form))
            f, comp, mem = aot(fn, x, dom.coset)
            got[form] = f(x, dom.coset)
            t = time_fn(f, (x, dom.coset), reps=reps)
            ok = form == "loop" or bool(jnp.all(got[form] == got["loop"]))
            emit(base_record(f"scale_bitrev_{form}", ln, compile_s=comp, xla_peak_bytes=mem,
                             checked=ok, **t), out)
        del got


def config_variants(spec: str) -> list:
    """MSMConfig variants from ``--g1-configs``: comma-separated, each a
    '+'-joined set of settings on the default config: a boolean field's name
    sets it True, with the prefix ``no_`` False (e.g. ``no_prefetch``);
    ``field=value`` sets any other field (``none``, an int, or ``A:B`` for a
    pair: ``walk_registers=none+walk_block=128:4``) ("" gives none);
    ValueError names an unknown field or a bad value."""
    cfg0 = M.default_config()
    fields = {f.name for f in dataclasses.fields(M.MSMConfig)}
    flags = {f for f in fields if isinstance(getattr(cfg0, f), bool)}

    def value(v):
        v = v.strip()
        if v == "none":
            return None
        return tuple(int(x) for x in v.split(":")) if ":" in v else int(v)
    out = []
    for variant in (v for v in spec.split(",") if v.strip()):
        settings = {}
        for x in (x.strip() for x in variant.split("+")):
            name, _, v = x.partition("=")
            if v:
                if name not in fields - flags:
                    raise ValueError(f"--g1-configs: {name!r} is not a non-boolean MSMConfig "
                                     f"field (choose from {sorted(fields - flags)})")
                settings[name] = value(v)
            elif x.removeprefix("no_") in flags:
                settings[x.removeprefix("no_")] = not x.startswith("no_")
            else:
                raise ValueError(f"--g1-configs: {[x]} are not boolean MSMConfig fields "
                                 f"(choose from {sorted(flags)}, each also with the prefix no_)")
        out.append(dataclasses.replace(cfg0, **settings))
    return out


def bench_msm(curve, log_ns, out, reps, bits=(), config=None, windows=(), chunk_gib=None,
              shifts=()):
    """The plain MSM of each 2^k (``windows``: also at each width; ``shifts``:
    also over bases with p shifted copies, ``ops.msm.shift_bases``, cases
    ``…_shiftP``, the copies made before the timing: ``precompute_s``), then the
    bits75 cases.  ``chunk_gib``: the plain cases run through ``msm`` within
    that many GiB (``MSMConfig.budget_bytes``: chunks of the bases adding into
    one bucket array, reduced once) as the proof's msm_h does; at 2^27 the
    only way, since 16 windows of 2^27 entries overflow int32 keys."""
    key = jax.random.PRNGKey(1)
    top = max(list(log_ns) + list(bits))
    n_top = 1 << top
    k = rand_fr(jax.random.fold_in(key, 1), n_top)
    s = rand_fr(jax.random.fold_in(key, 2), n_top)
    t0 = time.perf_counter()
    bases = make_bases(curve, k)
    jax.block_until_ready(bases)
    print(f"# {curve.name}: bases 2^{top} made in {time.perf_counter() - t0:.1f} s", flush=True)
    cfg = config or M.default_config()
    name = f"msm_{curve.name}" + ("_fused_split" if cfg.fused_split and curve.split else "") + (
        "_unsplit" if curve.name == "G2" and not curve.split else "") + (
        "_xyzz" if cfg.xyzz and not curve.split else "") + (
        "_prefetch" if cfg.prefetch and not curve.split else "") + (
        "_running" if cfg.fused_running and not curve.split else "") + (
        "_smallw" if cfg.small_weights and not cfg.horner else "") + (
        f"_rows{curve.config.unroll.mul_rows}" if curve.config.unroll.mul_rows != 1 else "")
    walk = (curve if curve.split else M.walk_curve(curve, cfg)).config     # the first level's
    name += (f"_bn{walk.bn}w{walk.num_warps}" if (walk.bn, walk.num_warps) != (128, 4) else "") + (
        f"_cap{walk.max_registers}" if walk.max_registers else "")

    def one(case, ln, sc, window=None, shift=1):
        n = 1 << ln
        b, ss = bases[..., :n], sc[:, None, :n]
        c = M.check_window(window or M.choose_window(n))
        extra = {}
        if shift > 1:
            t0 = time.perf_counter()
            b = jax.block_until_ready(M.shift_bases(curve, b, c, shift).points)
            extra.update(shift_factor=shift, precompute_s=time.perf_counter() - t0,
                         bases_bytes=int(b.nbytes), windows=M.shifted_windows(c, shift))
            f, comp, mem = aot(M._msm_shifted_jit, curve, b, ss, c, shift, cfg)
            res = f(b, ss)
            extra["xla_peak_bytes"] = mem
        elif chunk_gib is None:
            f, comp, mem = aot(M._msm_jit, curve, b, ss, c, cfg)
            res = f(b, ss)
            extra["xla_peak_bytes"] = mem
        else:
            ccfg = dataclasses.replace(cfg, budget_bytes=int(chunk_gib * 2**30), window=c,
                                       split_threshold=None)
            f = lambda b, ss: M.msm(curve, b, ss, ccfg)
            t0 = time.perf_counter()
            res = jax.block_until_ready(f(b, ss))
            comp = time.perf_counter() - t0         # first call: compiles + one run
            _, chunk = M.plan(curve, n, 1, ccfg)
            case += "_chunked"
            extra.update(budget_bytes=ccfg.budget_bytes, chunk=chunk,
                         process_peak_bytes=peak_memory_bytes())
        ok = matches(curve, res[..., 0], dot_int(sc[:, :n], k[:, :n]))
        t = time_fn(f, (b, ss), reps=reps)
        if chunk_gib is not None:
            comp = max(comp - t["median_s"], 0.0)
        emit(base_record(case, ln, window=c, lanes=cfg.lanes, fused=cfg.fused,
                         fused_split=cfg.fused_split, xyzz=cfg.xyzz, prefetch=cfg.prefetch,
                         small_weights=cfg.small_weights, compile_s=comp, checked=ok, **extra, **t), out)
        return t["median_s"]

    def auto(case, ln, sc):
        """msm() itself with the default config: the 0/1 split chosen by counting."""
        n = 1 << ln
        b, ss = bases[..., :n], sc[:, None, :n]
        f = lambda b, ss: M.msm(curve, b, ss, cfg)
        t0 = time.perf_counter()
        res = jax.block_until_ready(f(b, ss))
        first = time.perf_counter() - t0
        ok = matches(curve, res[..., 0], dot_int(sc[:, :n], k[:, :n]))
        t = time_fn(f, (b, ss), reps=reps)
        nbits = M.count_bit_positions(ss)
        split = cfg.split_threshold is not None and nbits > 0 and nbits >= cfg.split_threshold * n
        emit(base_record(case, ln, lanes=cfg.lanes, compile_s=max(first - t["median_s"], 0.0),
                         split={"threshold": cfg.split_threshold, "split": split,
                                "bits_sum_positions": nbits if split else 0,
                                "pippenger_positions": n - nbits if split else n},
                         checked=ok, process_peak_bytes=peak_memory_bytes(), **t), out)
        return t["median_s"]

    plain = {}
    for ln in log_ns:
        for c in windows or [None]:           # an explicit width: its own case (and plot line)
            t = one(name if c is None else f"{name}_c{c}", ln, s, c)
            if c is None:                     # the bits75 comparison is with the default width
                plain[ln] = t
        for c in windows or [None]:
            for p in shifts:
                one(f"{name}{'' if c is None else f'_c{c}'}_shift{p}", ln, s, c, shift=p)
    for ln in bits:
        kk = jax.random.fold_in(key, 100 + ln)
        u = jax.random.uniform(kk, (n_top,))
        bit = jnp.where(jax.random.bernoulli(jax.random.fold_in(kk, 1), 0.5, (n_top,)),
                        jnp.asarray(Fr.ones((n_top,))), jnp.uint32(0))
        sb = jnp.where(u < 0.75, bit, s)
        tb = auto(f"{name}_bits75", ln, sb)        # first: its process peak is its own
        if ln not in plain:
            plain[ln] = one(name, ln, s)
        print(f"# bits75 (automatic 0/1 split) vs plain uniform at 2^{ln}: "
              f"{plain[ln] / tb:.2f}x (goal >= 3x)", flush=True)


def bench_profile(log_ns, out, reps):
    """Where an MSM G1's time goes: the sort alone, the bucket sums (sort +
    accumulation + partial reduction) and the whole MSM; and the bare mixed
    addition kernel at the accumulation's lane count (its per-step floor)."""
    key = jax.random.PRNGKey(5)
    cfg = M.default_config()
    for ln in log_ns:
        n = 1 << ln
        c = M.choose_window(n)
        W, B = M.num_windows(c), 1 << (c - 1)
        s = rand_fr(jax.random.fold_in(key, ln), n)[:, None, :]
        b = make_bases(G1, rand_fr(jax.random.fold_in(key, 99), n))

        def keys_of(s):
            k = Fr.from_montgomery(s)
            return M.bucket_keys(M.signed_digits(k, c).transpose(1, 0, 2), B)

        sort_fn = jax.jit(lambda s: lax.sort(keys_of(s), num_keys=1))
        sums_fn = jax.jit(lambda b, s: M.bucket_sums(G1, M.point_major(G1, b), *keys_of(s), W * B, cfg))
        T = W * n
        L0 = M.level0_lanes(T, cfg)
        for name, fn, args in (("sort", sort_fn, (s,)), ("bucket_sums", sums_fn, (b, s))):
            f, comp, mem = aot(fn, *args)
            t = time_fn(f, args, reps=reps)
            emit(base_record(f"msm_G1_profile_{name}", ln, window=c, entries=T, lanes=L0,
                             compile_s=comp, xla_peak_bytes=mem, **t), out)
        P = G1.from_affine(b[..., :L0])
        f, comp, _ = aot(jax.jit(lambda P, A: G1.madd(P, A)), P, b[..., :L0])
        t = time_fn(f, (P, b[..., :L0]), reps=reps)
        emit(base_record("G1_madd_at_lanes", ln, lanes=L0, steps=-(-T // L0), compile_s=comp,
                         madd_floor_s=t["median_s"] * -(-T // L0), **t), out)


def bench_budget(ln, gb, out, host_scalars=False, msm_gib=None, hold_gib=0.0):
    """Child process: MSM G1 over 2^ln host-resident bases with a capped pool.
    ``host_scalars``: the scalars in host memory too (the out-of-core H's
    coefficients: put a chunk at a time); ``msm_gib``: the MSM's budget
    (default 0.6 of the pool); ``hold_gib``: a block held on the device
    throughout (the proof's resident witness beside its msm_h)."""
    if os.environ.get("JAXPROVE_BUDGET_CHILD") != "1":
        try:         # total device memory, without initialising JAX in this process
            q = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=30)
            total = float(q.stdout.split()[0]) * 2**20
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            total = 141e9
        env = dict(os.environ, JAXPROVE_BUDGET_CHILD="1",
                   XLA_PYTHON_CLIENT_MEM_FRACTION=f"{min(0.95, gb * 1e9 / total):.4f}")
        cmd = [sys.executable, "-m", "bench.ntt_msm", "--budget", str(ln), "--budget-gb", str(gb),
               "--hold-gib", str(hold_gib)] + (["--host-scalars"] if host_scalars else []) + (
               ["--msm-gib", str(msm_gib)] if msm_gib is not None else [])
        if out:
            cmd += ["--out", out]
        raise SystemExit(subprocess.call(cmd, env=env))
    n = 1 << ln
    key = jax.random.PRNGKey(3)
    chunk = min(n, 1 << 22)
    host_bases, dots = [], 0
    for lo in range(0, n, chunk):
        kk = rand_fr(jax.random.fold_in(key, lo // chunk), chunk)
        ss = rand_fr(jax.random.fold_in(key, 10_000 + lo // chunk), chunk)
        host_bases.append(np.asarray(make_bases(G1, kk)))
        dots = (dots + dot_int(ss, kk)) % Fr.p
    bases = np.concatenate(host_bases, axis=-1)
    del host_bases
    parts = [rand_fr(jax.random.fold_in(key, 10_000 + i), chunk) for i in range(n // chunk)]
    s = (np.concatenate([np.asarray(p) for p in parts], axis=-1) if host_scalars
         else jnp.concatenate(parts, axis=-1))
    del parts
    held = jnp.ones((int(hold_gib * 2**30) // 4,), jnp.uint32) if hold_gib else None
    limit = (jax.devices()[0].memory_stats() or {}).get("bytes_limit")     # None on the CPU
    budget = int(msm_gib * 2**30) if msm_gib is not None else int(min(limit or gb * 1e9, gb * 1e9) * 0.6)
    cfg = M.MSMConfig(budget_bytes=budget)
    f = lambda: M.msm(G1, bases, s[:, None, :], cfg)
    t = time.perf_counter()
    res = f()
    first = time.perf_counter() - t
    ok = matches(G1, res[..., 0], dots)
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        jax.block_until_ready(f())
        ts.append(time.perf_counter() - t)
    st = jax.devices()[0].memory_stats() or {}
    emit(base_record("msm_G1_budget" + ("_host_scalars" if host_scalars else ""), ln,
                     budget_gb=gb, pool_limit_bytes=limit, chunk_budget_bytes=cfg.budget_bytes,
                     held_bytes=0 if held is None else held.nbytes,
                     peak_bytes=st.get("peak_bytes_in_use"),
                     first_call_s=first, median_s=float(np.median(ts)), min_s=min(ts), max_s=max(ts),
                     reps=5, checked=ok), out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(v) for v in s.split(",") if v]
    ap.add_argument("--ntt", type=ints, default=[])
    ap.add_argument("--ntt-passes", default=N.PASSES,
                    help="comma-separated: parts, inplace, loaded (ops.ntt._transform; "
                         "hypotheses 31 and 54)")
    ap.add_argument("--ntt-block", default=None,
                    help="LANES:WARPS of the NTT's in-place pass kernels (default "
                         "ops.ntt.PASS_BLOCK)")
    ap.add_argument("--ntt-cap", type=int, default=None,
                    help="register cap of the NTT's in-place passes (default "
                         "ops.ntt.PASS_MAX_REGISTERS)")
    ap.add_argument("--ntt-radix", type=int, choices=(1, 2, 3, 4), default=None,
                    help="radix-2^R passes (ops.ntt.RADIX_LOG, default 3; hypothesis 73: "
                         "fewer registers a pass against more passes)")
    ap.add_argument("--ntt-bitrev", choices=N.BIT_REVERSE_FORMS, default=None,
                    help="the natural-order NTT's bit reversal on CUDA (ops.ntt.BIT_REVERSE; "
                         "hypothesis 72)")
    ap.add_argument("--bit-reverse", type=ints, default=[],
                    help="sizes of the bit reversal alone, gather against tiled (hypothesis 72)")
    ap.add_argument("--to-coset", type=ints, default=[],
                    help="sizes of h's coset transform, natural order against bit-reversed (hypothesis 34)")
    ap.add_argument("--g1", type=ints, default=[])
    ap.add_argument("--g2", type=ints, default=[])
    ap.add_argument("--windows", type=ints, default=[],
                    help="window bits of the plain --g1/--g2 cases, each its own record "
                         "(default: choose_window's; hypothesis 36: above 16)")
    ap.add_argument("--shifts", type=ints, default=[],
                    help="the plain --g1/--g2 cases also over bases with p shifted copies, "
                         "comma-separated p > 1 (ops.msm.shift_bases; hypothesis 75)")
    ap.add_argument("--chunk-gib", type=float, default=None,
                    help="the plain --g1/--g2 cases through msm() within this many GiB "
                         "(chunks of the bases, one bucket array: the proof's msm_h; needed "
                         "at 2^27)")
    ap.add_argument("--bits", type=ints, default=[], help="G1 sizes for the 75%%-bits case")
    ap.add_argument("--profile", type=ints, default=[], help="G1 sizes for the stage profile")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--budget-gb", type=float, default=16.0)
    ap.add_argument("--host-scalars", action="store_true",
                    help="--budget: the scalars in host memory too (the out-of-core H)")
    ap.add_argument("--msm-gib", type=float, default=None,
                    help="--budget: the MSM's budget in GiB (default 0.6 of the pool)")
    ap.add_argument("--hold-gib", type=float, default=0.0,
                    help="--budget: GiB held on the device throughout (a resident witness)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--g2-both", action="store_true",
                    help="G2 sizes also with MSMConfig.fused_split flipped (hypothesis 20: "
                         "the XLA step loop against two kernels per step)")
    ap.add_argument("--g2-unsplit", action="store_true",
                    help="G2 sizes also with one kernel per formula (Curve.split off, no table "
                         "loops: the fused accumulation level), affordable to compile since "
                         "the PTX products (bench/NOTES.md hypothesis 41)")
    ap.add_argument("--g1-configs", default="",
                    help="G1 sizes (--g1) also with these MSMConfig variants, comma-separated, "
                         "each boolean fields joined by '+' set on the default config: e.g. "
                         "'xyzz,prefetch,xyzz+prefetch' (hypotheses 55 and 56: XYZZ buckets, the "
                         "pipelined walk of the fused accumulation's first level)")
    ap.add_argument("--g1-block", default=None,
                    help="LANES:WARPS, the kernel block of every G1 MSM here (KernelConfig bn, "
                         "num_warps; default 128:4): with a register cap (hypothesis 64) a "
                         "one-warp block fits more warps per SM (200 registers: 10 warps in "
                         "blocks of 1, 8 in blocks of 4)")
    ap.add_argument("--g1-mul-rows", default="",
                    help="G1 sizes (--g1) also with k rows of the rolled PTX product per loop "
                         "step, comma-separated k (Unroll.mul_rows; hypothesis 59)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if any(p < 2 for p in a.shifts):
        ap.error(f"--shifts: each factor must be at least 2, got {a.shifts}")
    if a.shifts and a.chunk_gib is not None:
        ap.error("--shifts runs unchunked (ops.msm.shift_bases): drop --chunk-gib or --shifts")
    if a.hold_gib < 0 or (a.msm_gib is not None and a.msm_gib <= 0):
        ap.error("--hold-gib must be at least 0 and --msm-gib above 0")
    try:
        g1_variants = config_variants(a.g1_configs)
        g1_rows = [int(k) for k in a.g1_mul_rows.split(",") if k.strip()]
        for k in g1_rows:
            Unroll(mul_rows=k)
        g1 = G1
        if a.g1_block:
            bn, warps = (int(x) for x in a.g1_block.split(":"))
            if bn < 32 or bn & (bn - 1) or warps < 1:
                raise ValueError(f"--g1-block {a.g1_block}: LANES a power of two >= 32, "
                                 f"WARPS >= 1")
            g1 = dataclasses.replace(G1, config=dataclasses.replace(G1.config, bn=bn,
                                                                    num_warps=warps))
    except ValueError as e:
        ap.error(f"--g1-configs / --g1-mul-rows / --g1-block: {e}")
    if a.ntt_bitrev:
        N.BIT_REVERSE = a.ntt_bitrev             # read when a transform is traced
    if a.ntt_radix:
        N.RADIX_LOG = a.ntt_radix
    if a.ntt:
        block = None
        if a.ntt_block:
            try:
                block = tuple(int(x) for x in a.ntt_block.split(":"))
                if len(block) != 2 or block[0] < 32 or block[0] & (block[0] - 1) or block[1] < 1:
                    raise ValueError
            except ValueError:
                ap.error(f"--ntt-block {a.ntt_block}: LANES:WARPS, LANES a power of two >= 32")
        bench_ntt(a.ntt, a.out, a.reps, [p for p in a.ntt_passes.split(",") if p], block,
                  a.ntt_cap)
    if a.bit_reverse:
        bench_bit_reverse(a.bit_reverse, a.out, a.reps)
    if a.to_coset:
        bench_to_coset(a.to_coset, a.out, a.reps)
    if a.g1 or a.bits:
        bench_msm(g1, a.g1, a.out, a.reps, a.bits, windows=a.windows,
                  chunk_gib=a.chunk_gib, shifts=a.shifts)
        for cfg in g1_variants if a.g1 else ():
            bench_msm(g1, a.g1, a.out, a.reps, config=cfg, windows=a.windows,
                      chunk_gib=a.chunk_gib)
        for k in g1_rows if a.g1 else ():
            rows = dataclasses.replace(g1.config.unroll, mul_rows=k)
            bench_msm(dataclasses.replace(g1, config=dataclasses.replace(g1.config, unroll=rows)),
                      a.g1, a.out, a.reps)
    if a.profile:
        bench_profile(a.profile, a.out, a.reps)
    if a.g2:
        bench_msm(G2, a.g2, a.out, a.reps, windows=a.windows, chunk_gib=a.chunk_gib,
                  shifts=a.shifts)
        if a.g2_both:
            cfg = M.default_config()
            bench_msm(G2, a.g2, a.out, a.reps,
                      config=dataclasses.replace(cfg, fused_split=not cfg.fused_split))
        if a.g2_unsplit:
            bench_msm(dataclasses.replace(G2, config=KernelConfig(), split=False), a.g2, a.out,
                      a.reps)
    if a.budget is not None:
        bench_budget(a.budget, a.budget_gb, a.out, a.host_scalars, a.msm_gib, a.hold_gib)


if __name__ == "__main__":
    main()
