"""Registers, spills and SASS of our Pallas kernels for the H200 (sm_90a), on a machine
without a GPU.

Device time is scarce; a kernel's register count (occupancy), its spills and
its machine instructions decide much of its speed, and all three can be read
without running it.  The chain: Pallas lowers a kernel to Triton IR on any
host (``bench.kernel_size``, debug mode); the ``triton`` package (pip, not a
dependency of jaxprove: install it to use this tool) compiles that IR for
``cuda`` capability 90 to PTX and a cubin; ``ptxas -v`` reports registers and
spill bytes; ``cuobjdump -sass`` lists the SASS, which is counted by opcode.
Both binaries ship with the ``triton`` wheel (``ptxas-blackwell``, CUDA 13.x,
reads Triton's PTX version; ``$PTXAS`` overrides).

On the H200 the same IR is compiled by jaxlib's own Triton and CUDA 13's
ptxas, so counts can differ a little; the inline PTX of ``ops.ptx`` is the
same text.  Loops are counted once (a rolled Montgomery product's row loop
is one body): ``loop_bodies`` gives the instructions between each backward
branch and its target.

    pip install triton                                   # the compiler (~300 MB)
    python3 -m bench.sass                                # every kernel of bench.kernel_size
    python3 -m bench.sass --kernels G1.madd,G1.segsum_A --out bench/results/sass.jsonl

Each record: kernel, module index, num_warps, registers, spill stores and
loads (bytes), stack frame, compile seconds on this host (Triton's, and
ptxas's alone), SASS instructions, the opcodes that occur most,
the register-to-register moves (``MOV`` / ``IMAD.MOV``), and the loop bodies.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import tempfile
import time

from bench.common import argv_command, emit

ARCH = 90                    # the H200
_SASS_LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_IMAD_MOV = re.compile(r"IMAD\.MOV\S*\s+R\d+, RZ, RZ, R\d+")     # a move of a register
_BRANCH = re.compile(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))")


def clean_ir(text: str) -> str:
    """One printed module as parseable MLIR: from ``module`` to its closing
    brace, without the debug locations Pallas prints after each op."""
    text = text[re.search(r"^module ", text, re.M).start():]
    cut = text.find("\n#loc")
    if cut > 0:
        text = text[:cut]
    text = text[:text.rfind("\n}") + 2] + "\n"
    text = re.sub(r" \[unknown\]", "", text)
    return re.sub(r' "[^"\n]*"\(#loc\d*\)', "", text)


def _tools():
    import triton
    from triton.backends.compiler import GPUTarget
    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    ptxas = os.environ.get("PTXAS") or os.path.join(bindir, "ptxas-blackwell")
    return triton, GPUTarget, ptxas, os.path.join(bindir, "cuobjdump")


def parse_sass(sass: str) -> dict:
    """Counts of a cuobjdump listing: instructions, by opcode (the first
    dotted part, predicates dropped), moves, and per backward branch the
    instructions of its loop body."""
    lines = []
    for line in sass.splitlines():
        m = _SASS_LINE.match(line)
        if m:
            lines.append((int(m.group(1), 16), re.sub(r"^@!?U?P\w+\s+", "", m.group(2))))
    ops: dict = {}
    moves = 0
    loops = []
    for addr, ins in lines:
        op = ins.split()[0]
        ops[op.split(".")[0]] = ops.get(op.split(".")[0], 0) + 1
        moves += op.startswith("MOV") or bool(_IMAD_MOV.match(ins))
        b = _BRANCH.search(ins)
        if b and b.group(1) and int(b.group(1), 16) < addr:
            loops.append((addr - int(b.group(1), 16)) // 16 + 1)
    return {"sass_instructions": len(lines), "moves": moves, "loop_bodies": loops,
            "top_opcodes": dict(sorted(ops.items(), key=lambda x: -x[1])[:10])}


def compile_module(ir: str, num_warps: int, workdir: str) -> dict:
    """Triton IR text -> {registers, spill bytes, stack, SASS counts, and the
    seconds of Triton's compile (IR to cubin, its own ptxas run included) and
    of our ptxas run alone} for sm_90a.  The seconds are this host's: what a
    kernel's size costs at compile time, compared between versions here."""
    triton, GPUTarget, ptxas, cuobjdump = _tools()
    src = os.path.join(workdir, "kernel.ttir")
    with open(src, "w") as f:
        f.write(clean_ir(ir))
    t = time.perf_counter()
    k = triton.compile(src, target=GPUTarget("cuda", ARCH, 32),
                       options={"num_warps": num_warps, "num_stages": 1})
    triton_s = time.perf_counter() - t
    ptx = os.path.join(workdir, "kernel.ptx")
    with open(ptx, "w") as f:
        f.write(k.asm["ptx"])
    cubin = os.path.join(workdir, "kernel.cubin")
    t = time.perf_counter()
    v = subprocess.run([ptxas, f"-arch=sm_{ARCH}a", "-v", ptx, "-o", cubin],
                       capture_output=True, text=True, check=True).stderr
    ptxas_s = time.perf_counter() - t
    num = lambda pat: int(m.group(1)) if (m := re.search(pat, v)) else None   # noqa: E731
    sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True,
                          check=True).stdout
    return {"registers": num(r"Used (\d+) registers"),
            "spill_stores": num(r"(\d+) bytes spill stores"),
            "spill_loads": num(r"(\d+) bytes spill loads"),
            "stack_bytes": num(r"(\d+) bytes stack frame"), "triton_s": round(triton_s, 2),
            "ptxas_s": round(ptxas_s, 2), **parse_sass(sass)}


