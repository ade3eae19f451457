"""The proving engine (jaxprove.engine): scheduler and residency as pure
pieces, then the threaded engine with a fast stand-in prover (priority
order, batching, cancellation, eviction under a small budget, failing jobs
isolated, two workers), and one test making REAL Groth16 proofs of the cubic
circuit through the engine, checked with py_ecc's pairing."""
from __future__ import annotations

import dataclasses
import hashlib
import random
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprove import engine as E
from jaxprove.engine import Priority, WorkItem
from ops import msm as M

P = Priority


# ---------------------------------------------------------------- pure pieces
def _item(prio, seq, part=0, topo="t/1", enq=0.0):
    return WorkItem(prio, seq, part, f"job{seq}", topo, enq)


def test_scheduler_priority_then_oldest_then_partition():
    s = E.Scheduler(max_batch_size=1)
    items = [_item(P.NORMAL, 1, 1, "porep"), _item(P.NORMAL, 1, 0, "porep"),
             _item(P.HIGH, 2, 0, "window"), _item(P.NORMAL, 0, 0, "snap"),
             _item(P.CRITICAL, 3, 0, "winning"), _item(P.LOW, 4, 0, "porep")]
    for it in random.Random(0).sample(items, len(items)):
        s.add(it)
    order = []
    while len(s):
        batch, _ = s.next_batch(now=0.0)
        order.append((batch[0].group, batch[0].seq, batch[0].partition))
    assert order == [("winning", 3, 0), ("window", 2, 0), ("snap", 0, 0), ("porep", 1, 0),
                     ("porep", 1, 1), ("porep", 4, 0)]
    assert s.next_batch(now=0.0) == (None, None)


def test_scheduler_batches_by_group_with_max_size_and_wait():
    s = E.Scheduler(max_batch_size=3, max_batch_wait_s=10.0)
    for seq in range(4):
        s.add(_item(P.NORMAL, seq, 0, "a", enq=100.0 + seq))
    s.add(_item(P.NORMAL, 9, 0, "b", enq=101.0))
    batch, _ = s.next_batch(now=101.0)                     # a is full: goes at once
    assert [i.seq for i in batch] == [0, 1, 2]
    batch, wait = s.next_batch(now=102.0)                  # a has 1 item, b has 1: both wait
    assert batch is None and wait == pytest.approx(9.0)    # b's oldest item: 101 + 10 − 102
    batch, _ = s.next_batch(now=111.5)                     # b is due (a, enqueued at 103, not yet)
    assert [i.group for i in batch] == ["b"]
    batch, _ = s.next_batch(now=111.5, flush=True)         # draining flushes a
    assert [i.seq for i in batch] == [3]
    s.add(_item(P.NORMAL, 10, 0, "a", enq=200.0))
    s.add(_item(P.HIGH, 11, 0, "a", enq=200.0))            # a PoSt item never waits
    batch, _ = s.next_batch(now=200.0)
    assert [i.seq for i in batch] == [11, 10]
    assert [E.padded_size(n, 6) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 4, 6, 6]


def test_scheduler_remove_job_and_counts():
    s = E.Scheduler(max_batch_size=2)
    s.add(_item(P.NORMAL, 1, 0))
    s.add(_item(P.NORMAL, 1, 1))
    s.add(_item(P.CRITICAL, 2, 0))
    assert s.counts()["by_priority"]["NORMAL"] == 2
    assert s.ahead_of((-int(P.NORMAL), 1, 1)) == 2        # the CRITICAL item and partition 0
    assert s.counts()["by_kind"] == {"t": 3}
    assert s.remove_job("job1") == 2 and len(s) == 1
    with pytest.raises(ValueError, match="max_batch_size"):
        E.Scheduler(max_batch_size=0)


def test_residency_lru_eviction_respects_pins():
    r = E.Residency(budget_bytes=100)
    assert r.put("a", "A", 40, now=0) == []
    assert r.put("b", "B", 40, now=1) == []
    assert r.get("a", now=2) == "A"                        # b is now least recently used
    assert r.put("c", "C", 40, now=3) == ["b"]
    r.pin("a")
    r.pin("c")
    assert r.put("d", "D", 50, now=4) == []                # nothing idle: admitted over budget
    assert r.used_bytes == 130
    r.unpin("a")
    assert r.make_room(0) == ["a"]                          # back under the budget
    assert [e["key"] for e in r.entries(now=5)] == ["c", "d"]
    assert r.evict(lambda k: k == "c") == []               # pinned: stays
    r.unpin("c")
    assert r.evict() == ["c", "d"] and r.used_bytes == 0 and r.evictions == 4


def test_registry_and_priorities():
    reg = E.builtin_registry(cubic_sizes=(2,), sha256_sizes=())
    spec = reg.get("cubic", 2)
    assert spec.topology == "cubic-2"
    assert spec.split({"x": [[1, 2], [3, 4]]}) == [[1, 2], [3, 4]]
    for bad in ({"x": [[1]]}, {"x": [[1, "2"]]}, {"x": []}, {"y": 1}, {"x": [[-1, 2]]}):
        with pytest.raises(ValueError):
            spec.split(bad)
    with pytest.raises(ValueError, match="unknown proof kind"):
        reg.get("porep", 2)
    with pytest.raises(ValueError, match="already registered"):
        reg.register(spec)
    assert E.parse_priority("critical") == P.CRITICAL and E.parse_priority(2) == P.HIGH
    with pytest.raises(ValueError, match="priority"):
        E.parse_priority("urgent")


# ---------------------------------------------------------------- a fast stand-in prover
UNLUCKY = 13        # the toy witness builder refuses this value (bad input found late)


def toy_spec(kind, topology, priority=P.NORMAL, sector_size=1):
    def split(inputs):
        vals = inputs["values"] if isinstance(inputs, dict) else None
        if not isinstance(vals, list) or not vals or not all(isinstance(v, int) for v in vals):
            raise ValueError("toy: inputs must be {'values': [int per partition]}")
        return vals

    def witness(parts):
        if UNLUCKY in parts:
            raise ValueError(f"toy: cannot build a witness for {UNLUCKY}")
        return np.asarray([parts], np.int64)              # (1, batch): instance axis 1

    return E.CircuitSpec(kind, sector_size, topology, lambda: None, split, witness, priority)


def toy_registry():
    return E.Registry([toy_spec("porep", "porep-t", P.NORMAL), toy_spec("snap", "snap-t"),
                       toy_spec("window-post", "window-t", P.HIGH),
                       toy_spec("winning-post", "winning-t", P.CRITICAL)])


def toy_proof(topology, v) -> bytes:
    return (hashlib.sha256(f"{topology}:{v}".encode()).digest() * 6)[:192]


class ToyProver:
    """Proof of value v under topology t: sha256("t:v") repeated to 192
    bytes; a negative value is an unsatisfied witness; ``wrong`` values get
    a proof that fails verification.  ``learned``: budgets its proofs
    settle on (as ``memory.halving`` records them in ``Resident.budgets``).
    Records loads and proved batches."""

    def __init__(self, sizes=None, gate: threading.Event | None = None, delay=0.0, wrong=(),
                 learned=None):
        self.sizes, self.gate, self.delay, self.wrong = sizes or {}, gate, delay, set(wrong)
        self.learned = learned or {}
        self.loads, self.batches, self.threads = [], [], set()
        self.proving = threading.Event()

    def load(self, spec, device):
        self.loads.append(spec.topology)
        return E.Resident(spec.topology, spec.topology, None, self.sizes.get(spec.topology, 1),
                          budgets={})

    def check(self, res, w):
        return [None if v >= 0 else "unsatisfied witness" for v in np.asarray(w)[0]]

    def prove(self, res, w, use, msm_budget_bytes, on_stage=None):
        t0 = time.perf_counter()
        self.proving.set()
        if self.gate is not None:
            assert self.gate.wait(20), "test gate never opened"
        time.sleep(self.delay)
        vals = [int(v) for v in np.asarray(w)[0]]
        res.budgets.update(self.learned)
        self.batches.append((res.pk, vals, list(use), msm_budget_bytes))
        self.threads.add(threading.current_thread().name)
        proofs = [toy_proof(res.pk, v + (v in self.wrong)) for v in vals]
        return proofs, [[v] for v in vals], {"msm_a": 0.001, "total": time.perf_counter() - t0}

    def verify(self, res, public, proof):
        return [p == toy_proof(res.vk, x[0]) for p, x in zip(proof, public)]

    def encode(self, proof):
        return list(proof)


