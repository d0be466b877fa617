"""posenc.sharding: the contiguous and zigzag context-parallel splits, and that shards encode exactly."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import sharding


def test_the_documented_splits():
    # Zigzag, R = 4, L = 16 (chunks of 2): rank r holds chunks r and 7 - r, as in ring-flash-attention's
    # zigzag_ring_flash_attn and Megatron-LM's get_batch_on_this_cp_rank.
    zigzag = [sharding.shard_indices(16, world_size=4, rank=r, scheme="zigzag").tolist() for r in range(4)]
    assert zigzag == [[0, 1, 14, 15], [2, 3, 12, 13], [4, 5, 10, 11], [6, 7, 8, 9]]
    contiguous = [sharding.shard_indices(16, world_size=4, rank=r).tolist() for r in range(4)]
    assert contiguous == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert sharding.permutation(16, world_size=4, scheme="zigzag").tolist() == [
        i for part in zigzag for i in part
    ]
    assert sharding.shard_indices(0, world_size=3, rank=2).shape == (0,)
    assert sharding.shard_indices(5, world_size=1, rank=0).tolist() == [0, 1, 2, 3, 4]


def test_zigzag_balances_causal_attention_work():
    # Query i attends to i + 1 keys: every zigzag rank gets the same total, contiguous ranks do not.
    def work(scheme):
        return [
            int((sharding.shard_indices(64, world_size=4, rank=r, scheme=scheme) + 1).sum()) for r in range(4)
        ]

    assert len(set(work("zigzag"))) == 1
    assert len(set(work("contiguous"))) == 4


@given(
    world_size=st.integers(1, 8),
    chunk=st.integers(0, 6),
    scheme=st.sampled_from(sharding.SCHEMES),
    start=st.integers(0, 2**31 - 200),
)
def test_shards_partition_the_sequence_and_invert(world_size, chunk, scheme, start):
    length = 2 * world_size * chunk
    shards = [
        sharding.shard_indices(length, world_size=world_size, rank=r, scheme=scheme)
        for r in range(world_size)
    ]
    assert all(s.dtype == np.int64 and s.shape == (length // world_size,) for s in shards)
    assert sorted(np.concatenate(shards).tolist()) == list(range(length))  # each token on exactly one rank
    tokens = np.arange(3 * length).reshape(3, length) * 10
    parts = [
        sharding.shard(tokens, axis=1, world_size=world_size, rank=r, scheme=scheme)
        for r in range(world_size)
    ]
    np.testing.assert_array_equal(sharding.unshard(parts, axis=-1, scheme=scheme), tokens)
    for r, s in enumerate(shards):
        positions = sharding.shard_positions(
            length, world_size=world_size, rank=r, scheme=scheme, start=start
        )
        np.testing.assert_array_equal(positions, s + start)


@pytest.mark.parametrize("scheme", sharding.SCHEMES)
def test_each_rank_encodes_exactly_its_rows(scheme):
    # The encoding of a shard's positions is bit-identical to those rows of the full table, and the
    # reassembled shards are the full table.
    length, world_size, start = 64, 4, 1_000_000
    full = posenc.table(length, 96, start=start, shift=1)
    parts = []
    for rank in range(world_size):
        positions = sharding.shard_positions(
            length, world_size=world_size, rank=rank, scheme=scheme, start=start
        )
        parts.append(posenc.encode(positions, 96, shift=1))
        np.testing.assert_array_equal(
            parts[-1], sharding.shard(full, axis=0, world_size=world_size, rank=rank, scheme=scheme)
        )
    np.testing.assert_array_equal(sharding.unshard(parts, axis=0, scheme=scheme), full)


def test_positions_from_a_padding_mask_are_computed_globally_then_sharded():
    mask = np.ones((2, 16), dtype=bool)
    mask[1, :5] = False
    positions = posenc.positions.from_attention_mask(mask)
    local = sharding.shard(positions, axis=1, world_size=4, rank=3, scheme="zigzag")
    np.testing.assert_array_equal(local, positions[:, [6, 7, 8, 9]])
    assert local[1].tolist() == [1, 2, 3, 4]  # not restarted at 0: the mask was read whole


@pytest.mark.parametrize(
    ("length", "world_size", "rank", "scheme", "error", "message"),
    [
        (10, 4, 0, "contiguous", ValueError, r"length=10 is not a multiple of world_size = 4.*pad.* 12"),
        (12, 4, 0, "zigzag", ValueError, r"2 \* world_size = 8.*pad the sequence to 16"),
        (8, 2, 2, "contiguous", ValueError, r"rank must be in 0 .. world_size - 1 = 1; got rank=2"),
        (8, 0, 0, "contiguous", ValueError, "world_size must be an integer >= 1"),
        (8.0, 2, 0, "contiguous", TypeError, r"length must be an integer.*pass 8"),
        (8, 2, 0, "ring", ValueError, r"scheme must be one of 'contiguous', 'zigzag'; got 'ring'"),
    ],
)
def test_shard_indices_refuses_bad_arguments(length, world_size, rank, scheme, error, message):
    with pytest.raises(error, match=message):
        sharding.shard_indices(length, world_size=world_size, rank=rank, scheme=scheme)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: sharding.shard_positions(8, world_size=2, rank=0, start=2**31 - 4),
            ValueError,
            r"start \+ length - 1 = 2147483651",
        ),
        (
            lambda: sharding.shard(np.zeros((2, 8)), axis=2, world_size=2, rank=0),
            ValueError,
            r"axis=2 is out of range",
        ),
        (lambda: sharding.unshard(np.zeros((2, 4)), axis=0), TypeError, "one per rank"),
        (lambda: sharding.unshard([np.zeros(4), np.zeros(3)], axis=0), ValueError, "same shape"),
    ],
)
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_importing_sharding_imports_no_framework():
    code = (
        "import sys, posenc.sharding; print(sorted(m for m in ('torch', 'jax', 'flax') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sharding.permutation(0, world_size=10**12), r"world_size must be <= 2\*\*31"),
        (lambda: sharding.shard_indices(2**40, world_size=1, rank=0), r"length must be <= 2\*\*31"),
        (lambda: sharding.shard_positions(2**40, world_size=2, rank=0), r"length must be <= 2\*\*31"),
        (lambda: sharding.shard_positions(8, world_size=2, rank=0, start=2**31), r"start must satisfy"),
    ],
)
def test_huge_sizes_are_refused_before_any_work(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_permutation_needs_no_loop_over_the_ranks():
    assert sharding.permutation(0, world_size=2**31, scheme="zigzag").shape == (0,)
    for length, world_size in [(24, 3), (16, 4), (8, 1)]:
        for scheme in sharding.SCHEMES:
            parts = [
                sharding.shard_indices(length, world_size=world_size, rank=r, scheme=scheme)
                for r in range(world_size)
            ]
            order = sharding.permutation(length, world_size=world_size, scheme=scheme)
            assert order.dtype == np.int64 and order.tolist() == np.concatenate(parts).tolist()
