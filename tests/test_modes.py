"""jaxprove.modes: the memory modes' floors, peaks, budgets and the
automatic choice, by hand for the 32GiB PoRep partition's counts (no device:
the capacities are numbers)."""
import pytest

from jaxprove import modes as MD

GiB = 1 << 30
N, AUX, ROWS, MAT = 130_170_221, 130_169_893, 130_278_541, 8 << 30
C = (N, AUX, ROWS, MAT)
M = 1 << 27                      # the domain of 130,278,541 rows


def test_peak_bytes_by_hand():
    key = 96 * (2 * N + AUX + M - 1) + 192 * N
    assert MD.key_bytes(N, AUX, ROWS) == key
    # in core the NTTs' six vectors are the largest stage (the SpMV's default
    # 32·(n + 4·rows) is 20.8 GB, the MSMs' h + the gathered scalars + 256 MiB 8.8 GB)
    streaming = MAT + 32 * M + 32 * N + 32 * 6 * M
    assert MD.peak_bytes(*C, "streaming") == streaming
    assert MD.peak_bytes(*C, "resident") == key + streaming
    # a large MSM budget makes the MSMs' stage the largest: h, the gathered scalars (at
    # most one vector) and the budget
    assert MD.peak_bytes(*C, "streaming", msm_budget=30 * GiB) == \
        MAT + 32 * M + 32 * N + 32 * M + 32 * N + 30 * GiB
    # a given SpMV estimate counts where it is the largest
    assert MD.peak_bytes(*C, "streaming", spmv_bytes=40 * GiB) == MAT + 32 * M + 32 * N + 40 * GiB
    # out of core: w + the larger of the budget and the gathered scalars + the MSMs'
    # (default: the same)
    assert MD.peak_bytes(*C, "out-of-core", msm_budget=5 * GiB, out_of_core=9 * GiB) == \
        32 * N + max(9 * GiB, 32 * N + 5 * GiB)
    assert MD.peak_bytes(*C, "out-of-core", out_of_core=9 * GiB) == 64 * N + 9 * GiB
    # a host witness: the budget holds all of h's bytes; then h + H's MSM, w + w ‖ r + the rest
    hw = dict(out_of_core=13 * GiB, host_witness=True)
    # (fc32.sh's HOST_W=1: 13 GiB, MSMs within 5 GiB; w + w ‖ r + 5 GiB = 12.76 GiB)
    assert MD.peak_bytes(*C, "out-of-core", msm_budget=5 * GiB, **hw) == 13 * GiB
    assert MD.peak_bytes(*C, "out-of-core", msm_budget=6 * GiB, **hw) == 64 * N + 6 * GiB
    assert MD.peak_bytes(*C[:2], 1 << 30, MAT, "out-of-core", msm_budget=6 * GiB, **hw) == \
        32 * (1 << 30) + 6 * GiB             # h of a 2^30 domain beside H's MSM
    assert [MD.resident_bytes(*C, x) for x in MD.MODES] == \
        [key + MAT + 32 * M, MAT + 32 * M, 0]
    with pytest.raises(ValueError, match="needs its budget"):
        MD.peak_bytes(*C, "out-of-core")
    with pytest.raises(ValueError, match="mode must be one of"):
        MD.peak_bytes(*C, "auto")