def make_engine(prover, **cfg):
    devices = cfg.pop("devices", None)
    return E.Engine(toy_registry(), E.EngineConfig(**cfg), prover,
                    devices=devices or jax.devices()[:1])


def _done(eng, jid, timeout=30):
    r = eng.wait(jid, timeout=timeout)
    assert r is not None, f"job {jid} did not finish"
    return r


# ---------------------------------------------------------------- engine with the stand-in
def test_engine_priority_order_and_timings():
    prover = ToyProver()
    eng = make_engine(prover)
    jobs = [eng.submit("porep", 1, {"values": [1, 2]}),
            eng.submit("window-post", 1, {"values": [3]}),
            eng.submit("snap", 1, {"values": [4]}),
            eng.submit("winning-post", 1, {"values": [5]}),
            eng.submit("porep", 1, {"values": [6]}, priority="low")]
    assert [eng.queue_position(j) for j in jobs] == [2, 1, 4, 0, 5]
    eng.start()
    results = [_done(eng, j) for j in jobs]
    assert eng.queue_position(jobs[0]) is None
    eng.shutdown()
    assert [b[1] for b in prover.batches] == [[5], [3], [1], [2], [4], [6]]
    r = results[0]
    assert r.status == "done" and r.error is None
    assert r.proof == toy_proof("porep-t", 1) + toy_proof("porep-t", 2)
    assert r.public == [[1], [2]]
    assert {"queue_wait", "witness", "load", "check", "msm_a", "prove", "verify", "encode",
            "total"} <= set(r.timings)
    assert results[4].timings["queue_wait"] >= results[3].timings["queue_wait"]


def test_engine_batches_share_a_kind_and_pad_shapes():
    prover = ToyProver()
    eng = make_engine(prover, max_batch_size=4, msm_budget_bytes=1 << 20)
    a = eng.submit("porep", 1, {"values": [10, 11, 12]})
    b = eng.submit("snap", 1, {"values": [20]})
    c = eng.submit("porep", 1, {"values": [30, 31, 32, 33]})
    eng.start()
    for j in (a, b, c):
        assert _done(eng, j).status == "done"
    eng.shutdown()
    got = [(t, v, u) for t, v, u, _ in prover.batches]
    assert got == [("porep-t", [10, 11, 12, 30], [True] * 4),
                   ("snap-t", [20], [True]),                      # the older job goes first
                   ("porep-t", [31, 32, 33, 31], [True] * 3 + [False])]   # padded to 4
    assert {m for *_, m in prover.batches} == {1 << 20}   # the streaming budget reaches the MSMs
    assert _done(eng, c).proof == b"".join(toy_proof("porep-t", v) for v in (30, 31, 32, 33))
    assert eng.status()["counters"]["batches"] == 3


def test_engine_max_wait_holds_a_partial_batch():
    prover = ToyProver()
    eng = make_engine(prover, max_batch_size=4, max_batch_wait_s=0.4).start()
    t = time.monotonic()
    j = eng.submit("porep", 1, {"values": [1]})
    r = _done(eng, j)
    assert time.monotonic() - t >= 0.35 and r.timings["queue_wait"] >= 0.35
    t = time.monotonic()
    w = eng.submit("winning-post", 1, {"values": [2]})            # CRITICAL: no waiting
    assert _done(eng, w).timings["queue_wait"] < 0.3
    eng.shutdown()


def test_engine_cancellation():
    gate = threading.Event()
    prover = ToyProver(gate=gate)
    eng = make_engine(prover).start()
    x = eng.submit("porep", 1, {"values": [1, 2, 3]})
    assert prover.proving.wait(10)                 # partition 0 of x is on the device
    y = eng.submit("porep", 1, {"values": [4]})
    z = eng.submit("snap", 1, {"values": [5]})
    assert eng.cancel(y) and eng.cancel(x)
    assert not eng.cancel(x)                       # already final
    gate.set()
    assert _done(eng, z).status == "done"
    for j in (x, y):
        r = _done(eng, j)
        assert r.status == "cancelled" and r.proof == b""
    eng.shutdown()
    proved = [v for _, vals, _, _ in prover.batches for v in vals]
    assert 4 not in proved and 3 not in proved and 5 in proved
    with pytest.raises(KeyError):
        eng.cancel("no-such-job")


def test_engine_failing_jobs_do_not_harm_others():
    prover = ToyProver(wrong={7})
    eng = make_engine(prover, max_batch_size=4)
    good = eng.submit("porep", 1, {"values": [1]})
    unsat = eng.submit("porep", 1, {"values": [-5]})
    late = eng.submit("porep", 1, {"values": [UNLUCKY]})
    unverified = eng.submit("porep", 1, {"values": [7]})
    bad = eng.submit("porep", 1, {"values": ["x"]})
    multi = eng.submit("porep", 1, {"values": [2, -1, 3]})
    good2 = eng.submit("porep", 1, {"values": [8]})
    eng.start()
    res = {k: _done(eng, j) for k, j in dict(good=good, unsat=unsat, late=late, bad=bad,
                                             unverified=unverified, multi=multi,
                                             good2=good2).items()}
    eng.shutdown()
    assert res["good"].status == res["good2"].status == "done"
    assert res["good"].proof == toy_proof("porep-t", 1)
    assert res["good2"].proof == toy_proof("porep-t", 8)
    assert res["bad"].status == "failed" and "bad input" in res["bad"].error
    assert res["unsat"].status == "failed" and "unsatisfied" in res["unsat"].error
    assert res["late"].status == "failed" and "cannot build a witness" in res["late"].error
    assert res["unverified"].status == "failed" and "did not verify" in res["unverified"].error
    assert res["multi"].status == "failed" and "partition 1" in res["multi"].error
    # the unsatisfied and unbuildable instances were never proved as themselves
    first = prover.batches[0]
    assert first[1][0] == 1 and first[2] == [True, False, False, True]


def test_engine_eviction_under_small_budget():
    prover = ToyProver(sizes={"porep-t": 60, "snap-t": 60, "window-t": 30})
    eng = make_engine(prover, budget_bytes=100)
    jobs = [eng.submit("porep", 1, {"values": [1]}), eng.submit("snap", 1, {"values": [2]}),
            eng.submit("porep", 1, {"values": [3]}), eng.submit("porep", 1, {"values": [4]}),
            eng.submit("window-post", 1, {"values": [5]}, priority="normal")]
    eng.start()
    for j in jobs:
        assert _done(eng, j).status == "done"
    assert prover.loads == ["porep-t", "snap-t", "porep-t", "window-t"]
    st = eng.status()
    assert sorted(e["topology"] for e in st["resident"]) == ["porep-t", "window-t"]
    assert st["resident_bytes"] == [90] and st["evictions"] == 2
    assert eng.evict("porep-t") == [(0, "porep-t")]
    assert [e["topology"] for e in eng.preload("snap", 1)] == ["window-t", "snap-t"]
    assert prover.loads[-1] == "snap-t"
    eng.shutdown()


