"""bench.compile_log: JAX's compile log summed per stage (hypothesis 23's tool)."""
from __future__ import annotations

import json
import logging

import jax
import jax.numpy as jnp

from bench import compile_log as CL


def test_parses_a_real_compile_log(caplog):
    def inner(x):
        return jnp.sin(x) * 3

    inner_jit = jax.jit(inner)

    @jax.jit
    def outer_program_for_the_log(x):
        return inner_jit(x) + 1

    jax.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="jax"):
            outer_program_for_the_log(jnp.arange(5.0)).block_until_ready()
    finally:
        jax.config.update("jax_log_compiles", False)
    progs = CL.parse(r.getMessage() for r in caplog.records)
    p = progs["outer_program_for_the_log"]
    assert len(p["trace"]) == len(p["lower"]) == len(p["compile"]) == 1
    assert all(v[0] > 0 for v in (p["trace"], p["lower"], p["compile"]))
    assert "inner" not in progs                    # traced as part of the outer program
    s = CL.summary(progs)
    assert "outer_program_for_the_log" in [t["name"] for t in s["top"]]
    assert s["lower_s"] >= p["lower"][0] and s["compile_s"] >= p["compile"][0]


def test_summary_of_hits_and_misses(tmp_path, capsys):
    log = tmp_path / "log"
    log.write_text("\n".join([
        "Finished tracing prove_step for jit in 2.5 sec",
        "Finished jaxpr to MLIR module conversion jit(prove_step) in 1.25 sec",
        "PERSISTENT COMPILATION CACHE MISS for 'jit_prove_step' with key 'x'",
        "Finished XLA compilation of jit(prove_step) in 30.0 sec",
        "Finished tracing _msm for jit in 4.0 sec",
        "Finished jaxpr to MLIR module conversion jit(_msm) in 2.0 sec",
        "Persistent compilation cache hit for 'jit__msm' with key 'y'",
        "Finished XLA compilation of jit(_msm) in 0.5 sec",
        "unrelated line",
    ]))
    CL.main([str(log), "--top", "1"])
    rec = json.loads(capsys.readouterr().out)
    assert rec["programs"] == 2 and rec["cache_hits"] == 1 and rec["cache_misses"] == 1
    assert (rec["trace_s"], rec["lower_s"], rec["compile_s"]) == (6.5, 3.25, 30.5)
    assert rec["top"] == [{"name": "prove_step", "s": 33.75, "trace_s": 2.5, "lower_s": 1.25,
                           "compile_s": 30.0, "hits": 0, "misses": 1}]
