"""The proving engine: a stream of proof jobs of mixed kinds and priorities,
kept on the devices (cuzk's engine, ``shared/research/cuzk.md`` §1–2).

**Jobs and work items.**  A job is (proof kind, sector size, inputs,
priority).  The ``Registry`` maps (kind, sector size) to a ``CircuitSpec``:
the circuit topology (a name that keys proving keys, PCE matrices and
compiled programs), how to record it, how to split a job's inputs into
per-partition inputs (PoRep: 10 partitions) and how to build the witnesses
of a batch of partitions.  Each partition is one work item; the job's proof
is its partitions' 192-byte proofs concatenated in partition order.

**Scheduling** (``Scheduler``, pure).  Items are ranked by (priority
descending, job sequence number, partition): WinningPoSt (CRITICAL) >
WindowPoSt (HIGH) > PoRep/SnapDeals (NORMAL), then the oldest job first.
Items of one proof kind and sector size (one witness builder, one circuit
topology) form batches of at most ``max_batch_size`` (one prove call over a
batch of witnesses).  A batch is dispatched when it is full,
when its oldest item has waited ``max_batch_wait_s``, when it holds an item
of priority HIGH or above (PoSt never waits for a batch to fill), or when
the engine drains; topologies are considered in the rank of their best item
and the first ready batch goes.  Batches are padded to a power of two (or to
``max_batch_size``) by repeating an instance, so few batch shapes are ever
compiled.

**Residency** (``Residency``, pure).  Per worker, the proving key, verifying
key and PCE matrices of each topology stay on the device within
``budget_bytes``; the least recently used entry not in use is evicted first.
An entry larger than the whole budget is still admitted (everything else
idle is evicted first).  **Streaming mode**: ``msm_budget_bytes`` is passed
to every MSM (``ops.msm.MSMConfig.budget_bytes``) so each MSM's working set
is bounded and its bases are processed in chunks; with
``Groth16Prover(keys_in_host_memory=True)`` the proving key's point vectors
stay in host memory, split once by the circuit's MSM positions
(``groth16.streaming_key``: no host gathers per proof; one host copy for
all devices), and only the chunks
travel, so the device holds the matrices, the NTT domain and the working
sets.  ``Groth16Prover(memory_mode="auto")`` (the daemon's default) picks
each circuit's mode (resident, streaming, the 16 GB mode) from the device's
memory at its first load (``jaxprove.modes``).

**Pipeline.**  One worker per device (``jax.devices()`` by default), each a
pair of threads: a host thread takes the next batch from the shared
scheduler and builds its witnesses (``lookahead`` batches ahead), while the
device thread proves the previous batch: load (residency), satisfaction
check, prove; a third, finishing thread takes the proved batches (most
urgent first) through verify-before-return (on by default, on the host CPU)
and encoding, so the device proves the next batch meanwhile.  Proved batches
of one topology that wait there together are verified in one vectorised
call (``VERIFY_GROUP`` instances: ~0.36 s for 8–10 proofs on a 2-core CPU,
0.17 s for one).
The device thread runs the best-ranked prepared batch, and waits for a more
urgent one the host thread is about to build rather than run a prepared
batch it outranks.  **Preemption** (``preempt``, on by default): between
the stages of a running proof (spmv, ntt, msm_g1, msm_g2, combine; each MSM
in streaming mode, and between its chunks) the device thread takes what the
host thread has prepared and runs every batch that outranks the running one
first, so a WinningPoSt job waits for one stage of a PoRep partition (in
streaming mode one MSM chunk: ~0.3 s for 2^24 points), not all of it;
the paused proof's intermediates stay on the device meanwhile.  A failing item
(bad input, unsatisfied witness, a proof that does not verify) fails its job
only: a batch whose witness building raises is rebuilt item by item, and an
unsatisfied instance is replaced by a satisfied one of the same batch before
proving.  Cancellation removes a job's queued items; results of its items in
flight are discarded.

**The prover is a parameter** (``Prover`` protocol): ``Groth16Prover`` makes
real proofs (``jaxprove.groth16``), with keys from a key store directory
(``groth16.save_keys``/``load_keys``) or, for tests, a seeded setup on first
use; tests of the scheduler and residency use a fast stand-in.

Timings per job (seconds, summed over its batches): queue_wait (submission to
first pickup), witness, load, check, the prover's stages (``groth16.prove``:
spmv, ntt, msm_g1, msm_g2, combine; streaming: msm_h, msm_a … msm_l; the 16 GB mode
adds check, and with a host witness witness_put) and their sum prove (the
time a proof spent paused for more urgent ones apart, as paused), verify,
encode, total (submission
to completion), and batch_sizes (the batch shape each partition was proved in).

API: ``Engine(registry, config, prover, devices, on_finished)`` with
``start()``, ``submit(kind, sector_size, inputs, priority=None, job_id=None)
-> job_id``, ``wait(job_id, timeout) -> JobResult | None``, ``prove(...)``,
``cancel(job_id)``, ``status()``, ``metrics() -> str`` (Prometheus text),
``preload(kind, sector_size)``, ``evict(topology=None)``,
``shutdown(drain=True) -> handed-back job ids``; ``builtin_registry()``.
"""
from __future__ import annotations

import base64
import bisect
import collections
import dataclasses
import enum
import functools
import itertools
import logging
import queue
import random
import secrets
import threading
import time
from typing import Any, Callable, NamedTuple, Protocol

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- kinds
class Priority(enum.IntEnum):
    """cuzk's priorities; larger runs first."""
    LOW = 0
    NORMAL = 1
    HIGH = 2
    CRITICAL = 3


def parse_priority(p) -> Priority:
    """A Priority from its name (any case) or number; ValueError otherwise."""
    if isinstance(p, Priority):
        return p
    try:
        return Priority[p.upper()] if isinstance(p, str) else Priority(int(p))
    except (KeyError, ValueError, TypeError):
        raise ValueError(f"priority {p!r}: expected one of "
                         f"{[x.name for x in Priority]} or 0..3") from None


@dataclasses.dataclass(frozen=True)
class CircuitSpec:
    """One proof kind at one sector size.

    topology: the circuit's name with its parameters; keys proving keys, PCE
    matrices and residency, and decides which items batch together.
    record() -> ``circuits.cs.R1CS``.
    split(inputs) -> list of per-partition inputs (validated: ValueError
    naming what is wrong).
    witness(parts) -> the witnesses of a batch of partitions (for
    ``Groth16Prover``: Fr ``(8, len(parts), n_vars)``); may raise on bad input.
    priority: the kind's default priority.  partitions: the required
    partition count (None: any ≥ 1).  synthetic(rng) -> valid inputs of one
    job (benchmarks, tests)."""
    kind: str
    sector_size: int
    topology: str
    record: Callable[[], Any]
    split: Callable[[Any], list]
    witness: Callable[[list], Any]
    priority: Priority = Priority.NORMAL
    partitions: int | None = None
    synthetic: Callable[[random.Random], Any] | None = None


class Registry:
    """(kind, sector size) -> CircuitSpec."""

    def __init__(self, specs=()):
        self._specs: dict[tuple[str, int], CircuitSpec] = {}
        for s in specs:
            self.register(s)

    def register(self, spec: CircuitSpec) -> None:
        key = (spec.kind, int(spec.sector_size))
        if key in self._specs:
            raise ValueError(f"registry: {spec.kind} at sector size {spec.sector_size} "
                             f"is already registered")
        self._specs[key] = spec

    def get(self, kind: str, sector_size: int) -> CircuitSpec:
        try:
            return self._specs[(kind, int(sector_size))]
        except (KeyError, TypeError, ValueError):
            known = sorted(f"{k}/{s}" for k, s in self._specs)
            raise ValueError(f"unknown proof kind {kind!r} at sector size {sector_size!r}; "
                             f"registered: {known}") from None

    def __iter__(self):
        return iter(self._specs.values())


def _int_list(x, n: int | None, what: str) -> list[int]:
    if not isinstance(x, (list, tuple)) or (n is not None and len(x) != n):
        raise ValueError(f"{what}: expected a list of {n if n is not None else 'some'} integers, "
                         f"got {x!r:.80}")
    out = []
    for v in x:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{what}: {v!r:.40} is not an integer")
        out.append(v)
    return out


def _partition_list(inputs, field: str, kind: str) -> list:
    if not isinstance(inputs, dict) or not isinstance(inputs.get(field), list) \
            or not inputs[field]:
        raise ValueError(f"{kind}: inputs must be {{{field!r}: [one entry per partition, ...]}}")
    return inputs[field]