def test_engine_two_workers_and_metrics():
    prover = ToyProver(delay=0.1)
    d = jax.devices()[0]
    eng = make_engine(prover, devices=[d, d])
    jobs = [eng.submit("porep", 1, {"values": [i]}) for i in range(8)]
    eng.start()
    assert all(_done(eng, j).status == "done" for j in jobs)
    assert len(prover.threads) == 2                # both device workers proved batches
    per_worker = [d["proved_batches"] for d in eng.status()["devices"]]
    assert sum(per_worker) == len(prover.batches) and min(per_worker) > 0
    text = eng.metrics()
    for i, n in enumerate(per_worker):
        assert f'jaxprove_worker_batches_total{{worker="{i}"}} {n}' in text
    assert 'jaxprove_jobs_finished_total{kind="porep",status="done"} 8' in text
    assert "jaxprove_workers 2" in text
    assert 'jaxprove_stage_seconds_count{stage="total"} 8' in text
    assert 'jaxprove_stage_seconds_bucket{stage="total",le="+Inf"} 8' in text
    # every proof step took ≥ 0.1 s (the stand-in's delay): none in the 0.01 and 0.03 buckets
    assert 'jaxprove_stage_seconds_bucket{stage="prove",le="0.03"} 0' in text
    assert "# TYPE jaxprove_stage_seconds histogram" in text
    assert "jaxprove_learned_budget_bytes{" not in text          # no step ran out of memory
    assert all(e["learned_budgets"] == {} for e in eng.status()["resident"])
    for line in text.splitlines():                 # every sample line: name{labels} number
        if not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])
    handed = eng.shutdown()
    assert handed == []
    with pytest.raises(RuntimeError, match="not accepting"):
        eng.submit("porep", 1, {"values": [1]})


def test_engine_reports_the_budgets_its_proofs_settled_on():
    """A step that ran out of device memory and served within a halved budget
    (``memory.halving`` records it in the resident circuit's ``budgets``)
    shows in the status's residency entry and as a Prometheus gauge."""
    prover = ToyProver(learned={"prove: msm_h": 1 << 30})
    eng = make_engine(prover).start()
    assert _done(eng, eng.submit("porep", 1, {"values": [1]})).status == "done"
    (entry,) = eng.status()["resident"]
    assert entry["topology"] == "porep-t" and entry["learned_budgets"] == {"prove: msm_h": 1 << 30}
    assert ('jaxprove_learned_budget_bytes{worker="0",topology="porep-t",step="prove: msm_h"} '
            f'{1 << 30}') in eng.metrics()
    eng.shutdown()


def test_engine_shutdown_hands_back_queued_jobs():
    gate = threading.Event()
    prover = ToyProver(gate=gate)
    eng = make_engine(prover).start()
    first = eng.submit("porep", 1, {"values": [1]})
    assert prover.proving.wait(10)
    rest = [eng.submit("porep", 1, {"values": [v]}) for v in (2, 3, 4)]
    threading.Timer(0.2, gate.set).start()
    handed = eng.shutdown(drain=False, timeout=30)
    assert _done(eng, first).status == "done"      # the batch on the device finished
    # one batch may already have been taken for its witnesses (lookahead); it finishes too
    finished = [j for j in rest if eng.peek(j).status == "done"]
    assert sorted(handed + finished) == sorted(rest) and len(handed) >= 2


# ---------------------------------------------------------------- real Groth16 proofs
MARK = 7                     # a cubic instance with x_0 = MARK gets a bad witness


def _cubic_with_bad(k: int) -> E.Registry:
    """The cubic kind whose witness has its last aux value set to 1 (unsatisfied)
    in every instance with x_0 = MARK."""
    good = E.cubic_spec(k)

    def witness(parts):
        w = good.witness(parts)
        for i, p in enumerate(parts):
            if p[0] == MARK:
                w = w.at[:, i, -1].set(w[:, i, 0])
        return w

    return E.Registry([dataclasses.replace(good, witness=witness)])


def test_groth16_prover_keys_and_satisfaction_check(tmp_path):
    """The real prover's parts short of the MSMs: a missing key is a clear
    error unless setup on first use; the satisfaction check (PCE SpMV) names
    the unsatisfied instance, checked against the reference checker."""
    from circuits import cs as C
    from jaxprove import pce

    spec = E.cubic_spec(2)
    prover = E.Groth16Prover(keys_dir=str(tmp_path / "keys"))
    with pytest.raises(LookupError, match="no proving key .*cubic-2"):
        prover.load(spec, jax.devices()[0])
    r1cs = spec.record()
    res = E.Resident(None, None, pce.extract(r1cs), 0)
    w = spec.witness(spec.split({"x": [[3, 4], [5, 6]]}))
    w = w.at[:, 1, -1].set(w[:, 0, -1])                  # instance 1: one aux value wrong
    got = prover.check(res, w)
    assert got[0] is None and "does not satisfy" in got[1]
    ok, row = C.is_satisfied(r1cs, np.asarray(w[:, 1]))
    assert not ok and f"first failing row {row})" in got[1]
    # out of core (the 16 GB mode): the same verdicts from host matrices in row blocks; a
    # batch of one is left to its proof, which refuses it (groth16.prove)
    ooc = E.Groth16Prover(keys_in_host_memory=True, out_of_core_budget=8000, host_witness=False)
    host = E.Resident(None, None, pce.to_host(pce.extract(r1cs)), 0, mode="out-of-core",
                      out_of_core_budget=8000)
    assert ooc.check(host, w) == got
    assert ooc.check(host, w[:, 1:]) == [None]
    with pytest.raises(ValueError, match="needs keys_in_host_memory"):
        E.Groth16Prover(out_of_core_budget=8000)
    for bad in ({}, {"keys_in_host_memory": True}, {"out_of_core_budget": 8000},
                {"memory_mode": "resident"}, {"memory_mode": "streaming"}):
        with pytest.raises(ValueError, match="host_witness is a form of the 16 GB mode"):
            E.Groth16Prover(host_witness=True, **bad)
    for hw in (True, None):                          # None: the default
        home = E.Groth16Prover(keys_in_host_memory=True, out_of_core_budget=8000,
                               host_witness=hw).witness_home(w, "any")
        assert isinstance(home, np.ndarray) and np.array_equal(home, np.asarray(w))
    assert ooc.witness_home(w, "any") is w                # host_witness=False
    assert E.Groth16Prover(keys_in_host_memory=True).witness_home(w, "any") is w  # streaming
    # with a memory mode per circuit: in host memory once the circuit's mode is out of core
    from jaxprove import modes
    for hw in (True, None, False):
        auto = E.Groth16Prover(memory_mode="auto", host_witness=hw)
        auto._plans.update(big=modes.ModePlan("out-of-core", None, 8000),
                           small=modes.ModePlan("resident", None, None))
        assert auto.witness_home(w, "small") is w and auto.witness_home(w, "new") is w
        assert isinstance(auto.witness_home(w, "big"), np.ndarray) is (hw is not False)
    with pytest.raises(ValueError, match="positive number of bytes"):
        E.Groth16Prover(keys_in_host_memory=True, out_of_core_budget=0)


