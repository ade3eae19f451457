"""ops.ptx: the PTX programs' logic against Python integers, on the CPU.

A small interpreter of the PTX subset the programs use (32-bit registers, the
carry flag, predicates) runs the generated text; its semantics follow the PTX
ISA (``add.cc``/``addc``, ``sub.cc``/``subc`` borrow, ``mad{c}.{lo,hi}{.cc}``,
``selp``).  It is strict about the carry flag: an instruction that neither
writes nor reads it ends the chain, so a program that reads a carry another
instruction could have clobbered fails here.  Whether ptxas accepts the text
and the GPU agrees is checked on the device (tests/test_gpu.py)."""
from __future__ import annotations

import dataclasses
import random
import re

import pytest

from ops import ptx
from ops.elementwise import KernelConfig
from ops.field import P_FQ, R_FR, Fq, FpArith
from ops.limbs import Unroll

M32 = (1 << 32) - 1


def run_ptx(asm: str, operands: list[int | None]) -> list[int]:
    """Execute ``asm``; operands ``$k`` (None for outputs) -> the operands after."""
    ops = list(operands)
    regs: dict[str, int] = {}
    cf = None                                   # the carry flag; None: no live chain
    body = asm.strip()
    assert body.startswith("{") and body.endswith("}")
    for stmt in body[1:-1].split(";"):
        stmt = stmt.strip()
        if not stmt or stmt.startswith(".reg"):
            continue
        op, args = stmt.split(None, 1)
        args = [a.strip() for a in args.split(",")]

        def val(a):
            if a.startswith("$"):
                v = ops[int(a[1:])]
                assert v is not None, f"{stmt}: reads output {a} before writing it"
                return v
            if a.startswith("%"):
                return regs[a]
            return int(a, 0)

        def put(a, v):
            if a.startswith("$"):
                ops[int(a[1:])] = v
            else:
                regs[a] = v

        parts = op.split(".")
        name, mods = parts[0], set(parts[1:])
        uses_cf = name in ("addc", "subc", "madc")
        if uses_cf:
            assert cf is not None, f"{stmt}: reads a carry no chain left"
        cin = cf if uses_cf else 0
        if name in ("mul", "mad", "madc"):
            prod = val(args[1]) * val(args[2])
            part = prod & M32 if "lo" in mods else prod >> 32
            v = part + (val(args[3]) if name != "mul" else 0) + cin
        elif name in ("add", "addc"):
            v = val(args[1]) + val(args[2]) + cin
        elif name in ("sub", "subc"):
            v = val(args[1]) - val(args[2]) - cin
        elif name == "and":
            v = val(args[1]) & val(args[2])
        elif name == "mov":
            v = val(args[1])
        elif name == "setp":
            assert mods == {"ne", "u32"}
            regs[args[0]] = val(args[1]) != val(args[2])
            cf = None
            continue
        elif name == "selp":
            put(args[0], val(args[1]) if regs[args[3]] else val(args[2]))
            cf = None
            continue
        else:
            raise AssertionError(f"instruction not modelled: {stmt}")
        put(args[0], v & M32)
        if "cc" in mods:
            cf = 1 if (v < 0 or v > M32) else 0
        else:
            cf = None
    return ops


