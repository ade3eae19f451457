"""One mechanism for every field and curve formula: elementwise kernels.

A *formula* is a Python function over limb rows (``ops.limbs``): it takes, for
each argument, the rows of one element nested as the argument's *prefix shape*
(an Fq element has prefix ``(12,)`` and arrives as a list of 12 rows; a G1
projective point has prefix ``(3, 12)`` and arrives as 3 lists of 12 rows; a
prefix ``()`` is a single row) and returns its outputs nested the same way.

``elementwise(formula, in_prefixes, out_types, config)(*arrays)`` turns it into
a function over arrays of shape ``(*prefix, *batch)`` (limb-major: the batch is
contiguous, any batch shape, arguments broadcast against each other):

* on CUDA it is ONE Pallas (Triton) kernel: the batch is flattened to N lanes,
  padded to a multiple of the block size, and each program handles a
  ``(rows, BN)`` block with one element per lane;
* on every other platform (the CPU) the formula is recorded as a straight-line
  program and run by a small register-machine interpreter (``ops.interpret``),
  whose XLA program is the same for every formula, so XLA:CPU compiles it in
  seconds however long the formula is.

The choice is made at lowering time (``lax.platform_dependent``), so a
function jitted once runs on whichever device its inputs live on; a process
without a CUDA backend, or a computation placed on the CPU (a
``jax.default_device`` CPU context or committed CPU arrays), traces only the
CPU path, and one explicitly placed on a GPU only the kernel
(``ops.platform.by_platform``).  The Pallas kernels are still checked on the
CPU by ``KernelConfig(interpret=True)`` in the tests.  64-bit
intermediate types are enabled only while the formula is traced
(``jax.enable_x64`` as a context manager); the user's global setting is never
touched.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from ops.interpret import Recorder, compile_program, run
from ops.platform import by_platform
from ops.limbs import Unroll
from ops.ptx import OPS as PTX_OPS, cap_registers, check_max_registers, \
    default_max_registers, default_ops, kernel_arith

try:  # Pallas' Triton backend; absent on exotic jaxlib builds
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
except ImportError:  # pragma: no cover
    pl = plgpu = None

_enable_x64 = getattr(jax, "enable_x64", None)
if _enable_x64 is None:  # pragma: no cover - older jax
    from jax.experimental import enable_x64 as _enable_x64


def x64():
    """Context manager: 64-bit types on, for the duration of a trace."""
    return _enable_x64(True)


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """Static settings of the generated kernels.

    bn: lanes (elements) per Pallas program; num_warps: Triton warps per
    program; unroll: how limb loops are emitted (``ops.limbs.Unroll``);
    interpret: run the Pallas kernel in interpret mode on any backend (tests:
    checks the exact GPU kernel on the CPU); ptx: the field operations
    (``ops.ptx.OPS``: "mul", "add", "sub") done as inline PTX carry chains in
    kernels compiled for CUDA (default ``ops.ptx.default_ops()``; interpret
    mode and the CPU always run the portable limb code); debug: let Pallas print the
    kernel's Triton IR when it is lowered (``bench/kernel_size.py`` counts it);
    max_registers: registers per thread of the kernels compiled for CUDA
    (the PTX ``.maxnreg``, ``ops.ptx.cap_registers``; default
    ``$JAXPROVE_MAX_REGISTERS``, else None: as ptxas chooses): fewer
    registers let more warps share an SM, at the cost of spills
    (bench/NOTES.md hypothesis 64).
    """
    bn: int = 128
    num_warps: int = 4
    unroll: Unroll = Unroll()
    interpret: bool = False
    debug: bool = False
    ptx: tuple = default_ops()
    max_registers: int | None = default_max_registers()

    def __post_init__(self):
        check_max_registers(self.max_registers)
        if isinstance(self.ptx, (str, bool)) or not all(x in PTX_OPS for x in self.ptx):
            raise ValueError(f"KernelConfig.ptx: a tuple of names from {PTX_OPS} "
                             f"(() for none), got {self.ptx!r}")
        object.__setattr__(self, "ptx", tuple(self.ptx))


DEFAULT = KernelConfig()


def _nest(rows: list, prefix: tuple):
    """Flat list of rows -> nested values following ``prefix``: the limb axis
    becomes a list (a field element), the axes above it tuples (Fq2 pairs,
    point coordinates), as the formula layer builds them."""
    if len(prefix) == 0:
        return rows[0]
    if len(prefix) == 1:
        return list(rows)
    step = math.prod(prefix[1:])
    return tuple(_nest(rows[i * step:(i + 1) * step], prefix[1:]) for i in range(prefix[0]))


def _flat(nested, prefix: tuple) -> list:
    if len(prefix) == 0:
        return [nested]
    if len(prefix) != 0 and len(nested) != prefix[0]:
        raise ValueError(f"formula returned {len(nested)} parts where prefix {prefix} expects {prefix[0]}")
    if len(prefix) == 1:
        return list(nested)
    return [r for part in nested for r in _flat(part, prefix[1:])]


def _broadcast(a, pre: tuple, batch: tuple):
    """(*pre, *b) -> (*pre, *batch), the batch axes aligned on the right (numpy
    broadcasting of the batch shapes, the element prefix kept in front)."""
    b = a.shape[len(pre):]
    a = a.reshape(pre + (1,) * (len(batch) - len(b)) + b)
    return jnp.broadcast_to(a, pre + batch)


def _as_u32(v):
    return v.astype(jnp.uint32) if v.dtype != jnp.uint32 else v


def elementwise(formula: Callable, in_prefixes: Sequence[tuple], out_types: Sequence[tuple],
                base, config: KernelConfig = DEFAULT, name: str = "formula") -> Callable:
    """Build the array function of ``formula`` (see module docstring).

    formula(ar, *values): ``ar`` is the base prime-field arithmetic (an
    ``FpArith`` inside kernels, an ``ops.interpret.Recorder`` on the CPU path);
    the formula lifts it (Fp2Arith(ar), CurveArith(...)) as it needs.
    in_prefixes: the prefix shape of each argument (its element's limb layout;
    a last axis of ``base.L`` limbs is a field element, a shorter 1-D prefix is
    raw integer limbs such as scalars).
    out_types: (prefix, dtype) per output; dtype is uint32 (field elements) or
    bool (prefix ()).
    Returns f(*arrays) -> the output, or a tuple of them.
    """
    in_prefixes = [tuple(p) for p in in_prefixes]
    out_types = [(tuple(p), jnp.dtype(d)) for p, d in out_types]

    def batch_shape(args):
        shapes = []
        for a, pre in zip(args, in_prefixes):
            if tuple(a.shape[:len(pre)]) != pre:
                raise ValueError(f"{name}: argument of shape {a.shape} does not start with "
                                 f"the element layout {pre}")
            shapes.append(a.shape[len(pre):])
        return jnp.broadcast_shapes(*shapes)

    def finish(outs):
        res = tuple(o if d == jnp.uint32 else o.astype(d) for o, (_, d) in zip(outs, out_types))
        return res[0] if len(res) == 1 else res

    def xla_path(*args):
        batch = batch_shape(args)
        n = math.prod(batch)
        L = base.L
        rec = Recorder(base)
        values, in_vals, in_regs = [], [], []
        for a, pre in zip(args, in_prefixes):
            a = _broadcast(a, pre, batch).reshape(math.prod(pre), n)
            if pre and pre[-1] == L:                       # field elements
                k = math.prod(pre[:-1])
                vs = [rec.input() for _ in range(k)]
                in_vals += vs
                in_regs += [a[j * L:(j + 1) * L] for j in range(k)]
                values.append(_nest(vs, pre[:-1]))
            elif len(pre) == 1 and pre[0] < L:              # raw limbs (scalars)
                v = rec.input()
                in_vals.append(v)
                in_regs.append(jnp.pad(a, ((0, L - pre[0]), (0, 0))))
                values.append(v)
            else:
                raise ValueError(f"{name}: unsupported element layout {pre} for the CPU path")
        outs = formula(rec, *values)
        outs = [outs] if len(out_types) == 1 else list(outs)
        out_vals = [_flat(o, pre[:-1]) if pre else [o] for o, (pre, _) in zip(outs, out_types)]
        prog = compile_program(rec, in_vals, [v for vs in out_vals for v in vs])
        with x64():
            regs = run(base, prog, in_regs)
        res, i = [], 0
        for vs, (pre, dt) in zip(out_vals, out_types):
            r = regs[i:i + len(vs)]
            i += len(vs)
            if pre:
                res.append(jnp.concatenate(r).reshape(pre + batch))
            else:
                res.append(r[0][0].reshape(batch))
        return res

    def pallas_path(*args):
        batch = batch_shape(args)
        n = math.prod(batch)
        bn = config.bn
        npad = max(bn, -(-n // bn) * bn)
        flat_args, nrows = [], []
        for a, pre in zip(args, in_prefixes):
            r = math.prod(pre)
            a = _broadcast(a, pre, batch).reshape(r, n)
            if npad != n:
                a = jnp.pad(a, ((0, 0), (0, npad - n)))
            flat_args.append(a)
            nrows.append(r)
        out_rows = [math.prod(pre) for pre, _ in out_types]

        ar = kernel_arith(base, config)

        def kernel(*refs):
            ins = [_nest([cap_registers(ref[j], config) if (i, j) == (0, 0) else ref[j]
                          for j in range(r)], pre)
                   for i, (ref, r, pre) in enumerate(zip(refs, nrows, in_prefixes))]
            outs = formula(ar, *ins)
            outs = [outs] if len(out_types) == 1 else list(outs)
            for ref, o, (pre, _) in zip(refs[len(ins):], outs, out_types):
                for j, row in enumerate(_flat(o, pre)):
                    ref[j] = jnp.broadcast_to(_as_u32(row), (bn,))

        spec = lambda r: pl.BlockSpec((r, bn), lambda i: (0, i))
        with x64():
            outs = pl.pallas_call(
                kernel,
                out_shape=[jax.ShapeDtypeStruct((r, npad), jnp.uint32) for r in out_rows],
                grid=(npad // bn,),
                in_specs=[spec(r) for r in nrows],
                out_specs=[spec(r) for r in out_rows],
                compiler_params=plgpu.CompilerParams(num_warps=config.num_warps, num_stages=1),
                interpret=config.interpret,
                debug=config.debug,
                name=name,
            )(*flat_args)
        return [o[:, :n].reshape(pre + batch) for o, (pre, _) in zip(outs, out_types)]

    def f(*args):
        if len(args) != len(in_prefixes):
            raise TypeError(f"{name} takes {len(in_prefixes)} arguments, got {len(args)}")
        args = [jnp.asarray(a) for a in args]
        for a in args:
            if a.dtype != jnp.uint32:
                raise TypeError(f"{name}: limb arrays must be uint32, got {a.dtype}")
        if config.interpret:
            return finish(pallas_path(*args))
        if pl is None:
            return finish(xla_path(*args))
        if config.debug:    # lowered for CUDA even on a CPU-only host (bench.kernel_size)
            return finish(lax.platform_dependent(*args, default=xla_path, cuda=pallas_path))
        # only the form that can run is traced where the placement says (ops.platform)
        return finish(by_platform(*args, default=xla_path, cuda=pallas_path))

    f.__name__ = name
    return f
