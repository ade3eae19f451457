"""SHA-256 gadget (circuits.gadgets.sha256) against hashlib and the
constraint counts of bellperson / rust-fil-proofs
(research/filecoin-circuits.md §2.1: [T] asserted by a Rust test, [D] derived
by the note's bit-exact counter).

Compile discipline: the witness circuits are compiled once each (batch of B
random messages); the counts need the record interpretation only (numpy)."""
from __future__ import annotations

import hashlib

import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets import multipack as M
from circuits.gadgets import sha256 as S
from circuits.gadgets import uint32 as U
from ops.field import Fr

B = 3


# ---------------------------------------------------------------- constraint counts
def free_block(cs, _):
    S.block_no_padding(cs, Bo.alloc_bits(cs, (512,)))


def free_preimage(cs, _, nbits):
    S.sha256(cs, Bo.alloc_bits(cs, (nbits,)))


def variable_iv(cs, _):
    S.compression(cs, Bo.alloc_bits(cs, (512,)), U.alloc_words(cs, (8,)))


def hash2_shape(cs, _):
    """filecoin's hash2 preimage: two 255-bit LE values, each padded with one
    constant zero bit to 256 and bit-reversed per byte."""
    x = Bo.alloc_bits(cs, (2, 255))
    le = Bo.concat([x, Bo.constant(cs, np.zeros((2, 1), bool))], -1)
    S.sha256(cs, le.reshape(2, 32, 8).flip(-1).reshape(512))


def constant_block(cs, _):
    bits = np.zeros(512, bool)
    bits[0] = True
    S.compression(cs, Bo.constant(cs, bits), S.iv(cs))


@pytest.mark.parametrize("circuit, args, inputs, want", [
    (free_block, (), 512, 25_840),             # [T] bellperson test_full_block
    (free_preimage, (512,), 512, 44_874),      # [T] bellperson test_full_hash
    (variable_iv, (), 512 + 256, 26_192),      # [D] chained compression
    (hash2_shape, (), 510, 44_866),            # [D] hash2's SHA part
    (constant_block, (), 0, 0),                # [T] bellperson test_blank_hash
])
def test_constraint_counts(circuit, args, inputs, want):
    r1cs = C.record(circuit, *args)
    assert r1cs.num_constraints - inputs == want
    assert r1cs.num_inputs == 1


def test_counts_scale_with_the_batch():
    """k independent compressions in one call: k times the rows, one MultiEq
    each (same packing), and the allocation count per instance."""
    def batch(cs, _, k):
        S.block_no_padding(cs, Bo.alloc_bits(cs, (k, 512)))
    one = C.record(batch, 1)
    three = C.record(batch, 3)
    assert one.num_constraints == 512 + 25_840
    assert three.num_constraints == 3 * one.num_constraints
    assert three.num_aux == 3 * one.num_aux
    assert three.bit_vars.sum() == 3 * one.bit_vars.sum()


# ---------------------------------------------------------------- values
LENGTHS = (0, 3, 55, 64)        # bytes: empty (all constant), one block, padding block


def messages_circuit(cs, bits, lengths):
    """SHA-256 of consecutive slices of one allocated message, and of its first
    64 bytes as a batch of two 32-byte messages in one gadget call."""
    x = Bo.alloc_bits(cs, (8 * sum(lengths),), lambda: bits)
    out, off = [], 0
    for n in lengths:
        out.append(S.sha256(cs, x[8 * off:8 * (off + n)]).value)
        off += n
    pair = S.sha256(cs, x[:512].reshape(2, 256))
    return out + [pair.value]


def check_digests(lengths, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (B, sum(lengths)), dtype=np.uint8)
    r1cs = C.record(messages_circuit, lengths)
    w, outs = C.witness_with_outputs(messages_circuit, M.bytes_to_bits(jnp.asarray(data)), lengths)
    w = np.asarray(w)
    assert w.shape == (8, B, r1cs.num_vars)
    digest = lambda bits: np.packbits(np.asarray(bits).astype(np.uint8)).tobytes()
    for i in range(B):
        off = 0
        for n, o in zip(lengths, outs):
            assert digest(o[i]) == hashlib.sha256(data[i, off:off + n].tobytes()).digest(), (i, n)
            off += n
        for j in range(2):
            want = hashlib.sha256(data[i, 32 * j:32 * (j + 1)].tobytes()).digest()
            assert digest(outs[-1][i, j]) == want
    return r1cs, w


def test_digests_match_hashlib():
    r1cs, w = check_digests(LENGTHS, 1)
    ok, row = C.is_satisfied(r1cs, w[:, 0])
    assert ok and row is None
    vals = np.asarray(Fr.to_int(w[:, 1]), dtype=object)
    assert np.all((vals[r1cs.bit_vars] == 0) | (vals[r1cs.bit_vars] == 1))
    # a flipped result bit breaks a row that contains it
    col = r1cs.num_vars - 40
    vals[col] ^= 1
    ok, row = C.is_satisfied(r1cs, vals)
    assert not ok
    cols = lambda m: set(m.cols[m.indptr[row]:m.indptr[row + 1]])
    assert col in cols(r1cs.a) | cols(r1cs.b) | cols(r1cs.c)


def test_multi_block_digest():
    """256 bytes: four blocks of message data chained through the state (the
    last two run as one scanned step in witness mode), then the padding."""
    check_digests((256,), 2)


@pytest.mark.slow
def test_digests_many_lengths():
    check_digests((1, 31, 32, 56, 63, 65, 127, 128, 200), 3)


def test_blank_hash_is_constant():
    """The empty message is all constants: no variables, and the digest
    (e3b0c442...) is a static constant in both interpretations."""
    def circ(cs, _):
        return S.sha256(cs, Bo.constant(cs, np.zeros(0, bool)))
    cs = C.Recorder()
    out = circ(cs, None)
    assert cs.num_constraints == 0 and cs.num_aux == 0 and out.is_constant.all()
    bits = out.constant_value()
    assert np.packbits(bits.astype(np.uint8)).tobytes() == hashlib.sha256(b"").digest()


def test_bad_input_length():
    with pytest.raises(ValueError, match="whole number of bytes"):
        C.record(free_preimage, 7)
    with pytest.raises(ValueError, match="512"):
        S.compression(C.Recorder(), Bo.constant(C.Recorder(), np.zeros(500, bool)),
                      S.iv(C.Recorder()))
