"""bench.sass: the Triton IR made parseable, a cuobjdump listing counted
(opcodes, moves, loop bodies), and, where the triton package is installed
(not a dependency: the tool is for development), one kernel compiled for
sm_90a end to end."""
from __future__ import annotations

import pytest

from bench import sass as S

LISTING = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
        /*0010*/                   IMAD R27, R5, R37.reuse, RZ ;          /* 0x0000002505 */
        /*0020*/                   IADD3.X R53, P0, R52, R25, RZ, P0, !PT ; /* 0x0000001934 */
        /*0030*/                   IMAD.MOV.U32 R39, RZ, RZ, R38 ;        /* 0x000000ffff */
        /*0040*/                   MOV R2, R3 ;                           /* 0x0000000300 */
        /*0050*/                   IMAD.MOV.U32 R52, RZ, RZ, RZ ;         /* 0x000000ffff */
        /*0060*/               @P0 BRA 0x10 ;                             /* 0xfffffff800 */
        /*0070*/                   EXIT ;                                 /* 0x000000000000794d */
        /*0080*/                   BRA 0x80;                              /* 0xfffffffc00fc7947 */
"""


def test_parse_sass_counts_opcodes_moves_and_loops():
    got = S.parse_sass(LISTING)
    assert got["sass_instructions"] == 9
    assert got["top_opcodes"]["IMAD"] == 3 and got["top_opcodes"]["BRA"] == 2
    assert got["moves"] == 2              # MOV and IMAD.MOV of a register; not of RZ
    assert got["loop_bodies"] == [6]       # 0x10..0x60; the trailing self-branch is no loop


def test_clean_ir_keeps_the_module_only():
    printed = ('The Triton module for kernel\nmodule @k {\n  %0 = tt.get_program_id x : i32 '
               '[unknown]\n  %1 = arith.addi %0, %0 : i32 "get:"(#loc3)\n} [unknown]\n'
               '#loc1 = /x.py:1:2\n#loc3 = /x.py:3:4\n')
    assert S.clean_ir(printed) == ("module @k {\n  %0 = tt.get_program_id x : i32\n"
                                   "  %1 = arith.addi %0, %0 : i32\n}\n")


def test_report_compiles_a_kernel_for_sm90():
    pytest.importorskip("triton")
    rec, inv = S.report(["Fq.mul", "Fq.inv"])
    assert rec["arch"] == "sm_90a" and rec["registers"] > 0 and rec["spill_stores"] == 0
    assert rec["top_opcodes"]["IMAD"] > 0
    assert inv["loop_bodies"]        # the exponent's loop (the product's own is unrolled by ptxas)
    with pytest.raises(ValueError, match="unknown kernels"):
        S.report(["Fq.nope"])
