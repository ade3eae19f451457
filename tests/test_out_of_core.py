"""The out-of-core ("16 GB") prover on tiny circuits, CPU: ``pce.evaluate_host``
(matrices in host memory, row blocks within a byte budget) against
``pce.evaluate`` and ``pce.is_satisfied``, in both BlockedCSR layouts and
budgets forcing many blocks; ``prove(..., out_of_core_budget=)`` against the
in-core proof (same key, MSM configuration and seed: bit for bit) and
``verify``; an unsatisfied witness refused as in core."""
from __future__ import annotations

import functools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from jaxprove import groth16 as G
from jaxprove import memory, pce
from ops import msm as M
from ops import spmv, transfer
from ops.curve import G2
from ops.field import Fr
from test_groth16 import BATCH, K, cubic
from test_pce import SMALL, random_r1cs, random_witnesses, to_device

# long rows in runs of many pieces, or of one piece each; without an ELL part
# chunks of at most 2 rows (many chunks), or one chunk over every row (every
# block takes it, masked): cuts fall inside chunks
LAYOUTS = {"ell": dict(SMALL), "ell-one-piece": dict(SMALL, piece_width=(32, 32)),
           "chunks": dict(SMALL, ell_width=(0, 0), block_rows=2),
           "chunks-wide": dict(SMALL, ell_width=(0, 0), slots=512, gen_slots=256, max_terms=64,
                               block_rows=64)}


@pytest.fixture(scope="module")
def random_circuit():
    r1cs = random_r1cs(1, num_aux=20, num_constraints=20)
    ws = random_witnesses(random.Random(2), 2, r1cs.num_inputs + r1cs.num_aux)
    return r1cs, to_device(ws, (2,))


def spy_programs(monkeypatch) -> set:
    """The distinct (tree structure, leaf shapes and dtypes) of the row
    blocks that reach ``pce._spmv_block``: one compiled program each."""
    seen, real = set(), pce._spmv_block

    def spy(x, coeffs, wt):
        seen.add((jax.tree.structure(x), tuple((a.shape, a.dtype) for a in jax.tree.leaves(x))))
        return real(x, coeffs, wt)

    monkeypatch.setattr(pce, "_spmv_block", spy)
    return seen


@pytest.mark.parametrize("layout,budget", [("ell", 10**9), ("ell", 40000), ("chunks", 16000),
                                           ("ell-one-piece", 40000), ("chunks-wide", 226000)])
def test_evaluate_host_equals_evaluate(random_circuit, layout, budget, monkeypatch):
    r1cs, w = random_circuit
    m = pce.extract(r1cs, **LAYOUTS[layout])
    host = pce.to_host(m)
    assert isinstance(host.a.cols, np.ndarray)
    plans = pce.plan_blocks(host, 2, budget)
    n_blocks = sum(len(p.blocks) for p in plans)
    assert n_blocks >= (3 if budget > 10**6 else 6)
    for x, (blocks, shape) in zip((host.a, host.b, host.c), plans):
        assert blocks[0][0] == 0 and blocks[-1][1] == m.rows
        assert [r for r, _ in blocks[1:]] == [r for _, r in blocks[:-1]]
        rb = spmv.RowBlocks(x)
        assert all(np.all(np.array(rb.counts(r0, r1)) <= shape) for r0, r1 in blocks)
        assert pce.block_bytes(host, x, 2, shape) <= budget
    programs = spy_programs(monkeypatch)
    # the blocks' numpy leaves above this go in pieces on the copy pool (transfer.put)
    monkeypatch.setattr(transfer, "PIECE_BYTES", 512)
    pieces, real_put = [], transfer.put_planes
    monkeypatch.setattr(transfer, "put_planes",
                        lambda x, pool, **k: pieces.append(x.nbytes) or real_put(x, pool, **k))
    fetched = []
    real_fetch = transfer.start_fetch
    forced = transfer.pinned_sharding(w, pinned=True) is not None
    if forced:                                  # the GPU's fetch through pinned memory
        monkeypatch.setattr(transfer, "start_fetch",
                            lambda y: fetched.append(1) or real_fetch(y, pinned=True))
    length = 1 << G.domain_log(m.rows)
    *got, first = pce.evaluate_host(host, w, budget, length=length, check=True)
    assert len(fetched) == (n_blocks if forced else 0)
    assert pieces and min(pieces) > 512
    # A, B and C (one block_signature here) padded to one shape: one program for all blocks
    assert len(programs) == 1 < n_blocks
    want = pce.evaluate(m, w)
    for x, y in zip(got, want):
        assert x.shape == (8, 2, length) and isinstance(x, np.ndarray)
        assert np.array_equal(x[..., :m.rows], np.asarray(y)) and not x[..., m.rows:].any()
    assert np.array_equal(first, np.asarray(pce.satisfied(*want)[1]))