def test_groth16_prover_refuses_a_circuit_the_device_cannot_hold(monkeypatch, tmp_path):
    """A device too small for even the mode's floor (``modes.device_bytes_floor``)
    is refused at load, before anything is placed, with the mode that would fit
    named; a large enough one passes the check.  The floors by hand for the
    32GiB PoRep partition's counts: a 16 GB card is told to use the 16 GB mode."""
    from jaxprove import groth16 as G
    from jaxprove import memory
    from jaxprove import modes as MD

    n, aux, rows, mat = 130_170_221, 130_169_893, 130_278_541, 8 << 30
    m = 1 << 27
    streaming = mat + 32 * m + 32 * n + 96 * m
    assert MD.device_bytes_floor(n, aux, rows, mat, "streaming") == streaming
    assert MD.device_bytes_floor(n, aux, rows, mat, "resident") == \
        streaming + 96 * (2 * n + aux + m - 1) + 192 * n
    assert MD.device_bytes_floor(n, aux, rows, mat, "out-of-core") == 64 * n
    with pytest.raises(MemoryError, match=r"resident mode.*use the 16 GB mode.*"
                                          r"out_of_core_bytes = (\d+).*msm_budget_bytes = (\d+)"):
        MD.check_fits_device("porep-32GiB", n, aux, rows, mat, "resident", 15 << 30)
    # the suggested budgets: beside w (out of core) and beside w and w ‖ r (the MSMs), less 1 GiB
    assert MD.suggested_budgets(n, rows, mat, "out-of-core", 14 << 30) == {
        "out_of_core_bytes": (14 << 30) - 32 * n - (1 << 30),
        "msm_budget_bytes": (14 << 30) - 64 * n - (1 << 30)}
    assert MD.suggested_budgets(n, rows, mat, "streaming", 40 << 30) == {
        "msm_budget_bytes": (40 << 30) - mat - 64 * m - 64 * n - (1 << 30)}
    assert MD.suggested_budgets(n, rows, mat, "out-of-core", 8 << 30)["msm_budget_bytes"] == 256 << 20
    with pytest.raises(MemoryError, match=r"streaming mode.*use the 16 GB mode"):
        MD.check_fits_device("porep-32GiB", n, aux, rows, mat, "streaming", 15 << 30)
    with pytest.raises(MemoryError, match=r"resident mode.*in host memory \(streaming.*"
                                          r"msm_budget_bytes = "):
        MD.check_fits_device("porep-32GiB", n, aux, rows, mat, "resident", 40 << 30)
    with pytest.raises(MemoryError, match="no mode of jaxprove fits"):
        MD.check_fits_device("porep-32GiB", n, aux, rows, mat, "out-of-core", 4 << 30)
    MD.check_fits_device("porep-32GiB", n, aux, rows, mat, "resident", 104 << 30)   # an H200 pool
    MD.check_fits_device("porep-32GiB", n, aux, rows, mat, "resident", None)       # unknown: no check
    with pytest.raises(ValueError, match="mode must be one of"):
        MD.device_bytes_floor(n, aux, rows, mat, "auto")

    spec = E.cubic_spec(2)
    prover = E.Groth16Prover(keys_dir=str(tmp_path / "none"), setup_on_first_use=True,
                             setup_seed=1)
    placed = []
    monkeypatch.setattr(G, "place_keys", lambda *a, **k: placed.append(1))
    monkeypatch.setattr(memory, "device_capacity", lambda dev: 1000)
    with pytest.raises(MemoryError, match=r"circuit cubic-2 .*more than the device's"):
        prover.load(spec, jax.devices()[0])
    assert placed == []                      # refused before any key was read or placed


def _cubic_zero_keys():
    """(spec, matrices, (pk, vk)) of ``cubic_spec(2)`` with all-zero keys of
    the right shapes: for wiring tests that load a key and never prove."""
    from jaxprove import groth16 as G
    from jaxprove import pce
    spec = E.cubic_spec(2)
    m = pce.extract(spec.record())
    nv, na, nh = m.num_vars, m.num_aux, (1 << G.domain_log(m.rows)) - 1
    z = lambda *shape: np.zeros(shape, np.uint32)  # noqa: E731
    pk = G.ProvingKey(z(2, 12), z(2, 12), z(2, 2, 12), z(2, 12), z(2, 2, 12), z(2, 12, nv),
                      z(2, 12, nv), z(2, 2, 12, nv), z(2, 12, na), z(2, 12, nh))
    vk = G.VerifyingKey(z(2, 12), z(2, 2, 12), z(2, 2, 12), z(2, 2, 12), z(2, 12, m.num_inputs))
    return spec, m, (pk, vk)


def test_groth16_prover_out_of_core_wiring(monkeypatch):
    """What the 16 GB mode changes in the engine's prover, without proving
    (the proof itself: tests/test_out_of_core.py; end to end through the
    engine: the slow test below): ``load`` keeps the PCE matrices in host
    memory with no resident domain, the key split for streaming and held
    once;
    ``prove`` hands ``groth16.prove`` the out-of-core budget and the
    engine's MSM budget."""
    from jaxprove import groth16 as G

    spec, m, (pk, vk) = _cubic_zero_keys()
    nv = m.num_vars
    z = lambda *shape: np.zeros(shape, np.uint32)
    prover = E.Groth16Prover(keys_dir="stored", keys_in_host_memory=True,
                             out_of_core_budget=8000)
    loads = []
    monkeypatch.setattr(G, "load_keys", lambda *a, **k: loads.append(k) or (pk, vk))
    res = prover.load(spec, jax.devices()[0])
    assert loads == [{"host": True}]
    assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves(res.matrices))
    assert res.domain is None
    # the key split by the circuit's MSM positions, held ONCE in host memory: a second
    # load (another device) shares its arrays and reads no store; the unsplit key is gone
    assert all(isinstance(getattr(res.pk, f), M.SplitBases) for f in G.SPLIT_VECTORS)
    again = prover.load(spec, jax.devices()[0])
    assert len(loads) == 1 and again.pk.a.dense is res.pk.a.dense
    # the matrices extracted once and shared; the recorded circuit dropped after the load
    assert again.matrices is res.matrices and prover._r1cs == {}
    held = prover._host_keys[spec.topology][0]
    assert all(isinstance(getattr(held, f), M.SplitBases) for f in G.SPLIT_VECTORS)
    # a stored key of another circuit is refused by name, before any split
    monkeypatch.setattr(G, "load_keys", lambda *a, **k: (pk._replace(a=z(2, 12, nv + 1)), vk))
    with pytest.raises(ValueError, match=r"does not fit circuit .*\(%d variables" % (nv + 1)):
        E.Groth16Prover(keys_dir="stored", keys_in_host_memory=True).load(spec, jax.devices()[0])
    seen = {}

    def prove(pk, matrices, w, **kw):
        seen.update(kw)
        raise RuntimeError("stop here")

    monkeypatch.setattr(G, "prove", prove)
    w = spec.witness(spec.split({"x": [[3, 4]]}))
    with pytest.raises(RuntimeError, match="stop here"):
        prover.prove(res, w, [True], 1 << 20)
    assert seen["out_of_core_budget"] == 8000 and seen["msm_config"].budget_bytes == 1 << 20
    assert seen["domain"] is None
    # the SpMV's row blocks cut once at load for one instance, handed to every proof of one,
    # planned for the device h (the witness in host memory: the default)
    assert (res.host_plan.batch, res.host_plan.budget, res.host_plan.on_device) == (
        1, 8000, G.DEVICE_H_PLANES)
    assert res.host_plan.blocks is not None and seen["host_plan"] is res.host_plan