def cubic_spec(k: int) -> CircuitSpec:
    """``circuits.examples.cubic`` with k values per partition: inputs
    {"x": [[x_0 .. x_{k-1}] per partition]}, each x in [0, r)."""
    from circuits import cs as C
    from circuits import examples as E
    from ops.field import Fr

    def split(inputs):
        parts = _partition_list(inputs, "x", "cubic")
        out = []
        for i, p in enumerate(parts):
            xs = _int_list(p, k, f"cubic partition {i}")
            if any(not 0 <= v < Fr.p for v in xs):
                raise ValueError(f"cubic partition {i}: values must lie in [0, r)")
            out.append(xs)
        return out

    def witness(parts):
        import jax.numpy as jnp
        import numpy as np
        x = jnp.asarray(Fr.from_int(np.array(parts, dtype=object).reshape(len(parts), k)))
        return C.witness(E.cubic, x, k, in_axes=1)

    def synthetic(rng):
        return {"x": [[rng.randrange(Fr.p) for _ in range(k)]]}

    return CircuitSpec("cubic", k, f"cubic-{k}", lambda: C.record(E.cubic, k, name=f"cubic-{k}"),
                       split, witness, synthetic=synthetic)


def sha256_spec(nbytes: int) -> CircuitSpec:
    """``circuits.examples.sha256_preimage`` of an nbytes-byte message:
    inputs {"messages": [hex string per partition]}."""
    from circuits import cs as C
    from circuits import examples as E

    def split(inputs):
        out = []
        for i, m in enumerate(_partition_list(inputs, "messages", "sha256-preimage")):
            try:
                data = bytes.fromhex(m)
            except (TypeError, ValueError):
                raise ValueError(f"sha256-preimage partition {i}: not a hex string") from None
            if len(data) != nbytes:
                raise ValueError(f"sha256-preimage partition {i}: {len(data)} bytes, "
                                 f"expected {nbytes}")
            out.append(data)
        return out

    def witness(parts):
        import jax.numpy as jnp
        return C.witness(E.sha256_preimage, jnp.stack([E.message_bits(m) for m in parts]), nbytes)

    def synthetic(rng):
        return {"messages": [bytes(rng.randrange(256) for _ in range(nbytes)).hex()]}

    return CircuitSpec("sha256-preimage", nbytes, f"sha256-preimage-{nbytes}",
                       lambda: C.record(E.sha256_preimage, nbytes,
                                        name=f"sha256-preimage-{nbytes}"),
                       split, witness, synthetic=synthetic)


def builtin_registry(cubic_sizes=(2, 4, 64), sha256_sizes=(64,)) -> Registry:
    """The example circuits: "cubic" (sector size = values per partition) and
    "sha256-preimage" (sector size = message bytes).  The Filecoin kinds
    register themselves into a Registry the same way."""
    return Registry([cubic_spec(k) for k in cubic_sizes] + [sha256_spec(n) for n in sha256_sizes])


# ---------------------------------------------------------------- scheduler (pure)
class WorkItem(NamedTuple):
    """One partition of one job."""
    priority: Priority
    seq: int                  # job sequence number (submission order)
    partition: int
    job_id: str
    group: str                # batching key: "kind/sector_size"
    enqueued: float           # time.monotonic() at submission

    @property
    def rank(self):
        return (-int(self.priority), self.seq, self.partition)


def padded_size(n: int, max_batch: int) -> int:
    """The batch shape for n items: the next power of two, capped at max_batch."""
    return min(max_batch, 1 << max(0, n - 1).bit_length())


class Scheduler:
    """Pending work items, grouped by ``WorkItem.group``, handed out as batches.
    Not thread-safe (the engine holds its lock around every call)."""

    def __init__(self, max_batch_size: int = 1, max_batch_wait_s: float = 0.0):
        if max_batch_size < 1 or max_batch_wait_s < 0:
            raise ValueError(f"scheduler: max_batch_size >= 1 and max_batch_wait_s >= 0, got "
                             f"{max_batch_size}, {max_batch_wait_s}")
        self.max_batch_size = max_batch_size
        self.max_batch_wait_s = max_batch_wait_s
        self._groups: dict[str, list] = {}          # group -> sorted [(rank, item)]

    def add(self, item: WorkItem) -> None:
        bisect.insort(self._groups.setdefault(item.group, []), (item.rank, item))

    def remove_job(self, job_id: str) -> int:
        """Drop a job's pending items; returns how many there were."""
        n = 0
        for topo in list(self._groups):
            g = self._groups[topo]
            kept = [e for e in g if e[1].job_id != job_id]
            n += len(g) - len(kept)
            if kept:
                self._groups[topo] = kept
            else:
                del self._groups[topo]
        return n

    def take_all(self) -> list[WorkItem]:
        items = [e[1] for g in self._groups.values() for e in g]
        self._groups.clear()
        return items

    def next_batch(self, now: float, flush: bool = False):
        """(batch of items, None) or (None, seconds until a batch may be ready
        — None when nothing is pending)."""
        wait = None
        for topo, g in sorted(self._groups.items(), key=lambda kv: kv[1][0][0]):
            head = [e[1] for e in g[:self.max_batch_size]]
            oldest = min(i.enqueued for i in head)
            due = oldest + self.max_batch_wait_s - now
            if (flush or len(head) == self.max_batch_size or due <= 0
                    or max(i.priority for i in head) >= Priority.HIGH):
                del g[:len(head)]
                if not g:
                    del self._groups[topo]
                return head, None
            wait = due if wait is None else min(wait, due)
        return None, wait

    def __len__(self):
        return sum(len(g) for g in self._groups.values())

    def best_rank(self):
        """The rank of the most urgent pending item (None when none is)."""
        return min((g[0][0] for g in self._groups.values()), default=None)

    def ahead_of(self, rank) -> int:
        """Pending items that rank before ``rank`` (a queue position)."""
        return sum(bisect.bisect_left(g, (rank,)) for g in self._groups.values())

    def counts(self) -> dict:
        """Pending items per priority name, per group ("kind/sector_size") and per kind."""
        by_p = collections.Counter(e[1].priority.name for g in self._groups.values() for e in g)
        by_kind = collections.Counter()
        for grp, g in self._groups.items():
            by_kind[grp.rsplit("/", 1)[0]] += len(g)
        return {"by_priority": {p.name: by_p.get(p.name, 0) for p in Priority},
                "by_group": {t: len(g) for t, g in self._groups.items()},
                "by_kind": dict(by_kind)}


