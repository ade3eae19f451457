"""Filecoin's proof circuits (rust-fil-proofs) at every sector size, written
as tensor gadgets over all challenges, sectors and partitions at once.

* ``sizes``: the per-sector-size parameters (research/filecoin-circuits.md
  §1) and the scaled-down test configurations (§5);
* ``synthetic``: host-side sparse Merkle trees (Poseidon and SHA-256) giving
  real inclusion paths for challenged leaves of trees of any size, so the
  circuits are satisfiable without sealing a sector;
* ``post``: Winning / Window PoSt (``FallbackPoStCircuit``);
* ``snap``: SnapDeals (``EmptySectorUpdateCircuit``);
* ``porep``: PoRep C2 (``StackedCircuit``).

Submodules are imported explicitly (this package imports nothing).
"""