def test_groth16_prover_pins_the_held_key(monkeypatch):
    """``pinned_key``: the 16 GB mode's and streaming's held host key moves
    to pinned host memory once, at its first load (``groth16.pin_key``;
    on the CPU its pieces are numpy), and every load shares those pieces;
    a resident key is not pinned (it lives on the device)."""
    from jaxprove import groth16 as G
    from ops import transfer as T

    spec, m, (pk, vk) = _cubic_zero_keys()
    monkeypatch.setattr(G, "load_keys", lambda *a, **k: (pk, vk))
    from jaxprove import memory
    pins, rooms = [], []
    real_pin = G.pin_key
    monkeypatch.setattr(G, "pin_key", lambda box, dev=None, room=None: pins.append(
        (dev, room)) or order.append("pin_key") or real_pin(box, dev, room))
    order, real_plan = [], G.out_of_core_plan
    monkeypatch.setattr(G, "out_of_core_plan", lambda *a, **k: order.append(
        "out_of_core_plan") or real_plan(*a, **k))
    # hypothesis 92: the room left to the key is the pool's less what each proof pins and
    # all that is pinned already (other circuits' keys and prepared row blocks)
    monkeypatch.setattr(memory, "pinned_room", lambda dev, reserve=0, in_use=0: rooms.append(
        (reserve, in_use)) or 1 << 40)
    monkeypatch.setattr(memory, "pinned_in_use", lambda: 4321)
    dev = jax.devices()[0]
    for kw, reserve in (({"out_of_core_budget": 8000}, G.proof_pinned_bytes(m, True, 2)),
                        ({}, 0)):                           # the 16 GB mode, streaming
        pins.clear(), rooms.clear(), order.clear()
        prover = E.Groth16Prover(keys_dir="stored", keys_in_host_memory=True, pinned_key=True,
                                 **kw)
        res = prover.load(spec, dev)
        assert pins == [(dev, 1 << 40)] and rooms == [(reserve, 4321)]
        # the row blocks are pinned first, so that the key's room counts them as pinned
        assert order == (["out_of_core_plan", "pin_key"] if kw else ["pin_key"])
        for f in G.POINT_VECTORS:
            v = getattr(res.pk, f)
            parts = (v.bits, v.dense) if isinstance(v, M.SplitBases) else (v,)
            assert all(isinstance(x, T.PinnedVector) for x in parts), f
        assert res.pk.a.dense.shape == pk.a.shape[:-1] + (res.pk.a.dense.n,)
        again = prover.load(spec, dev)                     # held once: pinned once
        assert len(pins) == 1 and again.pk.h is res.pk.h and again.pk.a.dense is res.pk.a.dense
    pins.clear()
    res = E.Groth16Prover(keys_dir="stored", pinned_key=True).load(spec, dev)
    assert pins == [] and isinstance(res.pk.h, jax.Array)   # resident: on the device


def test_groth16_prover_memory_mode_auto(monkeypatch):
    """``memory_mode="auto"``: each circuit's mode comes from the device's
    pool at its first load (``modes.choose``) and is kept; load, check and
    prove follow it (keys on the device or split in host memory, matrices
    out of core, the budgets handed to ``groth16.prove``); the daemon's
    settings map onto the prover (a budget given names the mode)."""
    from jaxprove import daemon as D
    from jaxprove import groth16 as G
    from jaxprove import memory
    from jaxprove import modes as MD
    from jaxprove import pce

    spec = E.cubic_spec(2)
    m = pce.extract(spec.record())
    counts, spmv = (m.num_vars, m.num_aux, m.rows, m.nbytes), pce.evaluate_bytes(m)
    b_vars = int(np.sum(m.b_input_density) + np.sum(m.b_aux_density))
    nv, na, nh = m.num_vars, m.num_aux, (1 << G.domain_log(m.rows)) - 1
    z = lambda *shape: np.zeros(shape, np.uint32)
    pk = G.ProvingKey(z(2, 12), z(2, 12), z(2, 2, 12), z(2, 12), z(2, 2, 12), z(2, 12, nv),
                      z(2, 12, nv), z(2, 2, 12, nv), z(2, 12, na), z(2, 12, nh))
    vk = G.VerifyingKey(z(2, 12), z(2, 2, 12), z(2, 2, 12), z(2, 2, 12), z(2, 12, m.num_inputs))
    monkeypatch.setattr(G, "load_keys", lambda *a, **k: (pk, vk))
    seen = {}

    def prove(pk, matrices, w, **kw):
        seen.clear()
        seen.update(kw, pk=pk)
        raise RuntimeError("stop here")

    monkeypatch.setattr(G, "prove", prove)
    w = spec.witness(spec.split({"x": [[3, 4]]}))
    # a key this small is held whole (its merged MSM passes fit): B counted in full
    resident_cap = MD.MARGIN + MD.peak_bytes(*counts, "resident", spmv)
    split_cap = MD.MARGIN + MD.peak_bytes(*counts, "resident", spmv, b_vars=b_vars)
    assert b_vars < nv and split_cap < resident_cap
    ooc_cap = MD.MARGIN + 64 * nv + MD.MIN_BUDGET          # below what streaming needs
    for cap, budget, mode in ((resident_cap, None, "resident"),
                              (resident_cap - 1, None, "streaming"),
                              (resident_cap, MD.resident_bytes(*counts, "streaming"),
                               "streaming"),
                              # the split key's peak: a key whose merged passes fit stays
                              # whole, so it does not count as split
                              (split_cap, None, "streaming"),
                              (ooc_cap, None, "out-of-core")):
        monkeypatch.setattr(memory, "device_capacity", lambda dev: cap)
        prover = E.Groth16Prover(keys_dir="stored", memory_mode="auto", resident_budget=budget)
        res = prover.load(spec, jax.devices()[0])
        want = MD.choose(*counts, cap, spmv, budget, host_witness=True)  # the prover's default
        assert (res.mode, res.msm_budget, res.out_of_core_budget) == (mode,) + want[1:3]
        assert isinstance(res.pk.a, M.SplitBases) == (mode != "resident")
        assert isinstance(res.matrices.a.cols, np.ndarray) == (mode == "out-of-core")
        assert (res.domain is None) == (mode == "out-of-core")
        assert prover.check(res, w) == [None]
        for engine_budget in (None, 1 << 20):
            with pytest.raises(RuntimeError, match="stop here"):
                prover.prove(res, w, [True], engine_budget)
            assert seen["out_of_core_budget"] == res.out_of_core_budget
            got = seen["msm_config"] and seen["msm_config"].budget_bytes
            assert got == (engine_budget or res.msm_budget)
        # decided once per circuit: a load from a device of another size keeps the mode
        monkeypatch.setattr(memory, "device_capacity", lambda dev: 1 << 50)
        assert prover.load(spec, jax.devices()[0]).mode == mode
    # resident, where one proof's merged MSM passes would not fit beside the key: the key is
    # split once at load, on the device (the per-MSM path; B at its density)
    # and the split key counts B at its density: a pool below the whole key's resident peak
    # still takes it resident
    monkeypatch.setattr(memory, "device_capacity", lambda dev: split_cap)
    monkeypatch.setattr(G, "merged_msm_bytes", lambda *a: split_cap)
    res = E.Groth16Prover(keys_dir="stored", memory_mode="auto").load(spec, jax.devices()[0])
    assert split_cap < resident_cap and res.mode == "resident" and all(
        isinstance(getattr(res.pk, f), M.SplitBases) for f in G.SPLIT_VECTORS)
    assert isinstance(res.pk.b_g2.dense, jax.Array)
    pos = G.msm_positions(m)
    assert res.pk.b_g2.dense.shape[-1] == len(pos.b.dense) + 1            # B's density, δ
    monkeypatch.setattr(G, "merged_msm_bytes", lambda *a: 0)          # the merged passes fit:
    res = E.Groth16Prover(keys_dir="stored", memory_mode="auto").load(spec, jax.devices()[0])
    assert res.mode == "streaming"                  # the whole key, counted whole, does not
    monkeypatch.setattr(memory, "device_capacity", lambda dev: resident_cap)
    res = E.Groth16Prover(keys_dir="stored", memory_mode="auto").load(spec, jax.devices()[0])
    assert res.mode == "resident" and not isinstance(res.pk.a, M.SplitBases)
    monkeypatch.setattr(memory, "device_capacity", lambda dev: 64 * nv)
    with pytest.raises(MemoryError, match="cubic-2 .*fits no memory mode"):
        E.Groth16Prover(keys_dir="stored", memory_mode="auto").load(spec, jax.devices()[0])

    # the settings of the daemon and prove_batch.py
    def settings(**kw):
        p = E.Groth16Prover.from_settings("stored", **kw)
        return p.memory_mode, p.keys_in_host_memory, p.out_of_core_budget, p.resident_budget

    assert settings() == ("auto", False, None, None)
    assert settings(budget_bytes=5) == ("auto", False, None, 5)
    assert settings(msm_budget_bytes=5) == (None, True, None, None)
    assert settings(out_of_core_bytes=7, msm_budget_bytes=5) == (None, True, 7, None)
    assert settings(memory_mode="out-of-core", out_of_core_bytes=7) == \
        ("out-of-core", False, 7, None)
    # host_witness: on (None) wherever a circuit is in the 16 GB mode, whatever the mode
    for kw in ({}, {"out_of_core_bytes": 7}, {"memory_mode": "out-of-core"},
               {"memory_mode": "resident"}, {"msm_budget_bytes": 5}):
        assert E.Groth16Prover.from_settings("stored", **kw).host_witness is None
        assert E.Groth16Prover.from_settings("stored", host_witness=False, **kw).host_witness \
            is False
    assert D.load_config().host_witness and not D.load_config(host_witness=False).host_witness
    # pinned_key: off unless asked for, in every mode
    for kw in ({}, {"out_of_core_bytes": 7}, {"memory_mode": "out-of-core"}):
        assert E.Groth16Prover.from_settings("stored", **kw).pinned_key is False
        assert E.Groth16Prover.from_settings("stored", pinned_key=True, **kw).pinned_key is True
    assert not D.load_config().pinned_key and D.load_config(pinned_key=True).pinned_key
    with pytest.raises(ValueError, match="memory_mode 'streaming' decides where the keys live"):
        settings(memory_mode="streaming", out_of_core_bytes=7)
    with pytest.raises(ValueError, match="memory_mode must be one of"):
        settings(memory_mode="fast")
    with pytest.raises(ValueError, match="memory_mode = 'fast'; choose from"):
        D.load_config(memory_mode="fast")
    assert D.load_config().memory_mode == "auto"