def test_choose_takes_the_fastest_mode_that_fits():
    resident = MD.peak_bytes(*C, "resident")
    assert MD.choose(*C, None) == MD.ModePlan("resident", None, None, resident)   # the CPU
    assert MD.choose(*C, resident + MD.MARGIN) == MD.ModePlan("resident", None, None, resident)
    # a byte less: streaming, its MSMs within what the rest leaves (suggested_budgets)
    cap = resident + MD.MARGIN - 1
    p = MD.choose(*C, cap)
    assert p.mode == "streaming" and p.out_of_core_bytes is None
    assert p.msm_budget_bytes == MD.suggested_budgets(N, ROWS, MAT, "streaming", cap)[
        "msm_budget_bytes"] == cap - MAT - 64 * M - 64 * N - MD.MARGIN
    assert p.peak_bytes + MD.MARGIN <= cap
    # JAX's default pool on an H200 (75% of 141 GB) holds no resident 32GiB partition
    assert MD.choose(*C, 105_000_000_000).mode == "streaming"
    # a 16 GB card's pool: the 16 GB mode with fc32.sh's kind of budgets
    p = MD.choose(*C, 15 * GiB)
    assert p.mode == "out-of-core" and p.peak_bytes + MD.MARGIN <= 15 * GiB
    assert {"out_of_core_bytes": p.out_of_core_bytes, "msm_budget_bytes": p.msm_budget_bytes} \
        == MD.suggested_budgets(N, ROWS, MAT, "out-of-core", 15 * GiB)
    # with the witness in host memory the budget before the MSMs is the pool less the margin
    # (fc32.sh HOST_W=1's 13 GiB of a 14 GiB pool); the MSMs' budget is the same
    hw = MD.suggested_budgets(N, ROWS, MAT, "out-of-core", 14 * GiB, host_witness=True)
    assert hw == {"out_of_core_bytes": 13 * GiB,
                  "msm_budget_bytes": MD.suggested_budgets(N, ROWS, MAT, "out-of-core",
                                                           14 * GiB)["msm_budget_bytes"]}
    p = MD.choose(*C, 14 * GiB, host_witness=True)
    assert p.mode == "out-of-core" and p.out_of_core_bytes == 13 * GiB
    assert p.peak_bytes == 13 * GiB                      # the budget: the largest stage
    # the residency budget: what stays between proofs must fit it
    assert MD.choose(*C, 200 * GiB).mode == "resident"
    assert MD.choose(*C, 200 * GiB, resident_budget=20 * GiB).mode == "streaming"
    assert MD.choose(*C, 200 * GiB, resident_budget=GiB).mode == "out-of-core"
    with pytest.raises(MemoryError, match=r"porep \(130278541 rows, 130170221 variables\) fits "
                                          r"no memory mode on a device of 8\.0 GiB: resident ~"
                                          r".*streaming ~.*out-of-core ~"):
        MD.choose(*C, 8 * GiB, name="porep")


def test_plan_of_a_named_mode():
    """A named mode's budgets: given, else suggested from the device, none
    where its memory is unknown (the out-of-core mode then needs its own)."""
    assert MD.plan(*C, "out-of-core", 15 * GiB, out_of_core=4 * GiB)[:3] == \
        ("out-of-core", None, 4 * GiB)
    assert MD.plan(*C, "streaming", None) == \
        MD.ModePlan("streaming", None, None, MD.peak_bytes(*C, "streaming"))
    assert MD.plan(*C, "streaming", 40 * GiB).msm_budget_bytes == \
        MD.suggested_budgets(N, ROWS, MAT, "streaming", 40 * GiB)["msm_budget_bytes"]
    with pytest.raises(ValueError, match="needs a budget, out_of_core_bytes"):
        MD.plan(*C, "out-of-core", None)


def test_b_density_shrinks_the_key():
    """A key held split keeps B1 and B2 only for the variables in B: with the
    32GiB partition's B count (research/filecoin-circuits.md: 1 + 33,112,281)
    the key comes to bellperson's parameter file's ~47.37 GB, and JAX's
    default pool on an H200 then holds the resident mode."""
    b = 1 + 33_112_281
    assert MD.key_bytes(N, AUX, ROWS) - MD.key_bytes(N, AUX, ROWS, b) == (96 + 192) * (N - b)
    assert abs(MD.key_bytes(N, AUX, ROWS, b) - 47.37e9) < 0.1e9
    assert MD.peak_bytes(*C, "resident", b_vars=b) == \
        MD.peak_bytes(*C, "resident") - (96 + 192) * (N - b)
    assert MD.choose(*C, 105_000_000_000, b_vars=b).mode == "resident"
    assert MD.device_bytes_floor(*C, "resident", b_vars=b) < MD.device_bytes_floor(*C, "resident")


def test_resident_split_by_hand():
    """A resident key is held split exactly where the merged MSM passes, the
    whole key and what else stays do not fit the device; never where the
    device's size is unknown."""
    key = MD.key_bytes(N, AUX, ROWS)
    held, merged = 7 * GiB, 30 * GiB
    cap = key + held + merged
    assert not MD.resident_split(N, AUX, ROWS, held, merged, cap)
    assert MD.resident_split(N, AUX, ROWS, held, merged, cap - 1)
    assert MD.resident_split(N, AUX, ROWS, held + 1, merged, cap)
    assert not MD.resident_split(N, AUX, ROWS, held, merged, None)