# ---------------------------------------------------------------- residency (pure)
class Residency:
    """Resident values within a byte budget, least recently used evicted
    first; pinned entries (in use) are never evicted.  Not thread-safe."""

    def __init__(self, budget_bytes: int | None):
        if budget_bytes is not None and budget_bytes < 0:
            raise ValueError(f"residency: budget must be >= 0 bytes, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self._entries: collections.OrderedDict = collections.OrderedDict()  # key -> [v, n, pins, t]
        self.evictions = 0

    @property
    def used_bytes(self) -> int:
        return sum(e[1] for e in self._entries.values())

    def get(self, key, now: float):
        """The value (marked most recently used) or None."""
        e = self._entries.get(key)
        if e is None:
            return None
        self._entries.move_to_end(key)
        e[3] = now
        return e[0]

    def make_room(self, nbytes: int) -> list:
        """Evict idle entries, least recently used first, until nbytes more fit
        the budget (or nothing idle is left); returns the evicted keys."""
        out = []
        if self.budget_bytes is None:
            return out
        for key in list(self._entries):
            if self.used_bytes + nbytes <= self.budget_bytes:
                break
            if self._entries[key][2] == 0:
                del self._entries[key]
                out.append(key)
        self.evictions += len(out)
        return out

    def put(self, key, value, nbytes: int, now: float) -> list:
        """Insert (or replace) an entry, evicting idle ones to fit; returns the
        evicted keys."""
        old = self._entries.pop(key, None)
        evicted = self.make_room(nbytes)
        self._entries[key] = [value, int(nbytes), old[2] if old else 0, now]
        return evicted

    def pin(self, key) -> None:
        self._entries[key][2] += 1

    def unpin(self, key) -> None:
        e = self._entries.get(key)
        if e is not None and e[2] > 0:
            e[2] -= 1

    def evict(self, match: Callable[[Any], bool] = lambda key: True) -> list:
        """Evict the idle entries whose key matches; returns their keys."""
        out = [k for k, e in self._entries.items() if e[2] == 0 and match(k)]
        for k in out:
            del self._entries[k]
        self.evictions += len(out)
        return out

    def entries(self, now: float) -> list[dict]:
        """Least recently used first: key, bytes, pins, idle seconds, and the
        device budgets its proofs settled on after running out of memory
        (``Resident.budgets``: step -> bytes; empty when none did)."""
        return [{"key": k, "bytes": e[1], "pins": e[2], "idle_s": now - e[3],
                 "memory_mode": getattr(e[0], "mode", None),
                 "learned_budgets": dict(getattr(e[0], "budgets", None) or {})}
                for k, e in self._entries.items()]


# ---------------------------------------------------------------- provers
class Resident(NamedTuple):
    """What stays on a device per topology (pk's vectors may be host arrays
    in streaming mode; domain: the circuit's ``ops.ntt.Domain``; positions:
    its ``groth16.msm_positions``; host_plan: out of core, the SpMV's row
    blocks for one instance, ``groth16.out_of_core_plan``, in pinned host memory;
    budgets: the device budgets that served this circuit's steps where a
    first plan ran out of memory, a dict ``memory.halving`` fills, or None;
    mode: its memory mode, ``modes.MODES``; out_of_core_budget: the 16 GB
    mode's budget (None: in core); msm_budget: the MSMs' budget where the
    engine gives none (None: the prover's default))."""
    pk: Any
    vk: Any
    matrices: Any
    nbytes: int
    domain: Any = None
    positions: Any = None
    host_plan: Any = None
    budgets: Any = None
    mode: str = "resident"
    out_of_core_budget: int | None = None
    msm_budget: int | None = None


class Prover(Protocol):
    def load(self, spec: CircuitSpec, device) -> Resident: ...

    def check(self, res: Resident, w) -> list:
        """Per instance: None if the witness satisfies the circuit, else why not."""

    def prove(self, res: Resident, w, use: list, msm_budget_bytes: int | None, on_stage=None):
        """(proof batch, public inputs per instance (lists of ints), timings)
        for the instances where use[i]; the others are proved on a stand-in.
        ``msm_budget_bytes``: the engine's (None: ``res.msm_budget``).
        ``on_stage(stage)``, if given, is called between the proof's stages
        (``groth16.prove``): the engine runs more urgent batches there."""

    def verify(self, res: Resident, public: list, proof) -> list:
        """Per instance: whether its proof verifies.  ``res`` holds the
        verifying key only (pk, matrices, domain, positions are None): the
        engine verifies on its finishing thread while the device proves on.
        A prover may also offer ``verify_group(res, [(public, proof), ...])
        -> [per-instance bools, ...]``: several proved batches of one
        topology checked in one call (``Groth16Prover``: one vectorised
        pairing check); the engine then groups what waits to be finished."""

    def encode(self, proof) -> list: ...


class Groth16Prover:
    """Real Groth16 proofs (``jaxprove.groth16``).

    Keys come from ``keys_dir`` (``groth16.load_keys`` under the topology's
    name).  A missing key is an error unless ``setup_on_first_use``: then a
    setup runs (seeded with ``setup_seed``: tests only, a seeded setup is
    insecure) and is saved to ``keys_dir`` when one is given (else kept in
    host memory for the other devices).  PCE matrices come from
    ``pce.get_or_extract`` in ``pce_dir`` (or are extracted in memory),
    once per topology, and stay in host memory for every device's load
    (a 32GiB PoRep partition's: 8 GiB); the recorded circuit is dropped
    once its matrices and keys exist.
    ``keys_in_host_memory``: keep the proving key's point vectors in host
    memory (streaming mode, with the engine's ``msm_budget_bytes``).
    ``verify_on_host``: the self-check pairing runs on the host CPU (the
    pairing's GPU kernels compiled for over 4 min on the H200 without
    finishing; on the CPU: ~36 s once, then ~0.5 s per proof, bench/NOTES.md).
    ``out_of_core_budget`` (bytes; the 16 GB mode, with the keys in host
    memory): the PCE matrices stay in host memory and each proof computes
    a, b, c and h out of core within that many device bytes per program
    (``groth16.prove(out_of_core_budget=)``): a 2^27 circuit's a, b, c and
    its NTT buffers (~24 GiB on the device in core) never live on a 16 GB
    card.  The MSMs run within the engine's ``msm_budget_bytes``, else
    within the same budget.  ``load`` refuses (MemoryError) a circuit whose
    mode's floor (``modes.device_bytes_floor``) exceeds the device's pool,
    before anything is placed, naming the mode that would fit.
    ``host_witness`` (None, the default: on for the circuits proved in the
    16 GB mode, off for the others; True: the same, refused where no circuit
    can be in that mode; False: off): each batch's witness of a circuit in
    the 16 GB mode waits for its proof in host memory (``witness_home``) and
    the proof
    holds no witness on the device before its MSMs (``groth16.prove``'s
    host witness); ``out_of_core_budget`` then counts all of the proof's
    device bytes before them (three vectors of the domain size and a line
    put h on the device; less, the two-vector h).
    ``pinned_key`` (streaming and the 16 GB mode): the held key's host point
    vectors move to pinned host memory once, at its first load
    (``groth16.pin_key``: pieces of 16 MB, pinned for the first device that
    loads it; where pinned memory runs out the rest stays pageable), so the
    MSMs put their bases at the link's rate (bench/NOTES.md hypothesis 84).

    ``memory_mode``: None (default) takes the mode from the two settings
    above for every circuit (resident, streaming or the 16 GB mode), with
    the budgets given; one of ``modes.MODES`` fixes that mode for every
    circuit with budgets suggested from the device's memory
    (``modes.plan``; ``out_of_core_budget`` where given); "auto" gives each
    circuit the fastest mode whose estimated peak fits the device
    (``modes.choose``) and whose lasting bytes fit ``resident_budget``
    (the engine's residency budget, where given): on a 16 GB card a
    WinningPoSt circuit stays resident while a 32GiB PoRep partition runs in
    the 16 GB mode.  A circuit's mode is decided at its first load (from
    that device's memory) and kept; the device's pool is
    ``memory.device_capacity`` (unknown on the CPU: resident)."""

    def __init__(self, keys_dir: str | None = None, pce_dir: str | None = None,
                 setup_on_first_use: bool = False, setup_seed: int | None = None,
                 keys_in_host_memory: bool = False, verify_on_host: bool = True,
                 out_of_core_budget: int | None = None, memory_mode: str | None = None,
                 resident_budget: int | None = None, host_witness: bool | None = None,
                 pinned_key: bool = False):
        from jaxprove import modes
        if host_witness is True and (memory_mode in ("resident", "streaming") or (
                memory_mode is None and (out_of_core_budget is None
                                         or not keys_in_host_memory))):
            raise ValueError("host_witness is a form of the 16 GB mode: it needs "
                             "out_of_core_budget and keys_in_host_memory, or memory_mode "
                             "out-of-core or auto")
        if out_of_core_budget is not None and out_of_core_budget <= 0:
            raise ValueError(f"out_of_core_budget must be a positive number of bytes, "
                             f"got {out_of_core_budget}")
        if memory_mode is None:
            if out_of_core_budget is not None and not keys_in_host_memory:
                raise ValueError("out_of_core_budget needs keys_in_host_memory: a key resident "
                                 "on the device would take the memory the out-of-core mode "
                                 "saves")
        elif memory_mode not in modes.MEMORY_MODES:
            raise ValueError(f"memory_mode must be one of {modes.MEMORY_MODES} or None, "
                             f"got {memory_mode!r}")
        elif keys_in_host_memory or (out_of_core_budget is not None
                                     and memory_mode != "out-of-core"):
            raise ValueError(f"memory_mode {memory_mode!r} decides where the keys live: give "
                             f"keys_in_host_memory only without it, and out_of_core_budget "
                             f"only with the out-of-core mode")
        self.memory_mode, self.resident_budget = memory_mode, resident_budget
        self.out_of_core_budget = out_of_core_budget
        self.keys_in_host_memory = keys_in_host_memory
        self.host_witness = host_witness
        self.pinned_key = pinned_key
        self.verify_on_host = verify_on_host
        self.keys_dir, self.pce_dir = keys_dir, pce_dir
        self.setup_on_first_use, self.setup_seed = setup_on_first_use, setup_seed
        self._lock = threading.Lock()
        self._topo_locks: dict[str, threading.Lock] = {}
        self._r1cs: dict[str, Any] = {}
        self._matrices: dict[str, Any] = {}
        self._host_keys: dict[str, Any] = {}
        self._plans: dict[str, Any] = {}

    @classmethod
    def from_settings(cls, keys_dir=None, pce_dir=None, setup_on_first_use=False,
                      setup_seed=None, memory_mode: str = "auto",
                      msm_budget_bytes: int | None = None, out_of_core_bytes: int | None = None,
                      budget_bytes: int | None = None,
                      host_witness: bool = True, pinned_key: bool = False) -> "Groth16Prover":
        """The prover of the daemon's and ``scripts/prove_batch.py``'s
        settings.  ``memory_mode`` "auto" (their default): a budget given
        names the mode of every circuit (``out_of_core_bytes``: the 16 GB
        mode; ``msm_budget_bytes``: streaming), else each circuit gets the
        fastest mode that fits the device and ``budget_bytes`` (the
        residency budget).  A mode named (``modes.MODES``) is every
        circuit's, with the budgets given or suggested.  ``host_witness``:
        the 16 GB mode's witnesses wait in host memory (hypothesis 83), the
        other modes' on the device; False: every witness on the device.
        ``pinned_key``: ``Groth16Prover``'s."""
        common = (keys_dir, pce_dir, setup_on_first_use, setup_seed)
        host_witness = None if host_witness else False
        if memory_mode == "auto" and (msm_budget_bytes is not None
                                      or out_of_core_bytes is not None):
            return cls(*common, keys_in_host_memory=True, out_of_core_budget=out_of_core_bytes,
                       host_witness=host_witness, pinned_key=pinned_key)
        return cls(*common, out_of_core_budget=out_of_core_bytes, memory_mode=memory_mode,
                   resident_budget=budget_bytes, host_witness=host_witness,
                   pinned_key=pinned_key)

    def _record(self, spec):
        with self._lock:
            if spec.topology not in self._r1cs:
                self._r1cs[spec.topology] = spec.record()
            return self._r1cs[spec.topology]

    def _topo_lock(self, topology: str) -> threading.Lock:
        with self._lock:
            return self._topo_locks.setdefault(topology, threading.Lock())

    def _host_matrices(self, spec):
        """The circuit's PCE matrices in host memory, extracted once per
        topology (from ``pce_dir`` where given) and shared by every device:
        each load puts them on its device (out of core they stay here)."""
        from jaxprove import pce
        with self._topo_lock(spec.topology):
            if spec.topology not in self._matrices:
                if self.pce_dir:
                    m = pce.get_or_extract(lambda: self._record(spec),
                                           pce.cache_key(spec.topology), self.pce_dir)
                else:
                    m = pce.extract(self._record(spec))
                self._matrices[spec.topology] = pce.to_host(m)
            return self._matrices[spec.topology]

    def _mode_plan(self, spec, m, device, split: bool):
        """The circuit's ``modes.ModePlan`` on ``device`` (``memory_mode``),
        decided once per topology (``split``: whether a resident key would be
        held split, ``_split_resident``); MemoryError where the device cannot
        hold even that mode's floor (``modes.check_fits_device``)."""
        import numpy as np

        from jaxprove import memory, modes, pce
        capacity = memory.device_capacity(device)
        # the key as held on the device (only a resident one is): split where its merged MSM
        # passes do not fit (B1 and B2 keep only the variables that occur in B), else whole
        b_vars = int(np.count_nonzero(np.asarray(m.b_input_density))
                     + np.count_nonzero(np.asarray(m.b_aux_density))) if split else None
        hw = self._witness_on_host              # the 16 GB mode's budgets count no device w
        if self.memory_mode is None:
            ooc = self.out_of_core_budget is not None
            mode = "out-of-core" if ooc else \
                "streaming" if self.keys_in_host_memory else "resident"
            p = modes.ModePlan(mode, None, self.out_of_core_budget)
        else:
            with self._topo_lock(spec.topology):
                if spec.topology not in self._plans:
                    args = (m.num_vars, m.num_aux, m.rows, m.nbytes)
                    spmv = pce.evaluate_bytes(m)
                    if self.memory_mode == "auto":
                        p = modes.choose(*args, capacity, spmv, self.resident_budget,
                                         name=spec.topology, b_vars=b_vars, host_witness=hw)
                    else:
                        p = modes.plan(*args, self.memory_mode, capacity, spmv,
                                       self.out_of_core_budget, b_vars, host_witness=hw)
                    gib = lambda x: "none" if x is None else memory.gib(x)   # noqa: E731
                    log.info("%s: %s mode (MSM budget %s, out-of-core budget %s; estimated "
                             "peak %s, device pool %s)", spec.topology, p.mode,
                             gib(p.msm_budget_bytes), gib(p.out_of_core_bytes),
                             gib(p.peak_bytes), "unknown" if capacity is None else gib(capacity))
                    self._plans[spec.topology] = p
                p = self._plans[spec.topology]
        modes.check_fits_device(spec.topology, m.num_vars, m.num_aux, m.rows, m.nbytes, p.mode,
                                capacity, b_vars, host_witness=hw)
        return p

    def _keys(self, spec, device, m, positions, host: bool, pin: int | None = None):
        """(pk, vk) on ``device``: from this prover's host copy, from the key
        store, or (setup on first use) from a setup run once per topology;
        ValueError if the key does not fit the circuit's matrices ``m``.
        With ``host`` (streaming, the 16 GB mode, a resident key held split)
        the proving key's point vectors stay in host memory all the way
        (``groth16.POINT_VECTORS``), split by the circuit's MSM ``positions``
        (``groth16.streaming_key``: built split by the setup, split one
        vector at a time where the store holds them unsplit), and the host
        holds ONE copy, shared by every device (a 32GiB PoRep partition's
        key is ~47 GB split, ~75 GB whole: two copies exceed the H200
        host); with ``pin`` (not None) as well, that copy in ``device``'s
        pinned host memory (``groth16.pin_key``), once, as far as the pool
        holds it beside all that is pinned already (``memory.pinned_in_use``:
        other circuits' keys and prepared row blocks) and ``pin`` bytes left
        for each proof (``groth16.proof_pinned_bytes``)."""
        import jax

        from jaxprove import groth16 as G
        from jaxprove import memory
        from ops import msm as M
        name = key_name(spec.topology)
        with self._topo_lock(spec.topology):
            if spec.topology in self._host_keys:
                return G.place_keys(self._host_keys[spec.topology], device, host)
            keys = G.load_keys(self.keys_dir, name, device, host=host) if self.keys_dir else None
            if keys is None:
                if not self.setup_on_first_use:
                    raise LookupError(f"no proving key {name!r} in key store {self.keys_dir!r} "
                                      f"(run a setup, or enable setup on first use for tests)")
                log.info("setup of %s (seed %s)", spec.topology, self.setup_seed)
                keys = G.setup(self._record(spec), seed=self.setup_seed, host=host,
                               positions=positions if host else None)
                if self.keys_dir:
                    G.save_keys(*keys, self.keys_dir, name)
            n, n_in = G.key_num_vars(keys[0]), keys[1].ic.shape[-1]
            if (n, n_in) != (m.num_vars, m.num_inputs):
                raise ValueError(f"proving key {name!r} does not fit circuit {spec.topology} "
                                 f"({n} variables, {n_in} inputs; the circuit has "
                                 f"{m.num_vars} and {m.num_inputs})")
            if host:
                for f in G.SPLIT_VECTORS:     # one at a time: the key plus one vector
                    if not isinstance(getattr(keys[0], f), M.SplitBases):
                        keys = (G.streaming_key(keys[0], positions, (f,)), keys[1])
                if pin is not None:           # one pageable vector at a time becomes pinned
                    room = memory.pinned_room(device, pin, in_use=memory.pinned_in_use())
                    box, vk = [keys[0]], keys[1]
                    del keys
                    keys = (G.pin_key(box, device, room), vk)
                self._host_keys[spec.topology] = keys
            elif not self.keys_dir:
                self._host_keys[spec.topology] = jax.device_get(keys)
            # with the matrices and the keys kept, the recorded circuit is not needed again
            with self._lock:
                self._r1cs.pop(spec.topology, None)
            return G.place_keys(keys, device, host)

    @staticmethod
    def _split_resident(m, pos, capacity) -> bool:
        """Whether a resident key is held split (``modes.resident_split``,
        from the counts of the matrices ``m`` and the MSM positions ``pos``,
        host or device arrays alike, so that the mode's plan and the load
        decide the same).  A split key is placed on the device already split
        (``groth16.streaming_key`` in host memory first: the whole key never
        goes to the device); its proofs take the per-MSM path, which would
        otherwise split the whole key again at every proof (a second copy
        of A, B1, B2 and L: ~57 GB at 2^27), and B1 and B2 keep only B's
        density (~25%: ~28 GB less at 32GiB).  The estimate is for a batch
        of one."""
        import jax

        from jaxprove import groth16 as G
        from jaxprove import modes
        from ops import msm as M
        if capacity is None:
            return False
        m_dom = 1 << G.domain_log(m.rows)
        held = m.nbytes + modes.FR * modes.DOMAIN_VECTORS * m_dom + sum(
            int(x.nbytes) for x in jax.tree.leaves(pos))
        merged = G.merged_msm_bytes(m.num_vars, m.num_aux, m_dom - 1, 1, pos,
                                    M.default_config())
        return modes.resident_split(m.num_vars, m.num_aux, m.rows, held, merged, capacity)

    def load(self, spec, device) -> Resident:
        import jax

        from jaxprove import groth16 as G
        from jaxprove import memory
        from ops import ntt as N
        m = self._host_matrices(spec)
        # refused before anything is placed where the device cannot hold even the mode's floor
        # (e.g. a 32GiB partition's ~73 GiB key on a 16 GB card), naming the mode that fits
        host_pos = G.msm_positions(m, device=False)       # once: ~5 s at 32GiB
        split = self._split_resident(m, host_pos, memory.device_capacity(device))
        mp = self._mode_plan(spec, m, device, split)
        # out of core the matrices stay in host memory (row blocks go to the device per proof)
        # and h needs no resident domain
        ooc = mp.mode == "out-of-core"
        m = m if ooc else jax.device_put(m, device)
        with jax.default_device(device):
            dom = None if ooc else N.domain(G.domain_log(m.rows))
            pos = jax.device_put(host_pos, device)
        split = split and mp.mode == "resident"
        if split:
            log.info("%s: the merged MSM passes do not fit beside the key: the key is held "
                     "split", spec.topology)
        # out of core a proof is one instance (a batch of B needs B times the device memory):
        # its row blocks are cut once, into pinned host memory, not per proof, where the host
        # has room for them beside the proof's host vectors (groth16.out_of_core_host_bytes);
        # before the key is pinned, so that the key's room counts them as pinned
        plan = G.out_of_core_plan(m, mp.out_of_core_bytes, device,
                                  host_witness=self._witness_on_host) if ooc else None
        pin = G.proof_pinned_bytes(m if ooc else None, self._witness_on_host, 2) \
            if self.pinned_key and mp.mode != "resident" else None
        pk, vk = self._keys(spec, device, m, pos, host=mp.mode != "resident" or split, pin=pin)
        if split:                          # split in host memory, then on the device
            pk, vk = G.place_keys((pk, vk), device)
        nbytes = sum(int(x.nbytes) for x in jax.tree.leaves((pk, vk, m, dom, pos))
                     if isinstance(x, jax.Array))
        return Resident(pk, vk, m, nbytes, dom, pos, plan, {}, mp.mode, mp.out_of_core_bytes,
                        mp.msm_budget_bytes)

    def check(self, res, w) -> list:
        """Per instance None or why its witness fails (a·b ≠ c), so that one
        bad instance does not fail its batch.  Out of core, a batch of one is
        not checked here: its proof evaluates a, b, c out of core anyway and
        refuses an unsatisfied witness, naming the row (a second host-streamed
        evaluation would only repeat that)."""
        import numpy as np

        from jaxprove import pce
        if res.out_of_core_budget is None:
            first = pce.is_satisfied(res.matrices, w)[1]
        elif w.shape[1] == 1:
            return [None]
        else:
            first = pce.evaluate_host(res.matrices, w, res.out_of_core_budget, check=True,
                                      learned=res.budgets)[3]
        return [None if r < 0 else f"the witness does not satisfy the circuit (first failing "
                f"row {r})" for r in np.asarray(first).reshape(-1)]

    @property
    def _witness_on_host(self) -> bool:
        """Whether the 16 GB mode's witness waits in host memory: unless
        ``host_witness`` is False (None, the default, is on)."""
        return self.host_witness is not False

    def witness_home(self, w, topology: str | None = None):
        """Where a batch's witness waits for its proof: unless ``host_witness``
        is False, for a circuit proved in the 16 GB mode (every circuit with
        ``out_of_core_budget`` and no ``memory_mode``, else the circuits
        whose mode was decided out-of-core at their first load), in host
        memory (fetched as the witness program's output arrives, on the
        batch's host thread; its device copy is dropped, so the next batch's
        witness holds no device memory while this one's proof runs, and
        ``groth16.prove`` takes the host witness: hypothesis 83), else where
        it is."""
        if not self._witness_on_host or w is None:
            return w
        if self.memory_mode is None and self.out_of_core_budget is None:
            return w
        if self.memory_mode is not None:
            with self._lock:
                p = self._plans.get(topology)
            if p is None or p.mode != "out-of-core":
                return w
        from ops import transfer
        return transfer.fetch_held(w)       # its pinned copy kept: put back by DMA (91)

    def prove(self, res, w, use, msm_budget_bytes, on_stage=None):
        import jax.numpy as jnp
        import numpy as np

        from jaxprove import groth16 as G
        from ops import msm as M
        from ops.field import Fr
        good = [i for i, u in enumerate(use) if u]
        if len(good) < len(use):
            at = [i if u else good[0] for i, u in enumerate(use)]
            w = w[:, np.asarray(at)] if isinstance(w, np.ndarray) else w[:, jnp.asarray(at)]
        budget = res.msm_budget if msm_budget_bytes is None else msm_budget_bytes
        cfg = None if budget is None else \
            dataclasses.replace(M.default_config(), budget_bytes=budget)
        plan = res.host_plan if res.host_plan is not None and res.host_plan.batch == len(use) \
            else None
        proof, times = G.prove(res.pk, res.matrices, w, msm_config=cfg, domain=res.domain,
                               positions=res.positions, on_stage=on_stage,
                               out_of_core_budget=res.out_of_core_budget, host_plan=plan,
                               learned_budgets=res.budgets)
        pub = Fr.to_int(np.asarray(w[:, :, 1:res.matrices.num_inputs]))
        return proof, [[int(v) for v in row] for row in pub], times

    def verify(self, res, public, proof) -> list:
        import jax
        import numpy as np

        from jaxprove import groth16 as G
        device = jax.devices("cpu")[0] if self.verify_on_host else None
        return [bool(v) for v in np.asarray(G.verify(res.vk, public, proof, device)).reshape(-1)]

    def verify_group(self, res, parts: list) -> list:
        """[(public, proof batch), ...] of one verifying key -> per part, per
        instance, whether it verifies: one vectorised ``groth16.verify`` over
        all the instances (on the CPU 10 proofs cost ~2x one: 0.36 s against
        0.17 s, bench/NOTES.md session 12).  The instances are padded by
        repeating the first to ``VERIFY_GROUP`` (or the next power of two
        above it), so two programs (1 and ``VERIFY_GROUP`` proofs) serve
        every call; a single instance is checked alone."""
        import jax
        import jax.numpy as jnp
        public = [x for pub, _ in parts for x in pub]
        n = len(public)
        size = 1 if n == 1 else max(VERIFY_GROUP, 1 << (n - 1).bit_length())
        cpu = jax.devices("cpu")[0] if self.verify_on_host else None
        proofs = [jax.device_put(pr, cpu) if cpu is not None else pr for _, pr in parts]
        proof = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=-1), *proofs)
        if size > n:
            proof = jax.tree.map(lambda x: jnp.concatenate(
                [x, jnp.repeat(x[..., :1], size - n, axis=-1)], axis=-1), proof)
            public = public + [public[0]] * (size - n)
        ok, out = self.verify(res, public, proof), []
        for pub, _ in parts:
            out.append(ok[:len(pub)])
            ok = ok[len(pub):]
        return out

    def encode(self, proof) -> list:
        from jaxprove import groth16 as G
        return G.proof_to_bytes(proof)