@pytest.mark.slow
@pytest.mark.parametrize("host_witness,pinned_key", [(False, False), (True, False), (True, True)])
def test_engine_out_of_core_proof(tmp_path, host_witness, pinned_key):
    """The engine's 16 GB mode end to end on a small circuit: keys and PCE
    matrices in host memory (the resident bytes count neither), a, b, c and h
    out of core in row blocks of a few KB, the MSMs in chunks; the proofs
    verify (our pairing, checked against py_ecc's elsewhere) with the public
    inputs x³ + x, and a bad instance in its own batch is refused by its
    proof, naming the row.  With ``host_witness`` each batch's witness
    waits in host memory (the prover gets numpy) and h is computed on the
    device (hypothesis 83).  With ``pinned_key`` the key's host vectors
    are pinned pieces (hypothesis 84)."""
    from conftest import R
    from jaxprove import groth16 as G
    from ops import transfer as T

    K = 2
    good, reg = E.cubic_spec(K), _cubic_with_bad(K)
    prover = E.Groth16Prover(keys_dir=str(tmp_path / "keys"), setup_on_first_use=True,
                             setup_seed=5, keys_in_host_memory=True, out_of_core_budget=8000,
                             host_witness=host_witness, pinned_key=pinned_key)
    kinds, real = [], prover.prove
    prover.prove = lambda res, w, *a, **k: kinds.append(type(w)) or real(res, w, *a, **k)
    eng = E.Engine(reg, E.EngineConfig(msm_budget_bytes=1 << 21), prover,
                   devices=jax.devices()[:1])
    xs = [[3, 4], [MARK, 5]]
    ja = eng.submit("cubic", K, {"x": [xs[0]]})
    jb = eng.submit("cubic", K, {"x": [xs[1]]})
    eng.start()
    ra, rb = (_done(eng, j, timeout=900) for j in (ja, jb))
    eng.shutdown()
    assert ra.status == "done", ra.error
    assert rb.status == "failed" and "does not satisfy" in rb.error and "(0, " in rb.error
    assert ra.public == [[(x ** 3 + x) % R for x in xs[0]]]
    assert kinds and all((k is np.ndarray) is host_witness for k in kinds)
    res = prover.load(good, jax.devices()[0])
    assert isinstance(res.matrices.a.cols, np.ndarray) and res.domain is None
    assert res.nbytes < 1 << 16                     # key and matrices in host memory
    assert isinstance(res.pk.h, T.PinnedVector) is pinned_key
    # the row blocks prepared once for the h the proofs run (the device h's budget)
    assert res.host_plan.budget == 8000
    assert res.host_plan.on_device == (G.DEVICE_H_PLANES if host_witness else ())
    proof = G.proof_from_bytes(ra.proof)
    assert bool(np.all(np.asarray(G.verify(res.vk, ra.public, proof))))


@pytest.mark.slow
def test_engine_auto_memory_mode_proofs(tmp_path, monkeypatch):
    """``memory_mode="auto"`` end to end: on a device whose pool holds the
    smaller circuit's key but not the larger's, the engine proves the first
    with its key resident and the second in streaming mode (key split in host
    memory, MSMs in chunks); both proofs verify with the public inputs x³ + x."""
    from conftest import R
    from jaxprove import groth16 as G
    from jaxprove import memory
    from jaxprove import modes as MD
    from jaxprove import pce

    reg = E.builtin_registry(cubic_sizes=(2, 4), sha256_sizes=())
    peak = {}
    for k in (2, 4):
        m = pce.extract(E.cubic_spec(k).record())
        c = (m.num_vars, m.num_aux, m.rows, m.nbytes)
        peak[k] = {x: MD.peak_bytes(*c, x, pce.evaluate_bytes(m))   # keys this small: whole
                   for x in ("resident", "streaming")}
    cap = MD.MARGIN + peak[2]["resident"]
    assert peak[4]["resident"] > peak[2]["resident"] and \
        MD.MARGIN + peak[4]["streaming"] < cap            # the premise of the test
    monkeypatch.setattr(memory, "device_capacity", lambda dev: cap)
    prover = E.Groth16Prover(keys_dir=str(tmp_path / "keys"), setup_on_first_use=True,
                             setup_seed=11, memory_mode="auto")
    eng = E.Engine(reg, E.EngineConfig(), prover, devices=jax.devices()[:1])
    xs = {2: [3, 4], 4: [5, 6, 7, 8]}
    jobs = {k: eng.submit("cubic", k, {"x": [xs[k]]}) for k in xs}
    eng.start()
    got = {k: _done(eng, j, timeout=900) for k, j in jobs.items()}
    modes = {r["topology"]: r["memory_mode"] for r in eng.status()["resident"]}
    eng.shutdown()
    assert modes == {"cubic-2": "resident", "cubic-4": "streaming"}
    for k, r in got.items():
        assert r.status == "done", r.error
        assert r.public == [[(x ** 3 + x) % R for x in xs[k]]]
        res = prover.load(E.cubic_spec(k), jax.devices()[0])
        assert bool(np.all(np.asarray(G.verify(res.vk, r.public, G.proof_from_bytes(r.proof)))))