def interpreted_call(asm, n_out, rows):
    """``ptx.call`` on the CPU: every lane's program run by ``run_ptx`` (a
    host callback per call), so JAX code binding PTX runs here."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    rows = [jnp.asarray(r).astype(jnp.uint32) for r in rows]
    shape = jnp.broadcast_shapes(*(r.shape for r in rows))
    rows = [jnp.broadcast_to(r, shape).reshape(-1) for r in rows]

    def host(*xs):
        xs = [np.asarray(x) for x in xs]
        outs = [run_ptx(asm, [None] * n_out + [int(x[i]) for x in xs])[:n_out]
                for i in range(xs[0].shape[0])]
        return [np.asarray([o[j] for o in outs], np.uint32) for j in range(n_out)]
    flat = jax.ShapeDtypeStruct(rows[0].shape, jnp.uint32)
    return [r.reshape(shape) for r in jax.pure_callback(host, [flat] * n_out, *rows)]


def limbs_of(x: int, L: int) -> list[int]:
    return [(x >> (32 * j)) & M32 for j in range(L)]


def value(ls: list[int]) -> int:
    return sum(v << (32 * j) for j, v in enumerate(ls))


FIELDS = {"Fq": P_FQ, "Fr": R_FR}


def samples(p: int, k: int, seed: int):
    rng = random.Random(seed)
    edge = [0, 1, 2, p - 1, p - 2, (p - 1) // 2, (1 << 32) - 1, 1 << 32, (1 << (32 * ((p.bit_length() + 31) // 32 - 1)))]
    vals = [v % p for v in edge] + [rng.randrange(p) for _ in range(k)]
    return [(a, b) for a in vals[:6] for b in vals[:6]] + list(zip(vals, reversed(vals))) + [
        (rng.randrange(p), rng.randrange(p)) for _ in range(k)]


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_montgomery_product_is_abR_inverse(field):
    p = FIELDS[field]
    ar = FpArith(p)
    L, R = ar.L, 1 << (32 * ar.L)
    asm = ptx.montgomery_mul_asm(ar.pl, ar.n0)
    for a, b in samples(p, 40, 1):
        out = run_ptx(asm, [None] * L + limbs_of(a, L) + limbs_of(b, L))[:L]
        assert value(out) == a * b * pow(R, -1, p) % p, (field, a, b)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_rolled_product_rows_then_merge(field):
    """The rolled form: row programs of two rows (b's limbs in turn) on the
    even/odd accumulators from zero, then the merge and subtraction; the
    accumulated value after each pair is the CIOS partial result."""
    p = FIELDS[field]
    ar = FpArith(p)
    L, R = ar.L, 1 << (32 * ar.L)
    rows, merge = ptx.montgomery_rows_asm(ar.pl, ar.n0, 2), ptx.merge_asm(ar.pl)
    for a, b in samples(p, 40, 3):
        even, odd = [0] * L, [0] * L
        bl = limbs_of(b, L)
        for i in range(0, L, 2):
            eo = run_ptx(rows, [None] * (2 * L) + even + odd + limbs_of(a, L) + bl[i:i + 2])
            even, odd = eo[:L], eo[L:2 * L]
            b_low = value(bl[:i + 2])
            assert (value(even) + (value(odd) >> 32)) * pow(2, 32 * (i + 2), p) % p \
                == a * b_low % p                     # T·2^(32(i+2)) ≡ a·(b mod 2^(32(i+2)))
        out = run_ptx(merge, [None] * L + even + odd)[:L]
        assert value(out) == a * b * pow(R, -1, p) % p, (field, a, b)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_montgomery_square_is_aaR_inverse(field):
    p = FIELDS[field]
    ar = FpArith(p)
    L, R = ar.L, 1 << (32 * ar.L)
    asm = ptx.montgomery_sqr_asm(ar.pl, ar.n0)
    for a in sorted({x for pair in samples(p, 60, 4) for x in pair}):
        out = run_ptx(asm, [None] * L + limbs_of(a, L))[:L]
        assert value(out) == a * a * pow(R, -1, p) % p, (field, a)


def test_sum_of_products_in_one_reduction():
    """Σ a_t·b_t·R⁻¹ mod p for 2, 3 and the most products Fq allows (8),
    worst case (every operand p − 1) included; Fr has no room for a sum
    (3p > 2^256), and asking beyond the room is refused."""
    p = P_FQ
    ar = FpArith(p)
    L, R = ar.L, 1 << (32 * ar.L)
    assert ptx.dot_terms(ar.pl) == 8 and ptx.dot_terms(FpArith(R_FR).pl) == 1
    rng = random.Random(9)
    for k in (2, 3, 8):
        asm = ptx.montgomery_dot_asm(ar.pl, ar.n0, k)
        cases = [[p - 1] * (2 * k), [0] * (2 * k), [1] * (2 * k)] + \
            [[rng.randrange(p) for _ in range(2 * k)] for _ in range(25)]
        for c in cases:
            ins = [None] * L + [w for v in c for w in limbs_of(v, L)]
            want = sum(c[2 * t] * c[2 * t + 1] for t in range(k)) * pow(R, -1, p) % p
            assert value(run_ptx(asm, ins)[:L]) == want, (k, c)
    with pytest.raises(ValueError, match="exceed"):
        ptx.montgomery_dot_asm(ar.pl, ar.n0, 9)
    with pytest.raises(ValueError, match="exceed"):
        ptx.montgomery_dot_asm(FpArith(R_FR).pl, FpArith(R_FR).n0, 2)


@pytest.mark.parametrize("program", ["mul", "sqr", "dot"])
def test_products_cost_what_their_layout_says(program):
    """Every ``madc.hi`` directly follows the ``mad(c).lo`` with the same
    factors (one IMAD.WIDE.U32.X each), and the wide products number 2L²
    (a·b and m·p), L(L−1)/2 + L + L² (the square: cross products once, the
    squares, the reduction) and 3L² (two products, one reduction)."""
    ar = FpArith(P_FQ)
    asm = {"mul": lambda: ptx.montgomery_mul_asm(ar.pl, ar.n0),
           "sqr": lambda: ptx.montgomery_sqr_asm(ar.pl, ar.n0),
           "dot": lambda: ptx.montgomery_dot_asm(ar.pl, ar.n0, 2)}[program]()
    lines = [x.strip() for x in asm.split(";")]
    mads = 0
    for prev, line in zip(lines, lines[1:]):
        if line.startswith(("madc.hi", "mad.hi")):
            lo, hi = prev.split(None, 1), line.split(None, 1)
            assert lo[0].startswith(("mad.lo", "madc.lo")), (prev, line)
            assert [x.strip() for x in lo[1].split(",")[1:3]] == \
                [x.strip() for x in hi[1].split(",")[1:3]], (prev, line)
            mads += 1
    L = 12
    assert mads == {"mul": 2 * L * L, "sqr": L * (L - 1) // 2 + L + L * L,
                    "dot": 3 * L * L}[program]


def test_formulas_with_ptx_against_python_and_py_ecc(monkeypatch):
    """The PTX formula layer (every ``ops.ptx.OPS`` operation, the programs
    run by the interpreter) on what the MSM's bucket walk and the projective
    additions use: sqr, neg, sums of products (Fq: one reduction; Fr: the
    products' fallback) against Python integers, and the XYZZ mixed addition
    and doubling and RCB's complete addition (G1, and G2 with its Fq2
    products as Fq sums) against py_ecc."""
    import jax.numpy as jnp
    from py_ecc import bls12_381 as pe

    from ops.curve import CurveArith
    from ops.tower import Fp2Arith
    monkeypatch.setattr(ptx, "call", interpreted_call)

    def rows(xs, L):
        return [jnp.asarray([limbs_of(x, L)[j] for x in xs], jnp.uint32) for j in range(L)]

    def ints(r):
        return [value([int(w[i]) for w in r]) for i in range(r[0].shape[0])]
    rng = random.Random(11)
    for p in (P_FQ, R_FR):
        F = FpArith(p, ptx=ptx.OPS)
        Ri = pow(1 << (32 * F.L), -1, p)
        va = [0, 1, p - 1] + [rng.randrange(p) for _ in range(3)]
        vb = va[::-1]
        a, b = rows(va, F.L), rows(vb, F.L)
        assert ints(F.sqr(a)) == [x * x * Ri % p for x in va]
        assert ints(F.neg(a)) == [(-x) % p for x in va]
        s2, s1 = F.dots([[(a, b), (b, b)], [(a, a)]])
        assert ints(s2) == [(x * y + y * y) * Ri % p for x, y in zip(va, vb)]
        assert ints(s1) == [x * x * Ri % p for x in va]
        d, = F.dots([[(a, b, -1), (b, b)]])
        assert ints(d) == [(y * y - x * y) * Ri % p for x, y in zip(va, vb)]
        with pytest.raises(ValueError, match="sign"):
            F.dots([[(a, b, 2), (b, b)]])
    # G1 points in Montgomery form, as the kernels hold them
    F = FpArith(P_FQ, ptx=ptx.OPS)
    R, Ri = F.R, pow(1 << 384, -1, P_FQ)
    C = CurveArith(F, 4)

    def pts(ks):
        aff = [pe.multiply(pe.G1, k) for k in ks]
        return tuple(rows([int(c[i].n) * R % P_FQ for c in aff], 12) for i in (0, 1))

    def real(r):
        return [v * Ri % P_FQ for v in ints(r)]

    def want(ks):
        return [tuple(int(c.n) for c in pe.multiply(pe.G1, k)) for k in ks]
    Q, P2 = pts([3, 5, 7]), pts([11, 13, 17])
    A, dbl = C.xyzz_madd(C.xyzz_identity(Q[0][0]), P2)           # identity + P2 = P2
    A, dbl = C.xyzz_madd(A, Q)
    X, Y, ZZ, ZZZ = (real(v) for v in A)
    assert not any(bool(x) for x in dbl)
    assert [(x * pow(z, -1, P_FQ) % P_FQ, y * pow(zz, -1, P_FQ) % P_FQ)
            for x, y, z, zz in zip(X, Y, ZZ, ZZZ)] == want([14, 18, 24])
    X, Y, ZZ, ZZZ = (real(v) for v in C.xyzz_mdbl(Q))
    assert [(x * pow(z, -1, P_FQ) % P_FQ, y * pow(zz, -1, P_FQ) % P_FQ)
            for x, y, z, zz in zip(X, Y, ZZ, ZZZ)] == want([6, 10, 14])
    one = F.one(Q[0][0])
    X, Y, Z = (real(v) for v in C.add((*Q, one), (*P2, one)))
    assert [(x * pow(z, -1, P_FQ) % P_FQ, y * pow(z, -1, P_FQ) % P_FQ)
            for x, y, z in zip(X, Y, Z)] == want([14, 18, 24])
    # G2: Fq2 products and sums as Fq sums of 2 and 4 products (u² = −1)
    E = Fp2Arith(F)
    C2 = CurveArith(E, (4, 4))

    def pts2(ks):
        aff = [pe.multiply(pe.G2, k) for k in ks]
        return tuple(tuple(rows([int(c[i].coeffs[j]) * R % P_FQ for c in aff], 12) for j in (0, 1))
                     for i in (0, 1))

    def real2(v):
        return list(zip(real(v[0]), real(v[1])))

    def fq2_div(x, z):          # (x0 + x1·u) / (z0 + z1·u), u² = −1
        n = pow(z[0] * z[0] + z[1] * z[1], -1, P_FQ)
        return ((x[0] * z[0] + x[1] * z[1]) * n % P_FQ, (x[1] * z[0] - x[0] * z[1]) * n % P_FQ)
    Q2, R2 = pts2([3, 5, 7]), pts2([11, 13, 17])
    one2 = E.one(Q[0][0])
    X, Y, Z = (real2(v) for v in C2.add((*Q2, one2), (*R2, one2)))
    got = [(fq2_div(x, z), fq2_div(y, z)) for x, y, z in zip(X, Y, Z)]
    assert got == [tuple(tuple(int(v) for v in c.coeffs) for c in pe.multiply(pe.G2, k))
                   for k in (14, 18, 24)]


def test_programs_declare_no_register_llvm_substitutes():
    """LLVM's NVPTX backend substitutes %r1, %r2, … for the operands; a
    program declaring its own ``%r<12>`` shadows them inside its block and
    reads uninitialised registers wherever LLVM numbered the inputs low (the
    standalone squaring kernel on the H100, session 33: every result wrong,
    while the same program inside the MSM's walk, whose inputs were %r500…,
    was right).  Every register a program declares has a name from
    ``LOCAL_REGISTERS``, none of LLVM's."""
    llvm = {"r", "rd", "rs", "p", "f", "fd", "h", "hh"}
    assert not llvm & set(ptx.LOCAL_REGISTERS)
    for p in FIELDS.values():
        ar = FpArith(p)
        progs = [ptx.montgomery_mul_asm(ar.pl, ar.n0), ptx.montgomery_rows_asm(ar.pl, ar.n0, 2),
                 ptx.merge_asm(ar.pl), ptx.montgomery_sqr_asm(ar.pl, ar.n0),
                 ptx.add_mod_asm(ar.pl), ptx.sub_mod_asm(ar.pl)]
        if ptx.dot_terms(ar.pl) > 1:
            progs.append(ptx.montgomery_dot_asm(ar.pl, ar.n0, 2))
        for asm in progs:
            decls = re.findall(r"\.reg \.\w+ ([^;]*);", asm)
            names = {re.match(r"%([A-Za-z_]+)", d.strip()).group(1)
                     for ds in decls for d in ds.split(",")}
            assert names and names <= set(ptx.LOCAL_REGISTERS), names
            used = set(re.findall(r"%([A-Za-z_]+)\d*", asm))
            assert used <= set(ptx.LOCAL_REGISTERS), used - set(ptx.LOCAL_REGISTERS)


def test_rows_program_needs_an_even_count():
    ar = FpArith(P_FQ)
    for bad in (0, 1, 3):
        with pytest.raises(ValueError, match="even"):
            ptx.montgomery_rows_asm(ar.pl, ar.n0, bad)
    with pytest.raises(ValueError, match="even limb count"):
        ptx.montgomery_mul_asm((7, 5, 3), 1)


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 12])
def test_rolled_product_with_several_rows_per_step(field, rows, monkeypatch):
    """``montgomery_mul``'s rolled loop with k rows per step (k the largest
    even divisor of L not above max(``rows``, 2); b's limbs rotated by k a
    step, hypothesis 59): its JAX loop runs on the CPU with every inline-asm call executed by
    the interpreter (a host callback per call), equal to a·b·R⁻¹ mod p."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    p = FIELDS[field]
    ar = FpArith(p)
    L, R = ar.L, 1 << (32 * ar.L)
    rng = random.Random(rows)
    pairs = [(p - 1, p - 2), (1, p - 1)] + [(rng.randrange(p), rng.randrange(p)) for _ in range(4)]

    monkeypatch.setattr(ptx, "call", interpreted_call)
    a = [jnp.asarray([limbs_of(x, L)[j] for x, _ in pairs], jnp.uint32) for j in range(L)]
    b = [jnp.asarray([limbs_of(y, L)[j] for _, y in pairs], jnp.uint32) for j in range(L)]
    out = ptx.montgomery_mul(a, b, ar.pl, ar.n0, rolled=True, rows_per_step=rows)
    got = [value([int(out[j][i]) for j in range(L)]) for i in range(len(pairs))]
    assert got == [x * y * pow(R, -1, p) % p for x, y in pairs]


def test_mul_rows_must_be_a_positive_int():
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="mul_rows"):
            Unroll(mul_rows=bad)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_modular_sum_and_difference(field):
    p = FIELDS[field]
    ar = FpArith(p)
    L = ar.L
    add, sub = ptx.add_mod_asm(ar.pl), ptx.sub_mod_asm(ar.pl)
    for a, b in samples(p, 40, 2):
        ins = [None] * L + limbs_of(a, L) + limbs_of(b, L)
        assert value(run_ptx(add, ins)[:L]) == (a + b) % p, (field, a, b)
        assert value(run_ptx(sub, ins)[:L]) == (a - b) % p, (field, a, b)


def test_interpreter_catches_a_broken_chain():
    """The oracle can fail: a carry read after a flag-less instruction, and a
    wrong constant, are both caught."""
    ar = FpArith(P_FQ)
    asm = ptx.add_mod_asm(ar.pl)
    broken = asm.replace("addc.cc.u32 %u1", "and.b32 %u0, %u0, 0xffffffff;\naddc.cc.u32 %u1", 1)
    with pytest.raises(AssertionError, match="carry"):
        run_ptx(broken, [None] * 12 + limbs_of(5, 12) + limbs_of(7, 12))
    wrong = ptx.montgomery_mul_asm(ar.pl, ar.n0 ^ 1)
    a, b = 3, 5
    out = run_ptx(wrong, [None] * 12 + limbs_of(a, 12) + limbs_of(b, 12))[:12]
    assert value(out) != a * b * pow(1 << 384, -1, P_FQ) % P_FQ


def test_kernel_arith_uses_ptx_only_for_compiled_kernels():
    base = Fq.base_arith
    assert not base.ptx
    assert ptx.kernel_arith(base, KernelConfig(ptx=ptx.OPS)).ptx == (ptx.OPS if ptx.AVAILABLE else ())
    assert not ptx.kernel_arith(base, KernelConfig(interpret=True, ptx=ptx.OPS)).ptx
    assert not ptx.kernel_arith(base, KernelConfig(ptx=())).ptx


@pytest.mark.skipif(not ptx.AVAILABLE, reason="no Triton lowering in this jaxlib")
def test_cuda_lowering_holds_one_asm_per_operation():
    """Lowered for CUDA on this host, Fq.mul with the product unrolled is one
    12-result inline asm of the product program (rolled: the rows program,
    24 results, in a loop, then the merge's), in a module that verifies (Pallas prints the Triton IR in
    its custom form only then: result types must be signless i32); with
    ``ptx=False`` there is none."""
    import contextlib
    import io

    import jax
    import jax.numpy as jnp

    def lowered(cfg):
        F = dataclasses.replace(Fq, config=cfg)
        s = jax.ShapeDtypeStruct((12, 256), jnp.uint32)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            jax.jit(F.mul).trace(s, s).lower(lowering_platforms=("cuda",))
        return buf.getvalue()

    asm = r'%\d+:(\d+) = tt\.elementwise_inline_asm \"'
    ir = lowered(KernelConfig(debug=True, ptx=("mul",), unroll=Unroll(mul=True)))
    assert re.findall(asm, ir) == ["12"]
    assert "madc.hi.cc.u32" in ir
    ir = lowered(KernelConfig(debug=True, ptx=("mul",)))
    assert re.findall(asm, ir) == ["24", "12"]      # two rows a step (even, odd), then the merge
    assert re.search(r"scf\.for %\w+ = %\w+ to %c6_i32", ir) and "setp.ne.u32" in ir
    ir = lowered(KernelConfig(debug=True, ptx=("mul",), unroll=Unroll(mul_rows=4)))
    assert re.findall(asm, ir) == ["24", "12"]
    assert re.search(r"scf\.for %\w+ = %\w+ to %c3_i32", ir)   # 12 rows in 3 steps
    assert "elementwise_inline_asm" not in lowered(KernelConfig(debug=True, ptx=()))


def test_kernel_config_names_its_ptx_operations():
    assert KernelConfig(ptx=["mul"]).ptx == ("mul",)
    for bad in (True, "mul", ("mul", "inv")):
        with pytest.raises(ValueError, match="KernelConfig.ptx"):
            KernelConfig(ptx=bad)


def test_default_ops_from_the_environment(monkeypatch):
    monkeypatch.delenv("JAXPROVE_PTX", raising=False)
    assert ptx.default_ops() == ptx.DEFAULT_OPS
    monkeypatch.setenv("JAXPROVE_PTX", ",".join(ptx.OPS))
    assert ptx.default_ops() == ptx.OPS
    monkeypatch.setenv("JAXPROVE_PTX", "mul")
    assert ptx.default_ops() == ("mul",)
    monkeypatch.setenv("JAXPROVE_PTX", "off")
    assert ptx.default_ops() == ()
    monkeypatch.setenv("JAXPROVE_PTX", "mul,inv")
    with pytest.raises(ValueError, match="inv"):
        ptx.default_ops()


@pytest.mark.skipif(not ptx.AVAILABLE, reason="no Triton lowering in this jaxlib")
def test_register_cap_reaches_the_kernel_function():
    """``KernelConfig.max_registers`` puts ``nvvm.maxnreg`` on the lowered
    kernel function (Triton carries it to the PTX ``.maxnreg``; bench.sass
    shows ptxas keeping to it), in the elementwise kernels and the MSM's walk;
    without it, or in interpret mode, nothing is added."""
    import contextlib
    import io

    import jax
    import jax.numpy as jnp

    from ops import segsum
    from ops.curve import G1

    def lowered(fn, *shapes):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            jax.jit(fn).trace(*shapes).lower(lowering_platforms=("cuda",))
        return buf.getvalue()

    s = jax.ShapeDtypeStruct((12, 256), jnp.uint32)
    cap = r"tt\.func public @(\w+)\([^\n]*\) attributes \{[^}]*nvvm\.maxnreg = (\d+) : i32"
    mul = lambda cfg: lowered(dataclasses.replace(Fq, config=cfg).mul, s, s)   # noqa: E731
    assert re.findall(cap, mul(KernelConfig(debug=True, max_registers=100))) == [("Fq_mul", "100")]
    assert "nvvm.maxnreg" not in mul(KernelConfig(debug=True))

    C = dataclasses.replace(G1, config=KernelConfig(debug=True, max_registers=168))
    n, nb = 256, 64

    def walk(keys, src, pay):
        return segsum.level(C, keys, jnp.int32(n), src, pay, 128, 4,
                            segsum.identity_pm(C, nb), xyzz=True, prefetch=True)[0]

    ir = lowered(walk, jax.ShapeDtypeStruct((n,), jnp.int32),
                 jax.ShapeDtypeStruct((n, 24), jnp.uint32), jax.ShapeDtypeStruct((n,), jnp.uint32))
    assert ("G1_segsum_X_prefetch", "168") in re.findall(cap, ir)       # the walk itself

    from ops import ntt as N                   # the NTT's in-place passes (CUDA's form)
    cfg = KernelConfig(debug=True, max_registers=200)
    ir = lowered(lambda x, tw: N._inplace(x, tw, 10, False, cfg, loaded=True),
                 jax.ShapeDtypeStruct((8, 1 << 10), jnp.uint32),
                 jax.ShapeDtypeStruct((8, 1 << 9), jnp.uint32))
    got = re.findall(cap, ir)
    assert got and all(c == "200" for _, c in got) and all("pass" in f for f, _ in got)
    # the shipped defaults: the NTT passes at 168 where their config names no cap, the MSM's
    # walk at 200 in one-warp blocks (GPU_CONFIG), the curve's other kernels as they were
    ir = lowered(lambda x, tw: N._inplace(x, tw, 10, False, KernelConfig(debug=True), loaded=True),
                 jax.ShapeDtypeStruct((8, 1 << 10), jnp.uint32),
                 jax.ShapeDtypeStruct((8, 1 << 9), jnp.uint32))
    assert {c for _, c in re.findall(cap, ir)} == {str(N.PASS_MAX_REGISTERS)}
    from ops import msm as M
    G = dataclasses.replace(G1, config=KernelConfig(debug=True))
    W = M.walk_curve(G, M.GPU_CONFIG)
    assert (W.config.max_registers, W.config.bn, W.config.num_warps) == (200, 32, 1)
    assert M.walk_curve(G, M.CPU_CONFIG) is G
    ir = lowered(lambda keys, src, pay: segsum.level(W, keys, jnp.int32(n), src, pay, 128, 4,
                                                     segsum.identity_pm(W, nb), xyzz=True)[0],
                 jax.ShapeDtypeStruct((n,), jnp.int32),
                 jax.ShapeDtypeStruct((n, 24), jnp.uint32), jax.ShapeDtypeStruct((n,), jnp.uint32))
    assert ("G1_segsum_X", "200") in re.findall(cap, ir)
    with pytest.raises(ValueError, match="walk_block"):
        M.MSMConfig(walk_block=(32, 2))
    with pytest.raises(ValueError, match="max_registers"):
        M.MSMConfig(walk_registers=300)


def test_register_cap_settings(monkeypatch):
    """The cap is None or an int ptxas accepts; its default comes from
    ``$JAXPROVE_MAX_REGISTERS``; interpret mode binds nothing."""
    import jax.numpy as jnp
    for bad in (0, 23, 256, 1.5, True, "168"):
        with pytest.raises(ValueError, match="max_registers"):
            KernelConfig(max_registers=bad)
    assert KernelConfig(max_registers=168).max_registers == 168
    x = jnp.zeros(4, jnp.uint32)
    assert ptx.cap_registers(x, KernelConfig(interpret=True, max_registers=168)) is x
    assert ptx.cap_registers(x, KernelConfig()) is x
    monkeypatch.delenv("JAXPROVE_MAX_REGISTERS", raising=False)
    assert ptx.default_max_registers() is None
    monkeypatch.setenv("JAXPROVE_MAX_REGISTERS", " 168 ")
    assert ptx.default_max_registers() == 168
    for bad in ("x", "300"):
        monkeypatch.setenv("JAXPROVE_MAX_REGISTERS", bad)
        with pytest.raises(ValueError, match="JAXPROVE_MAX_REGISTERS|max_registers"):
            ptx.default_max_registers()