def key_name(topology: str) -> str:
    """The key store entry name of a topology's Groth16 keys."""
    from jaxprove import pce
    return pce.cache_key(topology).replace("-pce", "-keys", 1)


# ---------------------------------------------------------------- jobs
FINAL = ("done", "failed", "cancelled")
_CLAIMED = FINAL + ("finishing",)        # finishing: being persisted by on_finished


class JobResult(NamedTuple):
    job_id: str
    kind: str
    sector_size: int
    status: str               # queued | running | done | failed | cancelled
    proof: bytes              # concatenated 192-byte proofs (done only)
    public: list              # public inputs per partition
    error: str | None
    timings: dict

    def to_json(self) -> dict:
        d = self._asdict()
        d["proof"] = base64.b64encode(self.proof).decode()
        return d

    @classmethod
    def from_json(cls, d: dict) -> "JobResult":
        d = dict(d)
        d["proof"] = base64.b64decode(d.get("proof", ""))
        return cls(**{f: d.get(f) for f in cls._fields})


@dataclasses.dataclass
class _Job:
    id: str
    kind: str
    sector_size: int
    priority: Priority
    seq: int
    topology: str
    parts: list
    submitted: float
    status: str = "queued"
    proofs: list = dataclasses.field(default_factory=list)
    public: list = dataclasses.field(default_factory=list)
    error: str | None = None
    timings: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(float))
    remaining: int = 0
    done: threading.Event = dataclasses.field(default_factory=threading.Event)

    def result(self) -> JobResult:
        proof = b"".join(self.proofs) if self.status == "done" else b""
        return JobResult(self.id, self.kind, self.sector_size, self.status, proof,
                         list(self.public) if self.status == "done" else [], self.error,
                         dict(self.timings))


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """max_batch_size / max_batch_wait_s: batching (``Scheduler``);
    budget_bytes: residency budget per worker (None: unbounded);
    msm_budget_bytes: streaming mode, the MSM working-set budget;
    verify: verify every proof before returning it; lookahead: batches
    whose witnesses are built ahead of the device; preempt: between the
    stages of a running proof, run prepared batches that outrank it (the
    paused proof's intermediates stay on the device meanwhile);
    max_finished: finished jobs remembered for ``wait``."""
    max_batch_size: int = 1
    max_batch_wait_s: float = 0.0
    budget_bytes: int | None = None
    msm_budget_bytes: int | None = None
    verify: bool = True
    lookahead: int = 1
    preempt: bool = True
    max_finished: int = 100_000