@pytest.mark.slow
def test_engine_real_groth16_proofs_of_cubic(tmp_path):
    """Real proofs through the engine (setup on first use, seeded; keys
    saved to and reloaded from a key store), batched with an instance whose
    witness is unsatisfied; the returned bytes are decoded and checked with
    py_ecc's pairing (independent of our pairing), public inputs x³ + x
    computed with Python integers."""
    from conftest import R, ob
    from jaxprove import groth16 as G
    from ops.curve import G1, G2
    from py_ecc.bls import point_compression as pc

    K = 2
    good, reg = E.cubic_spec(K), _cubic_with_bad(K)
    prover = E.Groth16Prover(keys_dir=str(tmp_path / "keys"), setup_on_first_use=True,
                             setup_seed=5)
    eng = E.Engine(reg, E.EngineConfig(max_batch_size=2), prover, devices=jax.devices()[:1])
    rng = random.Random(11)
    xs = [[rng.randrange(R) for _ in range(K)] for _ in range(4)]
    xs[2][0] = MARK
    ja = eng.submit("cubic", K, {"x": [xs[0], xs[1]]})       # batch 1: both partitions
    jb = eng.submit("cubic", K, {"x": [xs[2]]})              # batch 2: the bad one with jc
    jc = eng.submit("cubic", K, {"x": [xs[3]]})
    eng.start()
    ra, rb, rc = (_done(eng, j, timeout=900) for j in (ja, jb, jc))
    eng.shutdown()
    assert rb.status == "failed" and "does not satisfy" in rb.error
    assert ra.status == "done" and rc.status == "done", (ra.error, rc.error)
    assert len(ra.proof) == 2 * G.PROOF_BYTES
    assert ra.timings["batch_sizes"] == [2, 2]               # per partition
    expect = [[(x ** 3 + x) % R for x in row] for row in xs]
    assert ra.public == expect[:2] and rc.public == expect[3:]
    proofs = [ra.proof[:192], ra.proof[192:], rc.proof]
    expect = [expect[0], expect[1], expect[3]]

    _, vk = G.load_keys(str(tmp_path / "keys"), E.key_name(good.topology))
    ic = [G1.to_affine_ints(vk.ic[..., j], projective=False) for j in range(K + 1)]

    def g1(pt):
        return (ob.FQ(pt[0]), ob.FQ(pt[1]), ob.FQ.one())

    def g2(pt):
        return (ob.FQ2(list(pt[0])), ob.FQ2(list(pt[1])), ob.FQ2.one())

    alpha, beta = g1(G1.to_affine_ints(vk.alpha_g1, projective=False)), \
        g2(G2.to_affine_ints(vk.beta_g2, projective=False))
    gamma = g2(G2.to_affine_ints(vk.gamma_g2, projective=False))
    delta = g2(G2.to_affine_ints(vk.delta_g2, projective=False))
    e_ab = ob.pairing(beta, alpha)
    for k, (ys, p) in enumerate(zip(expect, proofs)):
        A = pc.decompress_G1(int.from_bytes(p[:48], "big"))
        B = pc.decompress_G2((int.from_bytes(p[48:96], "big"), int.from_bytes(p[96:144], "big")))
        Cp = pc.decompress_G1(int.from_bytes(p[144:], "big"))
        acc = g1(ic[0])
        for y, pt in zip(ys, ic[1:]):
            acc = ob.add(acc, ob.multiply(g1(pt), y))
        assert ob.pairing(B, A) == e_ab * ob.pairing(gamma, acc) * ob.pairing(delta, Cp)
        wrong = ob.add(acc, g1(ic[1]))              # other public inputs: the check fails
        if k == 0:
            assert ob.pairing(B, A) != e_ab * ob.pairing(gamma, wrong) * ob.pairing(delta, Cp)


def test_prove_batch_script_run_batch(tmp_path):
    """scripts/prove_batch.py's driver over an engine: proofs written, one
    JSON timing line per job plus a summary, a failed job named."""
    import importlib.util
    import io
    import json
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "scripts", "prove_batch.py")
    spec = importlib.util.spec_from_file_location("prove_batch", path)
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    prover = ToyProver()
    eng = make_engine(prover, max_batch_size=2)
    err = io.StringIO()
    named = [("a", {"values": [1, 2]}), ("b", {"values": [-3]}), ("c", {"values": [4]})]
    summary = pb.run_batch(eng, "porep", 1, named, out_dir=str(tmp_path / "out"),
                           log_path=str(tmp_path / "log.jsonl"), stream=err)
    eng.shutdown()
    assert summary["done"] == 2 and summary["failed"] == ["b"] and summary["jobs"] == 3
    assert (tmp_path / "out" / "a.proof").read_bytes() == toy_proof("porep-t", 1) + \
        toy_proof("porep-t", 2)
    assert not (tmp_path / "out" / "b.proof").exists()
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [x.get("name") for x in lines] == ["a", "b", "c", None] and lines[-1]["summary"]
    assert lines[0]["partitions"] == 2 and "queue_wait" in lines[0]["timings"]
    assert "3/3 done, 1 failed" in err.getvalue()
    assert [b[1] for b in prover.batches] == [[1, 2], [-3, 4]]    # submitted before the start


def test_engine_overlaps_witness_building_with_proving():
    """The host thread builds batch k+1's witnesses while batch k is on the
    device: the proof of batch k waits (up to 20 s) for batch k+1's witness,
    which an engine that builds only between proofs never delivers in time.
    (Events, not timestamps: a loaded CI box stretched a 0.3 s window.)"""
    spec = toy_spec("porep", "porep-t")
    built = {v: threading.Event() for v in (1, 2, 3)}
    overlapped = {}

    def witness(parts):
        out = spec.witness(parts)
        built[parts[0]].set()
        return out

    class Waiting(ToyProver):
        def prove(self, res, w, use, m, on_stage=None):
            v = int(np.asarray(w)[0][0])
            if v + 1 in built:
                overlapped[v] = built[v + 1].wait(20)
            return super().prove(res, w, use, m)

    reg = E.Registry([dataclasses.replace(spec, witness=witness)])
    eng = E.Engine(reg, E.EngineConfig(), Waiting(), devices=jax.devices()[:1])
    jobs = [eng.submit("porep", 1, {"values": [v]}) for v in (1, 2, 3)]
    eng.start()
    assert all(_done(eng, j).status == "done" for j in jobs)
    eng.shutdown()
    assert overlapped == {1: True, 2: True}


def _signalling(spec, event, value=None):
    """``spec`` whose witness builder sets ``event`` once it has built the
    batch of ``value`` (any batch if None)."""
    def witness(parts):
        out = spec.witness(parts)
        if value is None or parts[0] == value:
            event.set()
        return out
    return dataclasses.replace(spec, witness=witness)