def report(names=None, out=None, config=None) -> list[dict]:
    """One record per Triton kernel of each of ``names`` (default: every
    kernel of ``bench.kernel_size.kernels``), each object with ``config``
    (default: its shipped one)."""
    from bench import kernel_size as K
    from ops.elementwise import KernelConfig
    kernels = K.kernels(config)
    label = "shipped" if config is None else \
        f"unroll={config.unroll}, max_registers={config.max_registers}"
    config = config or KernelConfig()          # the num_warps every kernel family ships with
    unknown = sorted(set(names or ()) - set(kernels))
    if unknown:
        raise ValueError(f"bench.sass: unknown kernels {unknown} (known: {sorted(kernels)})")
    recs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or kernels:
            fn, shapes = kernels[name]
            for i, ir in enumerate(K.triton_modules(fn, *shapes)):
                func = re.search(r"tt.func (?:public )?@([\w$.]+)", ir)
                rec = {"case": "sass", "kernel": name, "module": i,
                       "function": func.group(1) if func else None, "arch": f"sm_{ARCH}a",
                       "num_warps": config.num_warps, "ptx_ops": ",".join(config.ptx) or "off",
                       "max_registers": config.max_registers,
                       "config": label,
                       **compile_module(ir, config.num_warps, tmp),
                       "command": argv_command()}
                emit(rec, out)
                recs.append(rec)
    return recs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="", help="comma-separated names of bench.kernel_size "
                                                  "(default: all)")
    ap.add_argument("--mul-rows", type=int, default=None,
                    help="every kernel with Unroll(mul_rows=K) (hypothesis 59) instead of its "
                         "shipped config")
    ap.add_argument("--max-registers", type=int, default=None,
                    help="every kernel with KernelConfig(max_registers=N), the PTX .maxnreg "
                         "(hypothesis 64)")
    ap.add_argument("--out", default=None, help="append the JSON records here")
    a = ap.parse_args()
    if importlib.util.find_spec("triton") is None:
        ap.error("bench.sass needs the triton package (pip install triton): it compiles the "
                 "kernels' Triton IR to PTX and ships ptxas and cuobjdump")
    try:
        from ops.elementwise import KernelConfig
        from ops.limbs import Unroll
        config = None
        if a.mul_rows is not None or a.max_registers is not None:
            config = KernelConfig(unroll=Unroll(mul_rows=a.mul_rows or 1),
                                  max_registers=a.max_registers)
        report([x for x in a.kernels.split(",") if x] or None, a.out, config)
    except ValueError as e:
        ap.error(str(e))


if __name__ == "__main__":
    main()
