"""Per-sector-size parameters of Filecoin's proofs
(research/filecoin-circuits.md §1; rust-fil-proofs filecoin-proofs
src/constants.rs, src/parameters.rs, storage-proofs-update src/constants.rs).

Nodes are 32 bytes.  Tree R (replica) and tree C (columns) are Poseidon trees
of arities ``base-sub-top`` (0: no such level); tree D is the binary SHA-256
tree over every node (depth log2 nodes).

* PoRep: ``porep_layers`` SDR layers, ``porep_partitions`` partitions
  (interactive; ``porep_partitions_ni`` for non-interactive PoRep, same
  circuit) of ``porep_challenges`` challenges each.
* PoSt (``FallbackPoStCircuit``): Winning is 66 "sectors" × 1 challenge (one
  sector, repeated), Window is ``window_sectors`` sectors per partition ×
  10 challenges.
* SnapDeals (``EmptySectorUpdateCircuit``): ``snap_partitions`` partitions
  of ``snap_challenges`` challenges, an apex tree of ``snap_apex_leaves``
  leaves, ``snap_hs`` the six allowed h values and ``snap_h`` the default
  (``hs[3]``; all 1 up to 32 KiB).

``params(size)`` looks a production size up ("2KiB", "8MiB", "512MiB",
"32GiB", "64GiB"); ``MINI_*`` are the scaled-down configurations of §5 whose
counts rust-fil-proofs' tests assert (same gadgets, fewer nodes).
"""
from __future__ import annotations

import dataclasses

from circuits.gadgets.merkle import tree_arities

NODE_SIZE = 32
WINNING_CHALLENGES = 66
WINDOW_CHALLENGES = 10


def _snap_hs(nodes: int) -> tuple:
    """storage-proofs-update constants.rs ``hs``."""
    return (1,) * 6 if nodes <= 1 << 10 else (7, 8, 9, 10, 11, 12)


class _Trees:
    """The trees of a sector of ``nodes`` nodes: tree R / C of arities
    ``base-sub-top`` (Poseidon), tree D binary (SHA-256)."""
    nodes: int
    base: int
    sub: int
    top: int

    @property
    def tree_r_arities(self) -> tuple:
        """Level arities of tree R / C, leaves first (the Poseidon path)."""
        return tree_arities(self.base, self.sub, self.top, self.nodes)

    @property
    def tree_d_depth(self) -> int:
        return self.nodes.bit_length() - 1


@dataclasses.dataclass(frozen=True)
class SectorSize(_Trees):
    """One sector size's parameters (see the module docstring)."""
    name: str
    nodes: int
    base: int
    sub: int
    top: int
    porep_layers: int
    porep_partitions: int
    porep_partitions_ni: int
    porep_challenges: int
    window_sectors: int
    snap_partitions: int
    snap_challenges: int
    snap_apex_leaves: int
    winning_sectors: int = WINNING_CHALLENGES
    winning_challenges: int = 1
    window_challenges: int = WINDOW_CHALLENGES

    @property
    def sector_bytes(self) -> int:
        return self.nodes * NODE_SIZE

    @property
    def snap_hs(self) -> tuple:
        return _snap_hs(self.nodes)

    @property
    def snap_h(self) -> int:
        return self.snap_hs[3]

    def post(self, kind: str) -> tuple:
        """(sectors per partition, challenges per sector) of ``kind``
        "winning" or "window"."""
        if kind == "winning":
            return self.winning_sectors, self.winning_challenges
        if kind == "window":
            return self.window_sectors, self.window_challenges
        raise ValueError(f"post: kind must be 'winning' or 'window', got {kind!r}")


SIZES = {s.name: s for s in (
    SectorSize("2KiB", 1 << 6, 8, 0, 0, 2, 1, 13, 2, 2, 1, 10, 8),
    SectorSize("8MiB", 1 << 18, 8, 0, 0, 2, 1, 13, 2, 2, 4, 10, 128),
    SectorSize("512MiB", 1 << 24, 8, 0, 0, 2, 1, 13, 2, 2, 16, 86, 128),
    SectorSize("32GiB", 1 << 30, 8, 8, 0, 11, 10, 126, 18, 2349, 16, 86, 128),
    SectorSize("64GiB", 1 << 31, 8, 8, 2, 11, 10, 126, 18, 2300, 16, 86, 128),
)}


def params(size: str) -> SectorSize:
    """The parameters of a production sector size."""
    try:
        return SIZES[size]
    except KeyError:
        raise ValueError(f"params: unknown sector size {size!r}; known: "
                         f"{', '.join(SIZES)}") from None


# ---------------------------------------------------------------- §5 test family
@dataclasses.dataclass(frozen=True)
class MiniPoRep(_Trees):
    """storage-proofs-porep tests/stacked_circuit.rs: tree R/C ``base-sub-top``
    over ``nodes`` nodes, 1 challenge, 2 layers (22 inputs with ONE)."""
    nodes: int
    base: int
    sub: int
    top: int
    layers: int = 2
    challenges: int = 1


@dataclasses.dataclass(frozen=True)
class MiniPoSt(_Trees):
    """storage-proofs-post tests/fallback_circuit.rs: ``sectors`` × ``challenges``
    over a tree of ``nodes`` leaves (64 per base tree)."""
    nodes: int
    base: int
    sub: int
    top: int
    sectors: int = 3
    challenges: int = 5


# constraint counts [T] in research/filecoin-circuits.md §2.2 / §2.3
MINI_POREP = {"8-0-0": MiniPoRep(8, 8, 0, 0), "2-0-0": MiniPoRep(8, 2, 0, 0),
              "8-4-0": MiniPoRep(32, 8, 4, 0), "8-4-2": MiniPoRep(64, 8, 4, 2)}
MINI_POST = {"8-0-0": MiniPoSt(64, 8, 0, 0), "8-4-0": MiniPoSt(256, 8, 4, 0),
             "8-4-2": MiniPoSt(512, 8, 4, 2)}
# storage-proofs-update tests/circuit.rs: sector size in nodes -> tree R
# (base, sub, top); the other SnapDeals parameters follow from the node count
MINI_SNAP = {32: (8, 4, 0), 64: (8, 0, 0), 128: (8, 2, 0), 256: (8, 4, 0),
             512: (8, 8, 0), 1024: (8, 8, 2)}


def snap_params(nodes: int) -> tuple:
    """storage-proofs-update constants.rs for a sector of ``nodes`` nodes:
    (partitions, challenges per partition, apex leaves, hs)."""
    if nodes < 1 << 5 or nodes & (nodes - 1):
        raise ValueError(f"snap_params: {nodes} nodes is not a power of two ≥ 32")
    partitions = 1 if nodes <= 1 << 8 else 2 if nodes <= 1 << 10 else 4 if nodes <= 1 << 19 else 16
    challenges = 10 if nodes <= 1 << 19 else 86
    apex = 8 if nodes <= 1 << 8 else 128
    return partitions, challenges, apex, _snap_hs(nodes)