# proof instances verified in one call by a prover with ``verify_group`` (padded to it)
VERIFY_GROUP = 8

# histogram bucket bounds of the per-stage seconds (Prometheus "le")
STAGE_BUCKETS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)


class _Proved(NamedTuple):
    """A proved batch on its way to the finishing thread."""
    items: list
    res: Any                 # the Resident with its verifying key only
    proof: Any
    public: list
    use: list
    errors: list
    times: dict
    size: int


class _Batch(NamedTuple):
    items: list               # WorkItems
    spec: CircuitSpec
    w: Any                    # witness batch (padded), or None if every item failed
    errors: list              # per item: None or an error message
    witness_s: float


class Engine:
    """See the module docstring.  ``on_finished(JobResult)`` runs before a
    finished job becomes visible to ``wait`` (the daemon persists results
    there); if it raises, the job is reported failed."""

    def __init__(self, registry: Registry, config: EngineConfig = EngineConfig(),
                 prover: Prover | None = None, devices=None,
                 on_finished: Callable[[JobResult], None] | None = None):
        import jax
        self.registry, self.config = registry, config
        self.prover = prover if prover is not None else Groth16Prover()
        self.devices = list(devices) if devices is not None else jax.local_devices()
        if not self.devices:
            raise ValueError("engine: no devices")
        self._on_finished = on_finished
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._sched = Scheduler(config.max_batch_size, config.max_batch_wait_s)
        self._jobs: dict[str, _Job] = {}
        self._finished: collections.OrderedDict = collections.OrderedDict()
        self._seq = 0
        self._residency = [Residency(config.budget_bytes) for _ in self.devices]
        self._load_locks = [threading.Lock() for _ in self.devices]
        self._busy = [0] * len(self.devices)         # batches running (nested: preemption)
        self._preparing = [None] * len(self.devices)     # rank of the batch the host builds
        # per worker: proved batches awaiting self-check and results, (0, rank, seq, _Proved)
        # most urgent first, then (1, 0, seq, None) when the device thread ends
        self._finishing = [queue.PriorityQueue() for _ in self.devices]
        self._seq_finish = itertools.count()
        self._threads: list[threading.Thread] = []
        self._accepting = True
        self._stopping = False
        self._draining = False
        self._in_flight = 0
        self._started_at = time.time()
        self._counters = collections.Counter()
        # stage -> [sum, count, per-bucket counts (STAGE_BUCKETS, then +Inf)]
        self._stage = collections.defaultdict(lambda: [0.0, 0, [0] * (len(STAGE_BUCKETS) + 1)])

    # ------------------------------------------------------------ public API
    def start(self) -> "Engine":
        if self._threads:
            raise RuntimeError("engine: already started")
        for i, dev in enumerate(self.devices):
            q: queue.Queue = queue.Queue()
            slots = threading.Semaphore(max(1, self.config.lookahead))
            for target, name in ((self._host_loop, "host"), (self._device_loop, "device")):
                t = threading.Thread(target=target, args=(i, dev, q, slots), daemon=True,
                                     name=f"jaxprove-{name}-{i}")
                t.start()
                self._threads.append(t)
            t = threading.Thread(target=self._finish_loop, args=(i,), daemon=True,
                                 name=f"jaxprove-finish-{i}")
            t.start()
            self._threads.append(t)
        return self

    def submit(self, kind: str, sector_size: int, inputs, priority=None,
               job_id: str | None = None) -> str:
        """Queue a job; returns its id.  Unknown kind or duplicate id:
        ValueError.  Inputs that do not parse: the job is recorded as failed
        (``wait`` reports the error).  RuntimeError once shut down."""
        spec = self.registry.get(kind, sector_size)
        prio = spec.priority if priority is None else parse_priority(priority)
        jid = job_id or secrets.token_hex(8)
        error, parts = None, []
        try:
            parts = spec.split(inputs)
            if not parts or (spec.partitions is not None and len(parts) != spec.partitions):
                raise ValueError(f"{kind}: {len(parts)} partitions, expected "
                                 f"{spec.partitions or 'at least 1'}")
        except Exception as e:  # noqa: BLE001 - any parse error fails this job only
            error = f"bad input: {e}"
        with self._cv:
            if not self._accepting:
                raise RuntimeError("engine: shutting down, not accepting jobs")
            if jid in self._jobs or jid in self._finished:
                raise ValueError(f"job id {jid!r} is already in use")
            self._seq += 1
            job = _Job(jid, kind, int(sector_size), prio, self._seq, spec.topology, parts,
                       time.monotonic(), remaining=len(parts), proofs=[None] * len(parts),
                       public=[None] * len(parts))
            self._jobs[jid] = job
            self._counters[("submitted", kind)] += 1
            if error is None:
                for p in range(len(parts)):
                    self._sched.add(WorkItem(prio, job.seq, p, jid, f"{kind}/{int(sector_size)}",
                                             job.submitted))
                self._cv.notify_all()
            else:
                job.status = "finishing"                       # claimed: no cancel races it
        if error is not None:
            self._finish(job, "failed", error)
        return jid

    def wait(self, job_id: str, timeout: float | None = None) -> JobResult | None:
        """The job's result once finished; None if still unfinished after
        ``timeout`` seconds.  KeyError for an unknown id."""
        with self._lock:
            job = self._jobs.get(job_id) or self._finished.get(job_id)
        if job is None:
            raise KeyError(f"unknown job id {job_id!r}")
        if not job.done.wait(timeout):
            return None
        return job.result()

    def prove(self, kind, sector_size, inputs, priority=None, timeout=None) -> JobResult | None:
        return self.wait(self.submit(kind, sector_size, inputs, priority), timeout)

    def queue_position(self, job_id: str) -> int | None:
        """Pending items ahead of the job's first pending item (None when it
        has none pending)."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.status != "queued":
                return None
            return self._sched.ahead_of((-int(job.priority), job.seq, 0))

    def peek(self, job_id: str) -> JobResult:
        with self._lock:
            job = self._jobs.get(job_id) or self._finished.get(job_id)
            if job is None:
                raise KeyError(f"unknown job id {job_id!r}")
            return job.result()

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued or running job (its items in flight finish on the
        device and are discarded).  False if it had already finished."""
        with self._cv:
            job = self._jobs.get(job_id)
            if job is None:
                if job_id in self._finished:
                    return False
                raise KeyError(f"unknown job id {job_id!r}")
            if job.status in _CLAIMED:
                return False
            job.status = "finishing"
            self._sched.remove_job(job_id)
        self._finish(job, "cancelled", "cancelled by request")
        return True

    def preload(self, kind: str, sector_size: int) -> list:
        """Load a kind's keys and matrices on every worker; returns the
        residency entries as in ``status()``."""
        spec = self.registry.get(kind, sector_size)
        for i, dev in enumerate(self.devices):
            self._unpin(i, self._resident(i, dev, spec)[0])
        return self.status()["resident"]

    def evict(self, topology: str | None = None) -> list:
        """Evict idle residency entries (of one topology, or all); returns
        the evicted (worker, topology) pairs."""
        out = []
        with self._lock:
            for i, r in enumerate(self._residency):
                out += [(i, k) for k in r.evict(lambda k: topology is None or k == topology)]
        return out

    def status(self) -> dict:
        now = time.monotonic()
        with self._lock:
            jobs = collections.Counter(j.status for j in self._jobs.values())
            jobs.update(j.status for j in self._finished.values())
            resident = [dict(e, worker=i, device=str(self.devices[i]), topology=e.pop("key"))
                        for i, r in enumerate(self._residency) for e in r.entries(now)]
            return {
                "devices": [{"worker": i, "device": str(d), "platform": d.platform,
                             "kind": getattr(d, "device_kind", ""), "busy": self._busy[i] > 0,
                             "proved_batches": self._counters[("proved_batches", i)]}
                            for i, d in enumerate(self.devices)],
                "resident": resident,
                "kinds": [{"kind": sp.kind, "sector_size": sp.sector_size,
                           "topology": sp.topology, "priority": sp.priority.name}
                          for sp in self.registry],
                "budget_bytes": self.config.budget_bytes,
                "resident_bytes": [r.used_bytes for r in self._residency],
                "queues": self._sched.counts(),
                "pending_items": len(self._sched),
                "in_flight_batches": self._in_flight,
                "jobs": {s: jobs.get(s, 0) for s in ("queued", "running") + FINAL},
                "counters": {"_".join(map(str, k)) if isinstance(k, tuple) else k: v
                             for k, v in self._counters.items()},
                "evictions": sum(r.evictions for r in self._residency),
                "accepting": self._accepting,
                "uptime_s": time.time() - self._started_at,
            }

    def metrics(self) -> str:
        """Prometheus text exposition (version 0.0.4)."""
        st = self.status()
        with self._lock:
            c = dict(self._counters)
            stages = {k: (v[0], v[1], list(v[2])) for k, v in self._stage.items()}
        lines = []

        def metric(name, kind, help_, samples):
            lines.extend([f"# HELP jaxprove_{name} {help_}", f"# TYPE jaxprove_{name} {kind}"])
            for suffix, labels, v in samples:
                lab = ",".join(f'{k}="{val}"' for k, val in labels.items())
                lines.append(f"jaxprove_{name}{suffix}{{{lab}}} {v}" if lab
                             else f"jaxprove_{name}{suffix} {v}")

        metric("jobs_submitted_total", "counter", "Jobs submitted, per kind.",
               [("", {"kind": k[1]}, v) for k, v in sorted(c.items(), key=str)
                if k[0] == "submitted"])
        metric("jobs_finished_total", "counter", "Jobs finished, per kind and status.",
               [("", {"kind": k[1], "status": k[2]}, v) for k, v in sorted(c.items(), key=str)
                if k[0] == "finished"])
        metric("batches_total", "counter", "Batches proved.", [("", {}, c.get("batches", 0))])
        metric("batch_items_total", "counter", "Work items proved in batches.",
               [("", {}, c.get("batch_items", 0))])
        metric("worker_batches_total", "counter", "Batches each device worker proved.",
               [("", {"worker": str(d["worker"])}, d["proved_batches"]) for d in st["devices"]])
        metric("queue_depth", "gauge", "Pending work items per priority.",
               [("", {"priority": p}, n) for p, n in st["queues"]["by_priority"].items()])
        metric("jobs", "gauge", "Jobs known to the engine, per status.",
               [("", {"status": s}, n) for s, n in st["jobs"].items()])
        metric("workers", "gauge", "Device workers.", [("", {}, len(st["devices"]))])
        metric("busy_workers", "gauge", "Workers proving a batch now.",
               [("", {}, sum(d["busy"] for d in st["devices"]))])
        metric("resident_bytes", "gauge", "Bytes of keys and matrices resident per worker.",
               [("", {"worker": str(i)}, n) for i, n in enumerate(st["resident_bytes"])])
        metric("evictions_total", "counter", "Residency evictions.", [("", {}, st["evictions"])])
        metric("learned_budget_bytes", "gauge",
               "Device budget a step settled on after running out of memory (halved), per "
               "worker, topology and step.",
               [("", {"worker": str(e["worker"]), "topology": e["topology"], "step": step}, b)
                for e in st["resident"] for step, b in sorted(e["learned_budgets"].items())])
        hist = []
        for stg, (tot, n, buckets) in sorted(stages.items()):
            cum = 0
            for le, k in zip([f"{b:g}" for b in STAGE_BUCKETS] + ["+Inf"], buckets):
                cum += k
                hist.append(("_bucket", {"stage": stg, "le": le}, cum))
            hist += [("_sum", {"stage": stg}, round(tot, 6)), ("_count", {"stage": stg}, n)]
        metric("stage_seconds", "histogram",
               "Seconds per stage: per batch, except queue_wait and total (per job).", hist)
        metric("uptime_seconds", "gauge", "Seconds since the engine was made.",
               [("", {}, round(st["uptime_s"], 3))])
        return "\n".join(lines) + "\n"

    def shutdown(self, drain: bool = True, timeout: float | None = None) -> list[str]:
        """Stop accepting jobs.  drain: finish every queued job first; else
        hand back the jobs not yet finished that have queued items (returned
        ids; they stay unfinished here — the daemon's journal resumes them).
        Batches already taken finish either way.  Then stop the workers."""
        with self._cv:
            self._accepting = False
            handed = []
            if drain:
                self._draining = True
            else:
                for item in self._sched.take_all():
                    if item.job_id not in handed:
                        handed.append(item.job_id)
            self._stopping = True
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout)
        return handed

    # ------------------------------------------------------------ workers
    def _take_batch(self):
        with self._cv:
            while True:
                batch, wait = self._sched.next_batch(time.monotonic(), flush=self._draining)
                if batch:
                    now = time.monotonic()
                    jobs = [self._jobs[it.job_id] for it in batch]
                    for job in jobs:
                        if job.status == "queued":
                            job.status = "running"
                            job.timings["queue_wait"] = now - job.submitted
                            self._note_stage("queue_wait", now - job.submitted)
                    self._in_flight += 1
                    spec = self.registry.get(jobs[0].kind, jobs[0].sector_size)
                    return batch, spec, [j.parts[it.partition] for j, it in zip(jobs, batch)]
                if self._stopping and (wait is None or not self._draining):
                    return None
                self._cv.wait(wait)

    def _host_loop(self, i, dev, q, slots):
        import jax
        while True:
            slots.acquire()
            taken = self._take_batch()
            if taken is None:
                q.put(None)
                return
            with self._lock:
                self._preparing[i] = min(it.rank for it in taken[0])
            try:
                with jax.default_device(dev):
                    b = self._synthesize(*taken)
            finally:
                with self._lock:
                    self._preparing[i] = None
            q.put(b)

    def _synthesize(self, items, spec, parts) -> _Batch:
        """Host work: the batch's witnesses (padded to the batch shape)."""
        import jax
        size = padded_size(len(items), self.config.max_batch_size)
        t = time.perf_counter()
        try:
            w = self._witness_home(spec.witness(parts + [parts[0]] * (size - len(parts))),
                                   spec.topology)
            return _Batch(items, spec, w, [None] * len(items), time.perf_counter() - t)
        except Exception as e:  # noqa: BLE001 - isolate the bad items below
            if len(items) == 1:
                return _Batch(items, spec, None, [f"witness: {e}"], time.perf_counter() - t)
        # rebuild item by item (same batch shape: the item repeated) to find the bad ones
        ws, errors = [], []
        for p in parts:
            try:
                ws.append(jax.block_until_ready(spec.witness([p] * size)))
                errors.append(None)
            except Exception as e:  # noqa: BLE001
                ws.append(None)
                errors.append(f"witness: {e}")
        good = [x for x in ws if x is not None]
        if not good:
            return _Batch(items, spec, None, errors, time.perf_counter() - t)
        w = self._witness_home(_assemble(ws, good[0], size), spec.topology)
        return _Batch(items, spec, w, errors, time.perf_counter() - t)

    def _witness_home(self, w, topology: str):
        """w ready, where the prover wants it to wait (its ``witness_home``, if any)."""
        import jax
        w = jax.block_until_ready(w)
        home = getattr(self.prover, "witness_home", None)
        return w if home is None else home(w, topology)

    def _outranked(self, i, rank) -> bool:
        """Whether a pending item, or the batch worker i's host thread is
        building, ranks before ``rank``."""
        with self._lock:
            best = self._sched.best_rank()
            return any(r is not None and r < rank for r in (best, self._preparing[i]))

    @staticmethod
    def _receive(q, slots, ready: list, host_done: list, **get) -> bool:
        """One batch (or the host thread's end) from q into ready; False if none came."""
        try:
            b = q.get(**get)
        except queue.Empty:
            return False
        slots.release()
        if b is None:
            host_done[0] = True
        else:
            ready.append(b)
        return True

    def _next_prepared(self, i, q, slots, ready: list, host_done: list):
        """The prepared batch to run next on worker i: the best-ranked of
        those received from the host thread (``ready``).  While fewer than
        ``lookahead`` + 1 are ready and a pending (or half-built) batch
        outranks them all, wait for it: a WinningPoSt job submitted after a
        PoRep batch was prepared runs before that batch instead of after it.
        None once the host thread is done and nothing is ready."""
        receive = functools.partial(self._receive, q, slots, ready, host_done)
        while True:
            while not host_done[0] and receive(block=not ready):
                pass
            if not ready:
                return None
            best = min(ready, key=_batch_rank)
            rank = _batch_rank(best)
            if host_done[0] or len(ready) > self.config.lookahead or not self._outranked(i, rank):
                ready.remove(best)
                return best
            receive(timeout=0.02)                # poll: the urgent item may be cancelled meanwhile

    def _yield_to_urgent(self, i, dev, q, slots, ready: list, host_done: list, rank):
        """The interruption point between two stages of a running proof of
        rank ``rank`` on worker i (``EngineConfig.preempt``): take what the
        host thread has prepared (at most ``lookahead`` + 1 batches held, as
        ``_next_prepared``, one more while waiting), wait while an item that
        outranks the paused proof is pending or being built (polling, so a
        cancellation ends the wait), and run every prepared batch that
        outranks the paused one, to the end (they are not interrupted
        themselves).  So a WinningPoSt job waits for one stage of a running
        PoRep partition (or one chunk of a chunked MSM), not the whole
        partition."""
        receive = functools.partial(self._receive, q, slots, ready, host_done)
        while True:
            while not host_done[0] and len(ready) <= self.config.lookahead and receive(block=False):
                pass
            urgent = [b for b in ready if _batch_rank(b) < rank]
            if urgent:
                b = min(urgent, key=_batch_rank)
                ready.remove(b)
                self._run_guarded(i, dev, b, None)
                continue
            if host_done[0] or not self._outranked(i, rank):
                return
            # an outranking item is pending or being built: every batch taken from q frees
            # the host thread to build the best-ranked pending item next, i.e. that one
            receive(timeout=0.02)

    def _device_loop(self, i, dev, q, slots):
        ready, host_done = [], [False]
        while True:
            b = self._next_prepared(i, q, slots, ready, host_done)
            if b is None:
                self._finishing[i].put((1, 0, next(self._seq_finish), None))
                return
            on_stage = None
            if self.config.preempt:
                rank = _batch_rank(b)
                on_stage = lambda stage, rank=rank: self._yield_to_urgent(   # noqa: E731
                    i, dev, q, slots, ready, host_done, rank)
            self._run_guarded(i, dev, b, on_stage)

    def _run_guarded(self, i, dev, b: _Batch, on_stage):
        """Run one batch on worker i; a failure fails its items only."""
        import jax
        with self._lock:
            self._busy[i] += 1
        handed = False
        try:
            with jax.default_device(dev):
                handed = self._run_batch(i, dev, b, on_stage)
        except Exception as e:  # noqa: BLE001 - the batch fails, the worker lives on
            log.exception("batch of %s failed", b.spec.topology)
            self._fail_items(b.items, e, {})
        finally:
            with self._cv:
                self._busy[i] -= 1
                if not handed:                   # else the finishing thread counts it out
                    self._in_flight -= 1
                self._cv.notify_all()

    def _resident(self, i, dev, spec):
        """(key, Resident) of spec's topology on worker i, pinned, and the load seconds."""
        key = spec.topology
        t = time.perf_counter()
        with self._load_locks[i]:
            with self._lock:
                res = self._residency[i].get(key, time.monotonic())
                if res is not None:
                    self._residency[i].pin(key)
                    return key, res, 0.0
            res = self.prover.load(spec, dev)
            with self._lock:
                evicted = self._residency[i].put(key, res, res.nbytes, time.monotonic())
                self._residency[i].pin(key)
            if evicted:
                log.info("worker %d: evicted %s to load %s", i, evicted, key)
        return key, res, time.perf_counter() - t

    def _unpin(self, i, key):
        with self._lock:
            self._residency[i].unpin(key)

    def _run_batch(self, i, dev, b: _Batch, on_stage=None) -> bool:
        """Load, check and prove batch b on worker i; the proofs go to the
        worker's finishing thread (self-check, encoding, results), so the
        device is free for the next batch meanwhile.  True once handed over;
        False if the batch ended here (nothing to prove)."""
        errors = list(b.errors)
        n = len(b.items)
        with self._lock:
            live = [it.job_id in self._jobs and self._jobs[it.job_id].status not in _CLAIMED
                    for it in b.items]
        times = {"witness": b.witness_s}
        if b.w is None or not any(live):
            self._item_results(b.items, [None] * n, errors, times, None)
            return False
        key, res, times["load"] = self._resident(i, dev, b.spec)
        try:
            t = time.perf_counter()
            size = padded_size(n, self.config.max_batch_size)
            checked = self.prover.check(res, b.w)
            times["check"] = time.perf_counter() - t
            for k in range(n):
                if errors[k] is None and checked[k] is not None:
                    errors[k] = checked[k]
            use = [errors[k] is None and live[k] for k in range(n)]
            if not any(use):
                self._item_results(b.items, [None] * n, errors, times, None)
                return False
            use += [False] * (size - n)
            proof, public, ptimes = self.prover.prove(res, b.w, use, self.config.msm_budget_bytes,
                                                      on_stage=on_stage)
            times.update({k: v for k, v in ptimes.items() if k != "total"})
            times["prove"] = ptimes.get("total", sum(ptimes.values()))
            with self._lock:
                self._counters[("proved_batches", i)] += 1
        finally:
            self._unpin(i, key)
        # the finishing thread keeps the verifying key only: an evicted proving key is freed
        vk_only = res._replace(pk=None, matrices=None, domain=None, positions=None)
        self._finishing[i].put((0, _batch_rank(b), next(self._seq_finish),
                                _Proved(b.items, vk_only, proof, public, use, errors, times, size)))
        return True

    def _finish_loop(self, i):
        """Worker i's finishing thread: proved batches, most urgent first ->
        verify-before-return (``EngineConfig.verify``), encode, results.
        With a prover that has ``verify_group``, the batches already waiting
        that share the most urgent one's verifying key join it (up to
        ``VERIFY_GROUP`` instances) and are verified in one call."""
        fq = self._finishing[i]
        grouped = self.config.verify and hasattr(self.prover, "verify_group")
        while True:
            _, _, _, d = fq.get()
            if d is None:
                return
            group = [d]
            if grouped:
                group += self._take_same_key(fq, d)
            try:
                self._complete(group)
            except Exception as e:  # noqa: BLE001 - the batch fails, the worker lives on
                log.exception("finishing a batch failed")
                for g in group:
                    self._fail_items(g.items, e, g.times)
            finally:
                with self._cv:
                    self._in_flight -= len(group)
                    self._cv.notify_all()

    @staticmethod
    def _take_same_key(fq, d: "_Proved") -> list:
        """Proved batches waiting in ``fq`` with d's verifying key, in queue
        order, up to ``VERIFY_GROUP`` instances with d's; the rest go back."""
        taken, back, n = [], [], d.size
        while n < VERIFY_GROUP:
            try:
                e = fq.get_nowait()
            except queue.Empty:
                break
            if (e[3] is not None and d.res.vk is not None and e[3].res.vk is d.res.vk
                    and n + e[3].size <= VERIFY_GROUP):
                taken.append(e[3])
                n += e[3].size
            else:
                back.append(e)
                if e[3] is None:
                    break
        for e in back:
            fq.put(e)
        return taken

    def _verify_parts(self, res, parts: list) -> list:
        """Per (public, proof) part, per instance: whether it verifies — one
        ``verify_group`` call where the prover offers it, else one
        ``verify`` per part."""
        if hasattr(self.prover, "verify_group"):
            return self.prover.verify_group(res, parts)
        return [self.prover.verify(res, public, proof) for public, proof in parts]

    def _complete(self, group: list):
        """Verify (one call for the group), encode and publish proved batches;
        the verification's time is shared among them by instance count."""
        oks = None
        if self.config.verify:
            t = time.perf_counter()
            oks = self._verify_parts(group[0].res, [(d.public, d.proof) for d in group])
            spent, total = time.perf_counter() - t, sum(d.size for d in group)
        for j, d in enumerate(group):
            errors, times, n = list(d.errors), dict(d.times), len(d.items)
            if oks is not None:
                times["verify"] = spent * d.size / total
                for k in range(n):
                    if d.use[k] and not oks[j][k]:
                        errors[k] = "the proof did not verify (self-check before return)"
            t = time.perf_counter()
            encoded = self.prover.encode(d.proof)
            times["encode"] = time.perf_counter() - t
            self._item_results(d.items, [(encoded[k], d.public[k]) for k in range(n)], errors,
                               times, d.size)

    def _fail_items(self, items, e: Exception, times):
        """Every item of a batch fails with the exception that ended it."""
        self._item_results(items, [None] * len(items), [f"{type(e).__name__}: {e}"] * len(items),
                           times, None)

    def _item_results(self, items, outs, errors, times, size):
        finished = []
        with self._lock:
            self._counters["batches"] += 1
            self._counters["batch_items"] += len(items)
            for s, v in times.items():
                self._note_stage(s, v)
            for it, out, err in zip(items, outs, errors):
                job = self._jobs.get(it.job_id)
                if job is None or job.status in _CLAIMED:
                    continue                                   # cancelled or failed meanwhile
                for s, v in times.items():
                    job.timings[s] += v
                if size:
                    job.timings.setdefault("batch_sizes", [])
                    job.timings["batch_sizes"].append(size)
                if err is not None:
                    job.status = "finishing"
                    self._sched.remove_job(job.id)
                    finished.append((job, "failed", f"partition {it.partition}: {err}"))
                    continue
                job.proofs[it.partition], job.public[it.partition] = out
                job.remaining -= 1
                if job.remaining == 0:
                    job.status = "finishing"
                    finished.append((job, "done", None))
        for job, status, err in finished:
            self._finish(job, status, err)

    def _note_stage(self, stage, seconds):
        s = self._stage[stage]
        s[0] += seconds
        s[1] += 1
        s[2][bisect.bisect_left(STAGE_BUCKETS, seconds)] += 1

    def _finish(self, job: _Job, status: str, error: str | None):
        """Make a job final: persist through on_finished, then publish."""
        job.status, job.error = status, error
        job.timings["total"] = time.monotonic() - job.submitted
        if self._on_finished is not None:
            try:
                self._on_finished(job.result())
            except Exception as e:  # noqa: BLE001 - not persisted: not acknowledged as done
                log.exception("could not persist job %s", job.id)
                job.status, job.error = "failed", f"could not persist the result: {e}"
        with self._cv:
            self._counters[("finished", job.kind, job.status)] += 1
            self._note_stage("total", job.timings["total"])
            self._jobs.pop(job.id, None)
            self._finished[job.id] = job
            while len(self._finished) > self.config.max_finished:
                self._finished.popitem(last=False)
            self._cv.notify_all()
        job.done.set()


def _batch_rank(b: _Batch):
    """A prepared batch's rank: its best item's."""
    return min(it.rank for it in b.items)


def _assemble(ws, fill, size):
    """A witness batch from per-item batches (each the item repeated to the
    batch shape): instance 0 of each item, failed items and padding replaced
    by ``fill``'s instance 0.  Works on Fr arrays (8, size, n) and on any
    array with the instance axis 1."""
    import jax.numpy as jnp
    cols = [(x if x is not None else fill)[:, 0] for x in ws]
    cols += [fill[:, 0]] * (size - len(cols))
    return jnp.stack(cols, axis=1)
