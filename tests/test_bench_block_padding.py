"""bench.block_padding: the padded row blocks' bytes against the matrices'."""
import json

import jax

from bench import block_padding as BP
from bench import filecoin as F
from jaxprove import pce


def test_block_padding_records_the_padded_blocks(capsys):
    """One record per budget and plan; a budget too small for any block is
    recorded as such; the padded bytes are those of the blocks cut from
    the matrices, and exceed the matrices' bytes where a matrix is cut in
    several blocks."""
    assert BP.main(["--kind", "winning-post", "--size", "2KiB",
                    "--budgets-log2", "20", "24"]) == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [(r["budget_log2"], r["on_device"]) for r in recs] == [
        (20, []), (20, [0, 1]), (24, []), (24, [0, 1])]
    assert all("no_plan" in r for r in recs[:2])
    m = pce.to_host(pce.extract(F.spec_for("winning-post", "2KiB").record()))
    plan = pce.host_plan(m, 1, 1 << 24, prepared=False)
    cut = sum(int(v.nbytes) for k, p in enumerate(plan.plans) for j in
              range(len(p.blocks)) for v in jax.tree.leaves(plan.block(k, j)))
    assert recs[2]["padded_blocks_bytes"] == cut == BP.padded_bytes(plan)
    assert recs[2]["matrices_bytes"] == m.nbytes and max(recs[2]["blocks"]) > 1
    assert recs[2]["ratio"] > 1.0