@pytest.mark.parametrize("layout", ["ell", "chunks"])
def test_evaluate_host_from_a_host_witness_into_device_planes(random_circuit, layout,
                                                              monkeypatch):
    """A host witness (put a piece at a time into the element-major copy, the
    last piece overlapping) and A's and B's results left on the device as
    limb planes of the matrix view (written block by block, the padding rows
    zero), C's in host memory: equal to ``evaluate``; C evaluated first with
    its row blocks planned within the whole budget, then A within the
    budget less its plane, then B less both (hypothesis 85)."""
    r1cs, w = random_circuit
    m = pce.extract(r1cs, **LAYOUTS[layout])
    host = pce.to_host(m)
    length = 1 << G.domain_log(m.rows)
    n1 = 4
    vectors = 2 * 32 * 2 * length
    sb = 40000 if layout == "ell" else 16000
    vec = vectors // 2
    # C first beside no planes, then A beside its own, B beside both
    assert pce.evaluation_order((0, 1)) == [2, 0, 1]
    assert pce.spmv_budgets(2, sb + vectors, length, (0, 1)) == (sb + vec, sb, sb + vectors)
    n_blocks = sum(len(p.blocks) for p in pce.plan_blocks(host, 2, sb))
    assert n_blocks >= 6
    plan = pce.host_plan(host, 2, sb + vectors, on_device=(0, 1), length=length,
                         prepared=False)
    alone = pce.plan_blocks(host, 2, sb + vectors)
    assert len(plan.plans[2].blocks) == len(alone[2].blocks) < len(
        pce.plan_blocks(host, 2, sb)[2].blocks)
    order, events = [], []

    class Spy(pce.HostPlan):
        def block(self, k, j):
            order.append(k)
            events.append(("put", k, j))
            return super().block(k, j)
    real_spmv = pce._spmv_block
    monkeypatch.setattr(pce, "_spmv_block",
                        lambda x, c, wt: events.append(("spmv",)) or real_spmv(x, c, wt))
    monkeypatch.setattr(pce, "WITNESS_PIECE", 7)       # 4 pieces of 7 of 22 variables
    assert m.num_vars % 7
    puts, real = [], pce._element_major_into
    monkeypatch.setattr(pce, "_element_major_into",
                        lambda wt, p, at: puts.append(int(at)) or real(wt, p, at))
    a, b, c = pce.evaluate_host(host, np.asarray(w), sb + vectors, length=length,
                                on_device=(0, 1), plane_shape=(n1, length // n1),
                                plan=Spy(*plan))
    assert puts == [0, 7, 14, m.num_vars - 7]
    assert order == [k for k in (2, 0, 1) for _ in plan.plans[k].blocks]
    # hypothesis 98: block j + 1 put before block j's SpMV is dispatched
    want_events = []
    for k in (2, 0, 1):
        n = len(plan.plans[k].blocks)
        want_events.append(("put", k, 0))
        for j in range(n):
            want_events += [("put", k, j + 1)] if j + 1 < n else []
            want_events.append(("spmv",))
    assert events == want_events
    want = pce.evaluate(m, w)
    for got, y in zip((a, b), want):
        assert len(got) == 8 and all(isinstance(p, jax.Array) and p.shape == (2, n1, length // n1)
                                     for p in got)
        flat = np.stack([np.asarray(p) for p in got]).reshape(8, 2, length)
        assert np.array_equal(flat[..., :m.rows], np.asarray(y)) and not flat[..., m.rows:].any()
    assert isinstance(c, np.ndarray) and np.array_equal(c[..., :m.rows], np.asarray(want[2]))
    with pytest.raises(ValueError, match="a plan for"):     # a plan for host results only
        pce.evaluate_host(host, w, sb + vectors, length=length, on_device=(0, 1),
                          plan=pce.host_plan(host, 2, sb + vectors, prepared=False))
    a2, b2, _ = pce.evaluate_host(host, np.asarray(w), sb + vectors, length=length,
                                  on_device=(0, 1))          # the plan cut per call: the same
    flat = lambda x: np.stack([np.asarray(p) for p in x]).reshape(8, 2, length)  # noqa: E731
    assert all(np.array_equal(flat(x), flat(y)) for x, y in ((a2, a), (b2, b)))
    # hypothesis 91: a witness held in pinned memory (fetch_held) goes by one DMA, made
    # element-major on the device (no pieces); a slice of it (pinned None) by pieces
    held = transfer.fetch_held(jnp.asarray(w), pinned=True)
    assert isinstance(held, transfer.PinnedView) and transfer.held(held) is not None
    assert transfer.held(held[:, :1]) is None and transfer.held(np.asarray(w)) is None
    puts.clear()
    a3, b3, c3 = pce.evaluate_host(host, held, sb + vectors, length=length, on_device=(0, 1))
    assert puts == [] and np.array_equal(c3, c)
    assert all(np.array_equal(flat(x), flat(y)) for x, y in ((a3, a), (b3, b)))
    # hypothesis 94: C held (its blocks' results as fetched): the same rows, as planes
    a4, b4, c4 = pce.evaluate_host(host, np.asarray(w), sb + vectors, length=length,
                                   on_device=(0, 1), plane_shape=(n1, length // n1),
                                   plan=plan, held=(2,))
    assert isinstance(c4, pce.HeldRows) and c4.shape == c.shape and c4.nbytes == c.nbytes
    assert [(r0, r1) for r0, r1, _ in c4.blocks] == list(plan.plans[2].blocks)
    assert all(np.array_equal(flat(x), flat(y)) for x, y in ((a4, a), (b4, b)))
    assert np.array_equal(flat(pce.held_planes(c4, (n1, length // n1))), c)
    with pytest.raises(ValueError, match="does not hold"):
        pce.held_planes(c4, (3, 5))
    with pytest.raises(ValueError, match="held names"):
        pce.evaluate_host(host, w, sb + vectors, length=length, on_device=(0, 1), held=(1,))
    with pytest.raises(ValueError, match="check needs"):
        pce.evaluate_host(host, w, sb + vectors, held=(2,), check=True)
    with pytest.raises(ValueError, match="check needs"):
        pce.evaluate_host(host, w, sb + vectors, length=length, on_device=(0,), check=True)
    with pytest.raises(ValueError, match="plane_shape"):
        pce.evaluate_host(host, w, sb + vectors, length=length, on_device=(0,),
                          plane_shape=(3, 5))


def test_the_check_runs_again_within_half_the_budget(random_circuit, monkeypatch):
    """evaluate_host's satisfaction check that runs out of device memory is
    run again within half the budget (``memory.halving``), same verdict."""
    r1cs, w = random_circuit
    m = pce.extract(r1cs, **LAYOUTS["ell"])
    host, budget, seen = pce.to_host(m), 10**6, []
    real = pce.first_bad_host

    def check(a, b, c, rows, bud, pool=None):
        seen.append(bud)
        if bud == budget:
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory")
        return real(a, b, c, rows, bud, pool)

    monkeypatch.setattr(pce, "first_bad_host", check)
    first = pce.evaluate_host(host, w, budget, check=True)[3]
    assert seen == [budget, budget // 2]
    assert np.array_equal(first, np.asarray(pce.satisfied(*pce.evaluate(m, w))[1]))


def test_out_of_core_h_steps_run_again_within_half_the_budget(monkeypatch):
    """groth16's out-of-core h: the SpMV (without the prepared plan, which is
    cut for the full budget) and the NTT each run again within half their
    budget where the device runs out of memory, the NTT from a new SpMV (at
    the budget that served: its failed try overwrote a and b); other errors
    propagate.  With ``learned`` (the engine's per circuit) the next call
    starts within the budgets that served."""
    budget, log_m, calls = 1 << 20, 4, []
    plan = pce.HostPlan((), (), None, 1, budget, 1)      # one for the whole budget
    a = np.zeros((8, 1, 1 << log_m), np.uint32)
    oom = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory")

    def evaluate_host(m, w, b, *, length, check, plan, learned):
        assert not check                       # the check is a stage of its own
        calls.append(("spmv", b, plan))
        if b == budget:
            raise oom
        return a, a, a

    def resident(x, y, z, lm, b, *, overwrite, check):
        assert overwrite
        calls.append(("h", b))
        if b == budget:
            raise oom
        return np.ones((8, 1, (1 << lm) - 1), np.uint32)     # overwrite: h in a's buffer

    monkeypatch.setattr(pce, "evaluate_host", evaluate_host)
    monkeypatch.setattr(pce, "check_host", lambda *x, **k: np.array([-1]))
    monkeypatch.setattr(G, "h_coefficients_resident", resident)
    m = pce.Matrices(*([None] * 8), "fake", 1, 1, 1)
    h = G._h_out_of_core(m, None, log_m, budget, lambda name, x: x, host_plan=plan)
    assert calls == [("spmv", budget, plan), ("spmv", budget // 2, None),
                     ("h", budget), ("spmv", budget // 2, None), ("h", budget // 2)]
    assert isinstance(h, np.ndarray) and h.shape == (8, 1, 15) and h.all()
    learned = {}                  # kept per circuit: the next proof starts where one served
    for want in ([("spmv", budget, plan), ("spmv", budget // 2, None), ("h", budget),
                  ("spmv", budget // 2, None), ("h", budget // 2)],
                 [("spmv", budget // 2, None), ("h", budget // 2)]):
        calls.clear()
        G._h_out_of_core(m, None, log_m, budget, lambda name, x: x, plan, learned)
        assert calls == want
    monkeypatch.setattr(G, "h_coefficients_resident", lambda *x, **k: int("x"))
    with pytest.raises(ValueError):
        G._h_out_of_core(m, None, log_m, budget, lambda name, x: x)


def test_device_h_falls_back_once_it_runs_out_of_memory(monkeypatch):
    """With a host witness the h on the device comes first; where it runs out
    of device memory the two-vector path runs within the same budget (its
    SpMV from the host witness), and with ``learned`` the next proofs go
    there at once; a device witness never takes it; another error propagates."""
    budget, log_m, calls = 1 << 20, 4, []
    a = np.zeros((8, 1, 1 << log_m), np.uint32)
    oom = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory")
    m = pce.Matrices(*([None] * 8), "fake", 1, 1, 9)
    monkeypatch.setattr(pce, "host_plan", lambda *x, **k: "cut")
    failure = [oom]

    def on_device(mm, w, lm, b, lap, plan):
        calls.append(("device", b, plan))
        raise failure[0]

    def evaluate_host(mm, w, b, *, length, check, plan, learned):
        calls.append(("spmv", b, plan))
        return a, a, a

    def resident(x, y, z, lm, b, *, overwrite, check):
        calls.append(("h", b))
        return np.ones((8, 1, (1 << lm) - 1), np.uint32)

    monkeypatch.setattr(G, "_h_on_device", on_device)
    monkeypatch.setattr(pce, "evaluate_host", evaluate_host)
    monkeypatch.setattr(G, "h_coefficients_resident", resident)
    w = np.zeros((8, 1, 3), np.uint32)
    learned = {}
    G._h_out_of_core(m, w, log_m, budget, lambda name, x: x, None, learned)
    assert calls == [("device", budget, "cut"), ("spmv", budget, None), ("h", budget)]
    assert learned == {G.DEVICE_H: 0}
    calls.clear()
    G._h_out_of_core(m, w, log_m, budget, lambda name, x: x, None, learned)
    assert calls == [("spmv", budget, None), ("h", budget)]
    calls.clear()
    G._h_out_of_core(m, jnp.asarray(w), log_m, budget, lambda name, x: x)   # device w
    assert calls == [("spmv", budget, None), ("h", budget)]
    failure[0] = jax.errors.JaxRuntimeError("INTERNAL: something else")
    with pytest.raises(jax.errors.JaxRuntimeError, match="something else"):
        G._h_out_of_core(m, w, log_m, budget, lambda name, x: x)
    assert G.device_h_budget(9, 1, 3 * a.nbytes) is None     # three vectors and no line


def test_out_of_core_plan_budget(random_circuit):
    """``out_of_core_plan``: the whole budget's row blocks, or with a host
    witness the device h's (``device_h_plan``: a and b on the device, each
    matrix within what the planes existing by then leave); where that
    budget cannot hold them, the whole budget's (the two-vector h);
    ValueError where not even the whole budget holds a block."""
    r1cs, _ = random_circuit
    host = pce.to_host(pce.extract(r1cs, **SMALL))
    big = 10**6
    p = G.out_of_core_plan(host, big)
    assert (p.budget, p.on_device, p.budgets) == (big, (), (big, big, big))
    sb = G.device_h_budget(host.rows, 1, big)
    assert sb is not None and sb < big
    p = G.out_of_core_plan(host, big, host_witness=True)
    vec = 32 << G.domain_log(host.rows)
    assert (p.budget, p.on_device) == (big, (0, 1))
    assert p.budgets == (big - vec, big - 2 * vec, big) and min(p.budgets) == sb
    lo, hi = 1, big                          # the least budget whose blocks plan
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            pce.plan_blocks(host, 1, mid)
            hi = mid
        except ValueError:
            lo = mid + 1
    p = G.out_of_core_plan(host, lo, host_witness=True)
    assert (p.budget, p.on_device) == (lo, ())
    with pytest.raises(ValueError):
        G.out_of_core_plan(host, lo - 1, host_witness=True)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_row_blocks_any_cut_and_padding(random_circuit, layout):
    """``RowBlocks.smallest`` is the per-axis largest one-row block; a padded
    ``row_block`` of any rows [r0, r1) holds exactly their entries (the
    chunks straddling r0 and r1 masked) and only padding that
    ``ops.spmv.to_csr`` does not see; too small a shape is refused."""
    r1cs, _ = random_circuit
    x = pce.to_host(pce.extract(r1cs, **LAYOUTS[layout])).a
    rb = spmv.RowBlocks(x)
    ones = np.array([rb.counts(r, r + 1) for r in range(x.rows)])
    assert tuple(rb.smallest()) == tuple(ones.max(axis=0))
    if layout == "chunks-wide":                     # one chunk: every cut lies inside it
        assert x.chunks == 1 and rb.smallest().rows == 1
    if layout.startswith("ell"):                    # runs of one piece, or of several
        assert x.chunks == 0 and (rb.smallest().pieces == 1) == (layout == "ell-one-piece")
    indptr, cols, ids = spmv.to_csr(x, 0, 1)
    shape = spmv.BlockShape(*(s + 3 for s in spmv.whole_shape(x)))
    for r0, r1 in [(0, x.rows), (1, x.rows - 2), (3, 4), (x.rows // 2, x.rows // 2 + 5), (5, 5)]:
        block = spmv.row_block(rb, r0, r1, shape)
        assert block.rows == shape.rows and spmv.block_nbytes(x, shape) == sum(
            np.asarray(getattr(block, f)).nbytes for f in spmv.DATA_FIELDS)
        bp, bc, bi = spmv.to_csr(block, 0, 1)               # padding rows: empty
        assert np.array_equal(bp, np.pad(indptr[r0:r1 + 1] - indptr[r0],
                                         (0, shape.rows - (r1 - r0)), mode="edge"))
        assert np.array_equal(bc, cols[indptr[r0]:indptr[r1]])
        assert np.array_equal(bi, ids[indptr[r0]:indptr[r1]])
    with pytest.raises(ValueError, match="over"):
        spmv.row_block(rb, 0, x.rows, rb.counts(1, x.rows - 2))
    if x.pieces:                                    # padding pieces need a padding long row
        whole = spmv.whole_shape(x)
        with pytest.raises(ValueError, match="padding long row"):
            spmv.row_block(rb, 0, x.rows, whole._replace(pieces=whole.pieces + 1))


@pytest.mark.parametrize("layout", ["ell", "ell-one-piece"])
def test_padded_blocks_walk_no_run_longer_than_the_matrix(random_circuit, layout):
    """A plan's blocks share one shape, so a block with fewer pieces pads
    them, all in its last padding long row's run (one run as long as the
    padding: the 32GiB PoRep's out-of-core SpMV spent 2.27 s walking such
    runs, bench/NOTES.md hypothesis 80).  Every block with padding pieces
    has a padding long row, and the runs ``spmv`` walks (``run_counts`` of
    the live rows) are no longer than the matrix's longest run."""
    r1cs, _ = random_circuit
    host = pce.to_host(pce.extract(r1cs, **LAYOUTS[layout]))
    plan = pce.host_plan(host, 2, 40000, prepared=False)
    padding_run = 0
    for k, rb in enumerate(plan.row_blocks):
        longest = rb.smallest().pieces
        for j, (r0, r1) in enumerate(plan.plans[k].blocks):
            own, b = rb.counts(r0, r1), plan.block(k, j)
            if not b.pieces:
                continue
            assert own.pieces == b.pieces or own.long < plan.plans[k].shape.long
            live = np.asarray(b.long_rows) < b.rows
            assert live.sum() == own.long
            assert int(spmv.run_counts(b.piece_start, b.pieces, live).max()) <= longest
            padding_run = max(padding_run, int(spmv.run_counts(b.piece_start, b.pieces).max())
                              - longest)
    assert padding_run > 0              # the case arises here: some block pads its pieces


@pytest.mark.parametrize("pinned", [False, True])
def test_prepared_plan_equals_blocks_cut_per_call(random_circuit, pinned):
    """``pce.host_plan`` (the blocks cut once and, forced here, placed in
    pinned host memory as on a GPU) gives the same a, b, c and check as the
    blocks cut per call; a plan for another batch or budget is refused."""
    r1cs, w = random_circuit
    host = pce.to_host(pce.extract(r1cs, **LAYOUTS["chunks"]))
    if pinned and transfer.device_pinned_sharding(jax.devices()[0], pinned=True) is None:
        pytest.skip("no pinned_host memory kind on this device")
    plan = pce.host_plan(host, 2, 16000, pinned=pinned)
    leaves = jax.tree.leaves(plan.blocks)
    assert sum(map(len, plan.blocks)) >= 6 and leaves
    kinds = {x.sharding.memory_kind if isinstance(x, jax.Array) else "numpy" for x in leaves}
    assert kinds == ({transfer.PINNED} if pinned else {"numpy"})
    want = pce.evaluate_host(host, w, 16000, length=64, check=True)
    got = pce.evaluate_host(host, w, 16000, length=64, check=True, plan=plan)
    for x, y in zip(got, want):
        assert np.array_equal(x, y)
    for bad in (pce.host_plan(host, 1, 16000, prepared=False),
                pce.host_plan(host, 2, 40000, prepared=False)):
        with pytest.raises(ValueError, match="a plan for"):
            pce.evaluate_host(host, w, 16000, plan=bad)


def test_prepared_plan_pins_blocks_while_the_pool_has_room(random_circuit, monkeypatch,
                                                           caplog):
    """``host_plan``'s prepared blocks go to pinned host memory in turn while
    the pinned pool's room (``memory.pinned_room`` beside ``working`` and
    what is pinned already) holds them, or until pinning runs out of
    memory; the rest stay numpy (logged), and the plan evaluates as the
    blocks cut per call do."""
    r1cs, w = random_circuit
    host = pce.to_host(pce.extract(r1cs, **LAYOUTS["chunks"]))
    dev = jax.devices()[0]
    if transfer.device_pinned_sharding(dev, pinned=True) is None:
        pytest.skip("no pinned_host memory kind on this device")
    cut = pce.host_plan(host, 2, 16000, prepared=False)
    sizes = [sum(int(v.nbytes) for v in jax.tree.leaves(cut.block(k, j)))
             for k, p in enumerate(cut.plans) for j in range(len(p.blocks))]
    assert len(sizes) >= 6
    asked = []
    monkeypatch.setattr(memory, "pinned_in_use", lambda: 123)
    want = pce.evaluate_host(host, w, 16000, length=64, check=True)
    real = transfer.to_pinned

    def oom_after(n):
        calls = [0]

        def to_pinned(tree, d, pinned=None):
            calls[0] += 1
            if calls[0] > n:
                raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: pinned host")
            return real(tree, d, pinned)
        return to_pinned

    room = sum(sizes[:3]) + sizes[3] - 1                    # three blocks fit, not four
    for r, to_pinned, n_pinned in ((room, real, 3), (1 << 40, oom_after(2), 2),
                                   (1 << 40, real, len(sizes))):
        monkeypatch.setattr(memory, "pinned_room", lambda d, reserve=0, in_use=0, r=r: asked.append(
            (reserve, in_use)) or r)
        monkeypatch.setattr(transfer, "to_pinned", to_pinned)
        caplog.clear()
        plan = pce.host_plan(host, 2, 16000, dev, pinned=True, working=777)
        assert asked[-1] == (777, 123)
        kinds = [jax.tree.leaves(b)[0].sharding.memory_kind
                 if isinstance(jax.tree.leaves(b)[0], jax.Array) else "numpy"
                 for blocks in plan.blocks for b in blocks]
        assert kinds == [transfer.PINNED] * n_pinned + ["numpy"] * (len(sizes) - n_pinned)
        assert ("stay in pageable memory" in caplog.text) == (n_pinned < len(sizes))
        got = pce.evaluate_host(host, w, 16000, length=64, check=True, plan=plan)
        for x, y in zip(got, want):
            assert np.array_equal(x, y)


def test_host_plan_prepared_where_the_host_has_room(random_circuit, monkeypatch, caplog):
    """``host_plan(prepared=None)``: the blocks prepared where the host's
    available memory holds them (about m's bytes) beside ``working`` and the
    reserve, else cut per call, logged; the unknown host prepares."""
    r1cs, _ = random_circuit
    host = pce.to_host(pce.extract(r1cs, **LAYOUTS["chunks"]))
    need = host.nbytes + 1000 + memory.HOST_RESERVE
    for have, prepared in ((need, True), (need - 1, False), (None, True)):
        monkeypatch.setattr(memory, "host_available", lambda have=have: have)
        caplog.clear()
        plan = pce.host_plan(host, 2, 16000, prepared=None, working=1000)
        assert (plan.blocks is not None) == prepared
        assert ("cut per proof" in caplog.text) == (not prepared)


def test_out_of_core_plan_counts_the_planned_paths_host_vectors(random_circuit, monkeypatch):
    """``out_of_core_plan`` prepares the blocks beside the host vectors of the
    path it plans: the device h's two (c and staging), the two-vector h's
    four; session 46's 32GiB run, its key pinned, cut them per proof for
    want of 1.4 GB counted for a and b, which were on the device (spmv 8.1 s
    against 1.8 s)."""
    r1cs, _ = random_circuit
    host = pce.to_host(pce.extract(r1cs, **SMALL))
    vec = 32 << G.domain_log(host.rows)
    assert G.out_of_core_host_bytes(host.rows) == 4 * vec
    assert G.out_of_core_host_bytes(host.rows, 2, device_h=True) == 2 * 2 * vec
    have = host.nbytes + 2 * vec + memory.HOST_RESERVE      # room beside two vectors, not four
    monkeypatch.setattr(memory, "host_available", lambda: have)
    big = 10**6
    p = G.out_of_core_plan(host, big, host_witness=True)
    assert p.on_device == (0, 1) and p.blocks is not None
    p = G.out_of_core_plan(host, big)
    assert p.on_device == () and p.blocks is None
    monkeypatch.setattr(memory, "host_available", lambda: have - 1)
    assert G.out_of_core_plan(host, big, host_witness=True).blocks is None


@pytest.mark.parametrize("batch, shape, rows", [(1, (64,), 16), (2, (4, 16), 16),
                                               (1, (8,), 16), (3, (40,), 7)])
def test_write_planes_sets_the_blocks_rows_only(batch, shape, rows):
    """``pce._write_planes`` (hypothesis 90: slices, not a scatter) sets flat
    elements [r0, r0 + live) of every limb plane to the block's first live
    rows and leaves every other element as it was, for blocks anywhere in the
    plane (the last one's window clamped to its end), live short of the
    block's rows or 0, and blocks longer than the plane."""
    rng = np.random.default_rng(3)
    L = int(np.prod(shape))
    for r0 in range(0, L + 1, 3):
        top = min(rows, L - r0)
        for live in sorted({0, min(1, top), max(0, top - 2), top}):
            planes = tuple(jnp.asarray(rng.integers(0, 2**32, (batch,) + shape, np.uint32))
                           for _ in range(8))
            want = [np.array(p).reshape(batch, L) for p in planes]
            y = rng.integers(0, 2**32, (8, batch, rows), np.uint32)
            for i in range(8):
                want[i][:, r0:r0 + live] = y[i][:, :live]
            got = pce._write_planes(planes, jnp.asarray(y), jnp.int32(r0), jnp.int32(live))
            for i in range(8):
                assert got[i].shape == (batch,) + shape
                np.testing.assert_array_equal(np.asarray(got[i]).reshape(batch, L), want[i])


def test_evaluate_host_budget_too_small(random_circuit):
    r1cs, w = random_circuit
    host = pce.to_host(pce.extract(r1cs, **LAYOUTS["ell"]))
    with pytest.raises(ValueError, match=r"smallest row block .* over the budget of 5000"):
        pce.evaluate_host(host, w, 5000)
    with pytest.raises(ValueError, match="length"):
        pce.evaluate_host(host, w, 10**9, length=host.rows - 1)


def test_first_bad_host_blocks_are_aligned_and_find_the_first_bad_row(monkeypatch):
    """The out-of-core satisfaction check over host a, b, c: blocks of a
    multiple of ``CHECK_ALIGN`` rows when the budget allows more (no padded
    copies in Fr.mul's kernel), the last one overlapping; the first row with
    a·b != c per instance, checked against Python ints."""
    rows, B = 3 * pce.CHECK_ALIGN + 100, 2
    rng = np.random.default_rng(7)
    av = [[int(x) for x in rng.integers(0, 2**62, rows)] for _ in range(B)]
    bv = [[int(x) for x in rng.integers(0, 2**62, rows)] for _ in range(B)]
    cv = [[x * y % Fr.p for x, y in zip(p, q)] for p, q in zip(av, bv)]
    a, b = (np.asarray(Fr.from_int(v)) for v in (av, bv))       # (8, B, rows) Montgomery
    bad = {0: 2 * pce.CHECK_ALIGN + 60, 1: None}                  # instance -> corrupted row
    cv[0][bad[0]] = (cv[0][bad[0]] + 1) % Fr.p
    cv[0][rows - 1] = 0                                           # a later bad row: not first
    c = np.asarray(Fr.from_int(cv))
    seen = []
    real = pce.satisfied
    monkeypatch.setattr(pce, "satisfied", lambda *x: seen.append(x[0].shape) or real(*x))
    budget = 5 * 32 * B * (2 * pce.CHECK_ALIGN + 50)             # room for 8242 rows
    got = pce.first_bad_host(a, b, c, rows, budget)
    assert got.tolist() == [bad[0], -1]
    assert seen == [(8, B, 2 * pce.CHECK_ALIGN)] * 2
    assert pce.first_bad_host(a, b, np.asarray(Fr.from_int(
        [[x * y % Fr.p for x, y in zip(p, q)] for p, q in zip(av, bv)])), rows,
        budget).tolist() == [-1, -1]
    with pytest.raises(ValueError, match="per row, over the budget"):
        pce.first_bad_host(a, b, c, rows, 5 * 32 * B - 1)


@pytest.fixture(scope="module")
def cubic_circuit():
    rng = random.Random(3)
    xs = [[rng.randrange(Fr.p) for _ in range(K)] for _ in range(BATCH)]
    bits = np.array([[1, 0, 1], [1, 1, 0]], np.uint32)
    r1cs = C.record(cubic, name="cubic")
    w = C.witness(cubic, (jnp.asarray(Fr.from_int(xs)), jnp.asarray(bits)), in_axes=(1, 0))
    pk, vk = G.setup(r1cs, seed=1)
    ys = [[(x ** 3 + x) % Fr.p for x in row] for row in xs]
    return pce.extract(r1cs), w, G.ProvingKey(*(np.asarray(x) for x in pk)), vk, ys


def _spy_forms(monkeypatch) -> list:
    """The forms of the out-of-core h that run, in order."""
    forms = []
    for name in ("h_coefficients_resident", "h_coefficients_host", "h_coefficients_device"):
        monkeypatch.setattr(G, name, functools.partial(
            lambda real, name, *a, **k: forms.append(name) or real(*a, **k),
            getattr(G, name), name))
    return forms


def _same_proof(got, want):
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert np.array_equal(np.asarray(x), np.asarray(y))


STAGES = {"spmv", "check", "ntt", "msm_a", "msm_b_g1", "msm_b_g2", "msm_l", "msm_h", "combine", "total"}
SMALL_MSM = dict(window=4, lanes=8, small_lanes=4, min_steps=4)


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_prove_out_of_core_equals_in_core(cubic_circuit, monkeypatch):
    """One budget for everything (the MSMs take it, and it holds h's device
    form), the SpMV's blocks prepared once (pinned, as on a GPU, where the
    CPU has that memory kind): the proof equals the in-core one."""
    m, w, host_pk, *_ = cubic_circuit
    budget = M.working_set_bytes(G2, 8, 2, 4, M.MSMConfig(**SMALL_MSM))
    want, _ = G.prove(host_pk, m, w, seed=5, msm_config=M.MSMConfig(**SMALL_MSM, budget_bytes=budget))
    host = pce.to_host(m)
    forms = _spy_forms(monkeypatch)
    pinned = transfer.device_pinned_sharding(jax.devices()[0], pinned=True) is not None
    plan = pce.host_plan(host, BATCH, budget, pinned=pinned)
    got, times = G.prove(host_pk, host, w, seed=5, msm_config=M.MSMConfig(**SMALL_MSM),
                         out_of_core_budget=budget, host_plan=plan)
    assert forms == ["h_coefficients_resident"]
    _same_proof(got, want)
    assert set(times) == STAGES


@pytest.mark.slow
@pytest.mark.parametrize("held", [False, True])
def test_prove_out_of_core_from_a_host_witness(cubic_circuit, monkeypatch, held):
    """A host witness (hypothesis 83): a and b evaluated into device planes,
    h on the device (``h_coefficients_device``), H's MSM first, then w put
    on the device for the others (stage witness_put): the proof equals the
    in-core one; the plan built by ``device_h_plan`` is the one used.  A
    witness held in pinned memory (``transfer.fetch_held``, hypothesis 91)
    is put back whole by ``put_held``, twice (the SpMV's, witness_put's)."""
    m, w, host_pk, *_ = cubic_circuit
    budget = M.working_set_bytes(G2, 8, 2, 4, M.MSMConfig(**SMALL_MSM))
    want, _ = G.prove(host_pk, m, w, seed=5, msm_config=M.MSMConfig(**SMALL_MSM, budget_bytes=budget))
    host = pce.to_host(m)
    forms = _spy_forms(monkeypatch)
    plan = G.device_h_plan(host, BATCH, budget)
    used, real = [], pce.evaluate_host
    monkeypatch.setattr(pce, "evaluate_host",
                        lambda *a, **k: used.append(k["plan"]) or real(*a, **k))
    order, whole, real_put = [], [], transfer.put_held
    monkeypatch.setattr(transfer, "put_held", lambda x, dev=None: whole.append(x.shape) or
                        real_put(x, dev))
    hw = transfer.fetch_held(jnp.asarray(w), pinned=True) if held else np.asarray(w)
    assert isinstance(hw, transfer.PinnedView) is held
    got, times = G.prove(host_pk, host, hw, seed=5,
                         msm_config=M.MSMConfig(**SMALL_MSM), out_of_core_budget=budget,
                         host_plan=plan, on_stage=order.append)
    assert forms == ["h_coefficients_device"] and used == [plan]
    _same_proof(got, want)
    assert set(times) - {"paused"} == STAGES | {"witness_put"}
    assert order.index("msm_h") < order.index("witness_put") < order.index("msm_a")
    assert whole == ([hw.shape] * 2 if held else [])


@pytest.mark.slow
def test_prove_out_of_core_over_host_vectors(cubic_circuit, monkeypatch):
    """SpMV and NTT in small blocks (h over host vectors: 8000 bytes cannot
    hold two vectors and a line), the MSMs within the configured budget: the
    proof equals the in-core one (slow, ~4 CPU-min: the host form's h is
    checked against the device's in ``test_four_step.py``)."""
    m, w, host_pk, *_ = cubic_circuit
    cfg = M.MSMConfig(**SMALL_MSM, budget_bytes=M.working_set_bytes(
        G2, 8, 2, 4, M.MSMConfig(**SMALL_MSM)))
    want, _ = G.prove(host_pk, m, w, seed=5, msm_config=cfg)
    host = pce.to_host(m)
    assert all(len(p.blocks) > 1 for p in pce.plan_blocks(host, BATCH, 8000))
    programs = spy_programs(monkeypatch)
    forms = _spy_forms(monkeypatch)
    got, times = G.prove(host_pk, host, w, seed=5, msm_config=cfg, out_of_core_budget=8000)
    assert forms == ["h_coefficients_host"]
    # one SpMV program per block signature (A's ELL width is not B's and C's)
    assert len(programs) == len({spmv.block_signature(x) for x in (m.a, m.b, m.c)}) == 2
    _same_proof(got, want)
    assert set(times) == STAGES


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_prove_out_of_core_refuses_unsatisfied(cubic_circuit):
    m, w, host_pk, *_ = cubic_circuit
    bad = w.at[:, 1, -1].set(jnp.asarray(Fr.from_int([7]))[:, 0])   # instance 1, last aux
    with pytest.raises(ValueError, match="first failing row") as in_core:
        G.prove(host_pk, m, bad, seed=5)
    with pytest.raises(ValueError, match="first failing row") as out:
        G.prove(host_pk, pce.to_host(m), bad, seed=5, out_of_core_budget=8000)
    assert str(out.value) == str(in_core.value)
    assert "[(1, " in str(out.value)
    with pytest.raises(ValueError, match="needs out_of_core_budget"):
        G.prove(host_pk, m, w, host_plan=pce.host_plan(pce.to_host(m), BATCH, 8000))