class Staged(ToyProver):
    """A prover whose proof of value 1 has an interruption point (``on_stage``)
    after its first stage; records when each proof starts and ends."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.order = []

    def prove(self, res, w, use, m, on_stage=None):
        v = int(np.asarray(w)[0][0])
        self.order.append(("start", v))
        if v == 1:
            self.proving.set()
            assert self.gate.wait(20), "test gate never opened"
            if on_stage is not None:
                on_stage("spmv")
        out = super().prove(res, w, use, m)
        self.order.append(("end", v))
        return out


@pytest.mark.parametrize("preempt", [True, False])
def test_urgent_job_preempts_a_running_proof(preempt):
    """A WinningPoSt job submitted while a PoRep proof is on the device runs at
    that proof's next stage boundary, before it ends (``preempt``); without
    preemption, after it."""
    built = threading.Event()
    prover = Staged(gate=threading.Event())
    reg = E.Registry([toy_spec("porep", "porep-t"),
                      _signalling(toy_spec("winning-post", "winning-t", P.CRITICAL), built)])
    eng = E.Engine(reg, E.EngineConfig(preempt=preempt), prover, devices=jax.devices()[:1]).start()
    slow = eng.submit("porep", 1, {"values": [1]})
    assert prover.proving.wait(10)                      # the PoRep proof is on the device
    urgent = eng.submit("winning-post", 1, {"values": [5]})
    assert built.wait(10)                               # and the urgent one is prepared
    prover.gate.set()
    assert all(_done(eng, j).status == "done" for j in (slow, urgent))
    eng.shutdown()
    if preempt:
        assert prover.order == [("start", 1), ("start", 5), ("end", 5), ("end", 1)]
    else:
        assert prover.order == [("start", 1), ("end", 1), ("start", 5), ("end", 5)]
    assert eng.status()["devices"][0]["busy"] is False


def test_preemption_takes_the_prepared_batch_to_reach_the_urgent_one():
    """With the next PoRep batch already prepared (the host thread holds no free
    slot), the interruption point takes it, so the host thread builds the
    urgent batch, waits for it and runs it before the paused proof ends."""
    built = threading.Event()
    prover = Staged(gate=threading.Event())
    reg = E.Registry([_signalling(toy_spec("porep", "porep-t"), built, 2),
                      toy_spec("winning-post", "winning-t", P.CRITICAL)])
    eng = E.Engine(reg, E.EngineConfig(), prover, devices=jax.devices()[:1]).start()
    jobs = [eng.submit("porep", 1, {"values": [1]})]
    assert prover.proving.wait(10)
    jobs.append(eng.submit("porep", 1, {"values": [2]}))
    assert built.wait(10)                               # batch [2] is prepared, waiting
    time.sleep(0.05)
    jobs.append(eng.submit("winning-post", 1, {"values": [5]}))
    prover.gate.set()
    assert all(_done(eng, j).status == "done" for j in jobs)
    eng.shutdown()
    assert prover.order == [("start", 1), ("start", 5), ("end", 5), ("end", 1),
                            ("start", 2), ("end", 2)]


def test_verification_runs_beside_the_next_proof():
    """The self-check of batch k runs on the finishing thread while batch k+1
    is proved: the device thread does not wait for the (host CPU) pairing."""
    events = []

    class SlowVerify(ToyProver):
        def prove(self, res, w, use, m, on_stage=None):
            events.append(("prove", int(np.asarray(w)[0][0]), time.monotonic()))
            return super().prove(res, w, use, m)

        def verify(self, res, public, proof):
            events.append(("verify-start", public[0][0], time.monotonic()))
            time.sleep(0.3)
            out = super().verify(res, public, proof)
            events.append(("verify-end", public[0][0], time.monotonic()))
            return out

    eng = make_engine(SlowVerify()).start()
    jobs = [eng.submit("porep", 1, {"values": [v]}) for v in (1, 2)]
    assert all(_done(eng, j).status == "done" for j in jobs)
    eng.shutdown()
    t = {(kind, v): ts for kind, v, ts in events}
    assert t[("prove", 2)] < t[("verify-end", 1)]
    assert eng.status()["in_flight_batches"] == 0


def test_urgent_job_overtakes_an_already_prepared_batch():
    """A WinningPoSt job submitted while one PoRep batch is on the device and
    the next is already prepared runs before that prepared batch."""
    built = threading.Event()
    gate = threading.Event()
    prover = ToyProver(gate=gate)
    reg = E.Registry([_signalling(toy_spec("porep", "porep-t"), built, 2),
                      toy_spec("winning-post", "winning-t", P.CRITICAL)])
    eng = E.Engine(reg, E.EngineConfig(), prover, devices=jax.devices()[:1]).start()
    first = eng.submit("porep", 1, {"values": [1]})
    assert prover.proving.wait(10)                      # batch [1] is on the (gated) device
    second = eng.submit("porep", 1, {"values": [2]})
    assert built.wait(10)                               # batch [2] is prepared, waiting
    time.sleep(0.05)
    urgent = eng.submit("winning-post", 1, {"values": [5]})
    time.sleep(0.05)
    gate.set()
    assert all(_done(eng, j).status == "done" for j in (first, second, urgent))
    eng.shutdown()
    assert [b[1] for b in prover.batches] == [[1], [5], [2]]


def _until(cond, what, timeout=20):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.01)


def test_waiting_batches_are_verified_together():
    """Proved batches of one topology that wait for the finishing thread are
    verified in one ``verify_group`` call (up to VERIFY_GROUP instances); a
    proof that fails there fails its own job only; the group's verification
    time is shared, not counted once per job."""
    calls, gate = [], threading.Event()

    class Grouping(ToyProver):
        def verify_group(self, res, parts):
            calls.append([len(pub) for pub, _ in parts])
            if len(calls) == 1:
                assert gate.wait(20)            # batches pile up behind the first check
            time.sleep(0.2)
            return [self.verify(res, pub, proof) for pub, proof in parts]

    prover = Grouping(wrong={4})
    eng = make_engine(prover).start()
    first = eng.submit("porep", 1, {"values": [1]})
    _until(lambda: calls, "the first verification did not start")
    jobs = [eng.submit("porep", 1, {"values": [v]}) for v in (2, 3, 4, 5)]
    _until(lambda: len(prover.batches) == 5, "the four batches were not proved")
    gate.set()
    results = {j: _done(eng, j) for j in [first] + jobs}
    eng.shutdown()
    assert calls == [[1], [1, 1, 1, 1]]                 # the four waiting batches in one call
    assert [results[j].status for j in jobs] == ["done", "done", "failed", "done"]
    assert "did not verify" in results[jobs[2]].error
    grouped = sum(results[j].timings["verify"] for j in jobs)
    assert 0.15 < grouped < 0.4                         # one 0.2 s call shared by four jobs
    assert eng.status()["in_flight_batches"] == 0


def test_groth16_prover_verify_group_pads_and_splits(monkeypatch):
    """Groth16Prover.verify_group: the parts' instances concatenated, padded
    to VERIFY_GROUP by repeating the first (one program for every group
    size), one ``verify`` call, the answers split back per part."""
    from jaxprove import groth16 as G
    seen = []

    def fake_verify(self, res, public, proof):
        seen.append((list(public), np.asarray(proof.a)[0, 0].tolist()))
        return [x[0] % 2 == 1 for x in public]          # "odd inputs verify"

    monkeypatch.setattr(E.Groth16Prover, "verify", fake_verify)

    def proof(vals):
        a = np.zeros((2, 12, len(vals)), np.uint32)
        a[0, 0] = vals
        return G.Proof(jnp.asarray(a), jnp.zeros((2, 2, 12, len(vals)), jnp.uint32),
                       jnp.asarray(a))

    prover = E.Groth16Prover()
    got = prover.verify_group(None, [([[3], [4]], proof([3, 4])), ([[5]], proof([5]))])
    assert got == [[True, False], [True]]
    assert seen[-1] == ([[3], [4], [5]] + [[3]] * (E.VERIFY_GROUP - 3),
                        [3, 4, 5] + [3] * (E.VERIFY_GROUP - 3))
    assert prover.verify_group(None, [([[7]], proof([7]))]) == [[True]]
    assert seen[-1] == ([[7]], [7])                     # a single instance is checked alone
    big = list(range(1, E.VERIFY_GROUP + 2))
    prover.verify_group(None, [([[v] for v in big], proof(big))])
    assert len(seen[-1][0]) == 2 * E.VERIFY_GROUP       # beyond the group: next power of two
