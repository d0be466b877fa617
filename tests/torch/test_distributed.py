"""Context parallelism with torch.distributed: several gloo processes on the CPU, each encoding its shard.

One test launches WORLD_SIZE processes (``torch.multiprocessing``, spawn), joined by a TCP store on
127.0.0.1 that this process opens on a free port. Every rank takes its shard of a batch (contiguous and
zigzag splits, plain and left-padded sequences, float32 and bfloat16), applies
``posenc.torch.SinusoidalPositionalEncoding`` with its shard's global positions, and gathers; then every
rank runs KV-cache decoding steps with ``offset``. Rank 0 saves what it gathered; this process compares it
with the single-process result, bit for bit (``torch.equal``). The whole run is bounded by a deadline.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import posenc.torch as pt
from posenc import sharding
from posenc.torch import sharding as ts

WORLD_SIZE = 4
BATCH, LENGTH, D_MODEL, STEPS = 2, 48, 32, 5  # LENGTH divisible by 2 * WORLD_SIZE (zigzag)
DEADLINE_S = 120
OPTIONS = {"shift": 1, "layout": "sin_cos"}


def _inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    mask = torch.ones(BATCH, LENGTH, dtype=torch.int64)
    mask[1, :7] = 0  # the second sequence is left-padded
    return {
        "x": torch.randn(BATCH, LENGTH, D_MODEL, generator=generator),
        "steps": torch.randn(BATCH, STEPS, D_MODEL, generator=generator),
        "mask": mask,
    }


def _compute(
    inputs: dict[str, torch.Tensor], *, world_size: int, rank: int | None
) -> dict[str, torch.Tensor]:
    """Every result, sharded over the process group (rank given) or in one process (rank None)."""
    module = pt.SinusoidalPositionalEncoding(D_MODEL, **OPTIONS, batch_first=True).eval()
    x, steps = inputs["x"], inputs["steps"]
    padded = pt.from_attention_mask(inputs["mask"])  # computed on the whole sequence, then sharded
    lengths = inputs["mask"].sum(dim=1)  # real tokens per sequence: the decoding offset of each
    results = {}
    for scheme in sharding.SCHEMES:
        for dtype in (torch.float32, torch.bfloat16):
            name = f"{scheme}-{str(dtype).removeprefix('torch.')}"
            xd = x.to(dtype)
            if rank is None:
                results[name] = module(xd)
                results[name + "-padded"] = module(xd, padded)
                continue
            local = ts.shard(xd, dim=1, scheme=scheme)
            positions = ts.shard_positions(LENGTH, scheme=scheme)
            assert positions.shape == (LENGTH // world_size,)
            results[name] = ts.gather(module(local, positions), dim=1, scheme=scheme)
            local_padded = ts.shard(padded, dim=1, scheme=scheme)
            results[name + "-padded"] = ts.gather(module(local, local_padded), dim=1, scheme=scheme)
    # KV-cache decoding after the prefill: step t has position LENGTH + t (or lengths + t) on every rank.
    if rank is None:
        full = module(torch.cat([x, steps], dim=1))
        results["decode"] = full[:, LENGTH:]
        results["decode-lengths"] = torch.cat(
            [module(steps[:, t : t + 1], offset=lengths + t) for t in range(STEPS)], dim=1
        )
    else:
        decoded = torch.cat([module(steps[:, t : t + 1], offset=LENGTH + t) for t in range(STEPS)], dim=1)
        per_length = torch.cat([module(steps[:, t : t + 1], offset=lengths + t) for t in range(STEPS)], dim=1)
        for key, value in (("decode", decoded), ("decode-lengths", per_length)):
            everyone = [torch.empty_like(value) for _ in range(world_size)]
            dist.all_gather(everyone, value)
            assert all(torch.equal(other, value) for other in everyone), f"{key}: ranks disagree"
            results[key] = value
    return results


def _loopback() -> str:
    """The loopback interface's name: ``lo`` on Linux, ``lo0`` on macOS."""
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    return names[0] if names else "lo"


def _worker(rank: int, world_size: int, port: int, inputs_path: str, results_path: str) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = _loopback()  # gloo talks over the loopback interface only
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=60)
    store = dist.TCPStore("127.0.0.1", port, world_size=world_size, is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)
    assert (dist.get_rank(), dist.get_world_size()) == (rank, world_size)
    results = _compute(torch.load(inputs_path), world_size=world_size, rank=rank)
    if rank == 0:
        torch.save(results, results_path)
    dist.barrier()
    # Every collective is done on every rank once each has said so in the store. Then leave at once,
    # without tearing gloo down: on a loaded 2-core CI machine gloo's teardown once aborted a rank
    # ("terminate called without an active exception", SIGABRT) after all the work had succeeded.
    # A failure above raises instead, and torch.multiprocessing hands its traceback to the test.
    store.set(f"finished-{rank}", "1")
    store.wait([f"finished-{other}" for other in range(world_size)])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_context_parallel_shards_equal_the_single_process_result(tmp_path):
    inputs = _inputs()
    torch.save(inputs, tmp_path / "inputs.pt")
    store = dist.TCPStore("127.0.0.1", 0, world_size=WORLD_SIZE + 1, is_master=True, wait_for_workers=False)
    context = mp.start_processes(
        _worker,
        args=(WORLD_SIZE, store.port, str(tmp_path / "inputs.pt"), str(tmp_path / "results.pt")),
        nprocs=WORLD_SIZE,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not context.join(timeout=1):  # re-raises a worker's exception with its traceback
            if time.monotonic() > deadline:
                pytest.fail(f"the {WORLD_SIZE} gloo processes did not finish within {DEADLINE_S} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join(5)
    gathered = torch.load(tmp_path / "results.pt")
    expected = _compute(inputs, world_size=1, rank=None)
    assert sorted(gathered) == sorted(expected)
    for key, want in expected.items():
        got = gathered[key]
        assert got.dtype == want.dtype and got.shape == want.shape, key
        assert torch.equal(got, want), key
    # The decoding steps continue the full pass: step t is row LENGTH + t of the unsharded sequence.
    module = pt.SinusoidalPositionalEncoding(D_MODEL, **OPTIONS, batch_first=True)
    assert torch.equal(module(inputs["steps"], offset=LENGTH), gathered["decode"])


def test_torch_helpers_without_a_process_group():
    x = torch.arange(16).reshape(1, 8, 2)
    shards = [ts.shard(x, dim=1, scheme="zigzag", rank=r, world_size=2) for r in range(2)]
    assert torch.equal(shards[0][0, :, 0], torch.tensor([0, 2, 12, 14]))
    back = sharding.unshard([s.numpy() for s in shards], axis=1, scheme="zigzag")
    assert (back == x.numpy()).all()
    assert torch.equal(ts.shard_positions(8, rank=1, world_size=2, start=10), torch.tensor([14, 15, 16, 17]))
    assert torch.equal(ts.shard_indices(8, scheme="zigzag", rank=0, world_size=2), torch.tensor([0, 1, 6, 7]))
    if not dist.is_initialized():
        with pytest.raises(RuntimeError, match="init_process_group"):
            ts.shard_positions(8)
        with pytest.raises(RuntimeError, match="init_process_group"):
            ts.gather(x, dim=1)
    with pytest.raises(ValueError, match="together"):
        ts.shard_positions(8, rank=0)
    with pytest.raises(ValueError, match=r"dim=3 is out of range"):
        ts.shard(x, dim=3, rank=0, world_size=2)
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        ts.shard([1, 2], dim=0, rank=0, world_size=2)
