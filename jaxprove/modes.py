"""Memory modes of a Groth16 proof on one device: what each needs, and which to use.

A proof runs in one of three modes (``MODES``), fastest first:

* "resident": the proving key, the PCE matrices and the NTT domain live on the
  device; the MSMs run within its free memory;
* "streaming": the key stays in host memory and its bases travel in chunks,
  each MSM within ``msm_budget_bytes``;
* "out-of-core" (the 16 GB mode): the key and the matrices stay in host
  memory; a, b, c and h are computed in row blocks and NTT sweeps within
  ``out_of_core_bytes``, the MSMs within ``msm_budget_bytes``.

For a circuit of n = num_vars variables (num_aux of them aux) and a domain of
m = 2^domain_log(rows) (Fr 32 bytes, affine G1 96, affine G2 192):

* ``device_bytes_floor``: a lower bound per mode (a device below it cannot run
  the mode at all);
* ``peak_bytes``: an estimate of a proof's device peak, from the byte counts of
  its largest stage;
* ``suggested_budgets``: budgets that fill a device of a given capacity;
* ``resident_split``: whether a resident key is held split (then B's points
  only at B's density, ``b_vars``);
* ``plan`` / ``choose``: a ``ModePlan`` (mode and budgets) for a device, the
  given mode or the fastest whose estimated peak fits (``Groth16Prover(
  memory_mode="auto")``, the daemon's default);
* ``check_fits_device``: the refusal, naming the mode that would fit.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

from jaxprove import memory

MODES = ("resident", "streaming", "out-of-core")
MEMORY_MODES = ("auto",) + MODES    # the memory_mode setting: per circuit, or one for all
MARGIN = 1 << 30      # device bytes left beside a suggested budget (the compiler's scratch)
MIN_BUDGET = 256 << 20          # the least budget a step is planned with
# Fr vectors of the domain live at once while h is computed (groth16._h_coefficients: a,
# b, c, one of them to the coset in its own buffer plus an NTT pass's output, the
# quotient's temporaries).  Counted, not measured.
NTT_VECTORS = 6
# the ops.ntt.Domain: ω^j and ω^−j for j < m/2 (Fr): 1 vector (the coset powers are two
# short tables, ops.ntt.PowerTable)
DOMAIN_VECTORS = 1
FR, G1_AFFINE, G2_AFFINE = 32, 96, 192


def domain_log(rows: int) -> int:
    """log2 of the evaluation domain of a circuit of ``rows`` R1CS rows."""
    return max(1, (rows - 1).bit_length())


class ModePlan(NamedTuple):
    """A memory mode with its budgets (bytes; None: the prover's default,
    e.g. a resident proof's MSMs within 80% of the free memory) and the
    estimated device peak of one proof in it (None where not estimated)."""
    mode: str
    msm_budget_bytes: int | None = None
    out_of_core_bytes: int | None = None
    peak_bytes: int | None = None


def _check_mode(mode: str, what: str) -> None:
    if mode not in MODES:
        raise ValueError(f"{what}: mode must be one of {MODES}, got {mode!r}")


def key_bytes(num_vars: int, num_aux: int, rows: int, b_vars: int | None = None) -> int:
    """The proving key's affine points: 96·(n + b + num_aux + m − 1) bytes of
    G1 (A, B1, L, H) and 192·b of G2 (B2), b = ``b_vars``, the variables
    that occur in B (default n: the whole vectors; a key split by its
    ``groth16.msm_positions`` keeps B1 and B2 at B's density, ~25% of a
    PoRep circuit's, as bellperson's parameter files do)."""
    m = 1 << domain_log(rows)
    b = num_vars if b_vars is None else b_vars
    return G1_AFFINE * (num_vars + b + num_aux + m - 1) + G2_AFFINE * b


def resident_bytes(num_vars: int, num_aux: int, rows: int, matrices_bytes: int,
                   mode: str, b_vars: int | None = None) -> int:
    """Device bytes that stay between proofs in ``mode``: resident, the key,
    the matrices and the domain; streaming, the matrices and the domain;
    out of core, none."""
    _check_mode(mode, "resident_bytes")
    if mode == "out-of-core":
        return 0
    m = 1 << domain_log(rows)
    held = matrices_bytes + FR * DOMAIN_VECTORS * m
    return held + (key_bytes(num_vars, num_aux, rows, b_vars) if mode == "resident" else 0)


def resident_split(num_vars: int, num_aux: int, rows: int, held_bytes: int,
                   merged_msm_bytes: int, capacity: int | None) -> bool:
    """Whether a resident key is held split (B1 and B2 at B's density, each
    MSM its own pass): where one proof's merged MSM passes
    (``groth16.merged_msm_bytes``) would not fit a device of ``capacity``
    beside the whole key (``key_bytes``) and ``held_bytes`` (the matrices,
    the domain, the MSM positions).  Never where the capacity is unknown.
    The key's ``b_vars`` for the other functions here follow from it: B's
    count where split, the whole vectors (None) where not."""
    if capacity is None:
        return False
    return merged_msm_bytes + key_bytes(num_vars, num_aux, rows) + held_bytes > capacity


def device_bytes_floor(num_vars: int, num_aux: int, rows: int, matrices_bytes: int,
                       mode: str, b_vars: int | None = None) -> int:
    """A LOWER bound on the device bytes a proof of one instance needs in
    ``mode``:

    * "resident": the key (``key_bytes``, B at ``b_vars``), plus what
      "streaming" needs;
    * "streaming": the PCE matrices, the domain's twiddles (32·m), the
      witness (32·n) and a, b, c (3·32·m), which live together after the SpMV;
    * "out-of-core": the witness and, beside the MSMs, the scalars gathered
      at their dense positions (at most one more vector: 2·32·n).

    Every real proof needs more (an MSM's working set, an NTT's output, the
    compiler's scratch), so a device below this bound cannot run the mode at
    all; it does not say that one above it can (``peak_bytes`` estimates)."""
    _check_mode(mode, "device_bytes_floor")
    m = 1 << domain_log(rows)
    if mode == "out-of-core":
        return 2 * FR * num_vars
    need = matrices_bytes + FR * m + FR * num_vars + 3 * FR * m
    if mode == "resident":
        need += key_bytes(num_vars, num_aux, rows, b_vars)
    return need


def peak_bytes(num_vars: int, num_aux: int, rows: int, matrices_bytes: int, mode: str,
               spmv_bytes: int | None = None, msm_budget: int | None = None,
               out_of_core: int | None = None, b_vars: int | None = None,
               host_witness: bool = False) -> int:
    """Estimated device peak of one proof in ``mode``: what stays
    (``resident_bytes``) + the witness (32·n) + the largest stage of

    * the SpMV, ``spmv_bytes`` (``pce.evaluate_bytes``; default
      32·(n + 4·rows)),
    * the NTTs, ``NTT_VECTORS`` vectors of m,
    * the MSMs: h (32·m), the gathered dense scalars (≤ 32·n) and the MSM budget (default
      ``MIN_BUDGET``: a resident proof's MSMs take what is free);

    out of core: the witness + the larger of ``out_of_core`` (row blocks and
    NTT sweeps) and the MSMs' gathered scalars + ``msm_budget`` (default: the same
    budget), as ``groth16.prove`` runs it; with ``host_witness`` (no witness
    on the device before the MSMs) the largest of ``out_of_core`` (all of
    the SpMV's and h's bytes), h (32·m, left on the device) + ``msm_budget``
    (H's MSM) and w + the gathered scalars + ``msm_budget`` (the others)."""
    _check_mode(mode, "peak_bytes")
    w = FR * num_vars
    if mode == "out-of-core":
        if out_of_core is None:
            raise ValueError("peak_bytes: the out-of-core mode needs its budget, out_of_core")
        msm = out_of_core if msm_budget is None else msm_budget
        if host_witness:
            return max(out_of_core, FR * (1 << domain_log(rows)) + msm, 2 * w + msm)
        return w + max(out_of_core, w + msm)
    m = 1 << domain_log(rows)
    spmv = FR * (num_vars + 4 * rows) if spmv_bytes is None else spmv_bytes
    msm = FR * m + w + (MIN_BUDGET if msm_budget is None else msm_budget)
    return (resident_bytes(num_vars, num_aux, rows, matrices_bytes, mode, b_vars) + w
            + max(spmv, FR * NTT_VECTORS * m, msm))


def suggested_budgets(num_vars: int, rows: int, matrices_bytes: int, mode: str,
                      capacity: int, host_witness: bool = False) -> dict:
    """Starting budgets for ``mode`` on a device of ``capacity`` bytes, by
    the byte counts of ``device_bytes_floor`` less ``MARGIN``: "streaming":
    msm_budget_bytes = capacity − (matrices, the domain's twiddles, h, w and
    the gathered dense scalars: what lives beside an MSM); "out-of-core":
    out_of_core_bytes = capacity − w (the SpMV row blocks and NTT sweeps run
    beside w; with ``host_witness``, the whole capacity: no w on the device
    before the MSMs) and msm_budget_bytes = capacity − w − the gathered
    scalars.  Each at least ``MIN_BUDGET``.
    (For a 14 GiB pool at 2^27 this gives 9.1 (13.0 with ``host_witness``)
    and 5.2 GiB, the 16 GB-mode settings of bench/device/fc32.sh.)"""
    m = 1 << domain_log(rows)
    floor = lambda x: max(x - MARGIN, MIN_BUDGET)                    # noqa: E731
    if mode == "streaming":
        return {"msm_budget_bytes": floor(capacity - matrices_bytes - 2 * FR * m
                                          - 2 * FR * num_vars)}
    if mode == "out-of-core":
        return {"out_of_core_bytes": floor(capacity - (0 if host_witness else FR * num_vars)),
                "msm_budget_bytes": floor(capacity - 2 * FR * num_vars)}
    raise ValueError(f"suggested_budgets: no budgets for mode {mode!r}")


def plan(num_vars: int, num_aux: int, rows: int, matrices_bytes: int, mode: str,
         capacity: int | None, spmv_bytes: int | None = None,
         out_of_core: int | None = None, b_vars: int | None = None,
         host_witness: bool = False) -> ModePlan:
    """``mode`` with its budgets on a device of ``capacity`` bytes: those of
    ``suggested_budgets`` (``out_of_core``, where given, is the out-of-core
    budget, and the MSMs' then default to it), none where the capacity is
    unknown (None); with the estimated peak (``host_witness``: the 16 GB
    mode's witness in host memory, ``peak_bytes``)."""
    _check_mode(mode, "plan")
    budgets = {}
    if mode == "out-of-core" and out_of_core is not None:
        budgets = {"out_of_core_bytes": out_of_core}
    elif mode != "resident" and capacity is not None:
        budgets = suggested_budgets(num_vars, rows, matrices_bytes, mode, capacity,
                                    host_witness)
    if mode == "out-of-core" and "out_of_core_bytes" not in budgets:
        raise ValueError("the out-of-core (16 GB) mode needs a budget, out_of_core_bytes, "
                         "where the device's memory is not known")
    peak = peak_bytes(num_vars, num_aux, rows, matrices_bytes, mode, spmv_bytes,
                      budgets.get("msm_budget_bytes"), budgets.get("out_of_core_bytes"), b_vars,
                      host_witness)
    return ModePlan(mode, budgets.get("msm_budget_bytes"), budgets.get("out_of_core_bytes"),
                    peak)


def choose(num_vars: int, num_aux: int, rows: int, matrices_bytes: int,
           capacity: int | None, spmv_bytes: int | None = None,
           resident_budget: int | None = None, name: str = "the circuit",
           b_vars: int | None = None, host_witness: bool = False) -> ModePlan:
    """The fastest mode (``MODES`` in order) whose estimated peak
    (``peak_bytes`` with the ``suggested_budgets``) plus ``MARGIN`` fits
    ``capacity`` and whose lasting device bytes (``resident_bytes``) fit
    ``resident_budget`` where one is given (the engine's residency budget);
    "resident" where the capacity is unknown (the CPU).  MemoryError when
    none fits, with the figures."""
    if capacity is None:
        return plan(num_vars, num_aux, rows, matrices_bytes, "resident", None, spmv_bytes,
                    b_vars=b_vars)
    tried = []
    for mode in MODES:
        p = plan(num_vars, num_aux, rows, matrices_bytes, mode, capacity, spmv_bytes,
                 b_vars=b_vars, host_witness=host_witness)
        held = resident_bytes(num_vars, num_aux, rows, matrices_bytes, mode, b_vars)
        if p.peak_bytes + MARGIN <= capacity and (resident_budget is None
                                                  or held <= resident_budget):
            return p
        tried.append(f"{mode} ~{memory.gib(p.peak_bytes)} at its peak, "
                     f"{memory.gib(held)} resident")
    budget = "" if resident_budget is None else \
        f" and a residency budget of {memory.gib(resident_budget)}"
    raise MemoryError(f"{name} ({rows} rows, {num_vars} variables) fits no memory mode on a "
                      f"device of {memory.gib(capacity)}{budget}: {'; '.join(tried)}")


def check_fits_device(name: str, num_vars: int, num_aux: int, rows: int, matrices_bytes: int,
                      mode: str, capacity: int | None, b_vars: int | None = None,
                      host_witness: bool = False) -> None:
    """MemoryError, naming the shortfall and the settings that would fit,
    when ``device_bytes_floor`` of ``mode`` exceeds the device's
    ``capacity`` (bytes; None: not known, nothing checked)."""
    if capacity is None:
        return
    floor = functools.partial(device_bytes_floor, num_vars, num_aux, rows, matrices_bytes,
                              b_vars=b_vars)
    need = floor(mode)
    if need <= capacity:
        return
    fits = [m for m in MODES[MODES.index(mode) + 1:] if floor(m) <= capacity]
    if fits:
        budgets = suggested_budgets(num_vars, rows, matrices_bytes, fits[0], capacity,
                                    host_witness)
        start = ", ".join(f"{k} = {v} ({memory.gib(v)})" for k, v in budgets.items())
        how = {"streaming": "keep the proving key in host memory (streaming mode)",
               "out-of-core": "use the 16 GB mode (the key and the matrices in host memory)"}
        advice = (f"; to prove it on this device, {how[fits[0]]}: e.g. {start} (daemon and "
                  f"prove_batch.py flags of those names, or memory_mode auto; a budget found "
                  f"too large is halved and remembered)")
    else:
        advice = "; no mode of jaxprove fits it on this device"
    raise MemoryError(
        f"circuit {name} ({rows} rows, {num_vars} variables) needs at least "
        f"{memory.gib(need)} of device memory in {mode} mode (the proving key, the PCE "
        f"matrices and the vectors of its 2^{domain_log(rows)} domain), more than the "
        f"device's {memory.gib(capacity)}{advice} (README, 'Keys, the daemon and batches')")
