"""Context parallelism with JAX: a sequence sharded over a mesh of 4 CPU devices equals the unsharded result.

JAX fixes its device count when it starts, and the pytest process may have started it with one device, so
the checks run in a subprocess: this file run as a script, with
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` set before jax is imported, with ``jax_enable_x64``
off (JAX's default; x64 changes the positions' and offsets' dtypes, not how a program is sharded: the
suite's x64 run, ``test_jax.py::test_the_suite_passes_with_x64_enabled``, covers those dtypes). Each check
compares bit patterns with the unsharded module, and checks that no program holds a host callback:

* contiguous split, positions ``None``: under ``jit`` the encoding is a constant that XLA slices per device.
* zigzag split: the sequence is put in ``posenc.sharding.permutation`` order, so an even split over the
  ``seq`` axis gives every device its zigzag shard, and the positions are that permutation, sharded the
  same way. The portable algorithm is elementwise, so under plain ``jit`` and inside ``jax.shard_map``
  every device encodes its own shard's positions.
* KV-cache decoding: ``offset=LENGTH + t`` as a traced array, one program for every step.
"""

from __future__ import annotations

import os
import subprocess
import sys

DEVICES = 4
BATCH, LENGTH, D_MODEL = 2, 64, 32


def test_sharded_sequence_over_a_four_device_mesh_equals_unsharded():
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={DEVICES}".strip()
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_ENABLE_X64": "0"}
    result = subprocess.run([sys.executable, __file__], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert result.stdout.strip().endswith("mesh checks passed"), result.stdout[-2000:]


def main() -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import posenc
    import posenc.jax as pj
    from posenc import sharding

    assert jax.device_count() == DEVICES, jax.devices()
    assert jax.config.jax_enable_x64 == (os.environ["JAX_ENABLE_X64"] == "1")
    mesh = Mesh(np.array(jax.devices()), ("seq",))
    x_spec = NamedSharding(mesh, P(None, "seq", None))  # (batch, seq, d_model): the sequence is sharded
    p_spec = NamedSharding(mesh, P(None, "seq"))  # (batch, seq) positions, sharded the same way

    def bits(array):
        array = np.asarray(array)
        return array.view(np.uint16 if array.dtype.itemsize == 2 else np.uint32)

    def check(got, want, what):
        assert np.asarray(got).dtype == np.asarray(want).dtype, what
        assert np.array_equal(bits(got), bits(want)), what

    module = pj.SinusoidalPositionalEncoding(D_MODEL, shift=1, layout="sin_cos")
    traces: list = []  # one entry per trace of the decoding step
    for dtype in (jnp.bfloat16,):  # each traced program compiles the portable algorithm (~10 s)
        x = jax.random.normal(jax.random.key(0), (BATCH, LENGTH, D_MODEL), jnp.float32).astype(dtype)
        unsharded = np.asarray(module(x))
        name = np.dtype(dtype).name
        table = posenc.table(LENGTH, D_MODEL, shift=1, layout="sin_cos", dtype=name)
        check(unsharded, x + jnp.asarray(table), name)

        # Contiguous split, default positions: a constant, sliced per device by XLA.
        run = jax.jit(lambda x: module(x), in_shardings=x_spec, out_shardings=x_spec)
        y = run(jax.device_put(x, x_spec))
        assert len(y.sharding.device_set) == DEVICES and y.addressable_shards[0].data.shape == (
            BATCH,
            16,
            D_MODEL,
        )
        check(y, unsharded, f"contiguous {name}")
        assert "callback" not in run.lower(jax.device_put(x, x_spec)).as_text()

        # Zigzag split: the sequence in permutation order; each device holds chunks r and 2R - 1 - r.
        order = sharding.permutation(LENGTH, world_size=DEVICES, scheme="zigzag")
        x_zig = jax.device_put(x[:, order], x_spec)
        positions = jax.device_put(jnp.broadcast_to(jnp.asarray(order, jnp.int32), (BATCH, LENGTH)), p_spec)
        run = jax.jit(lambda x, p: module(x, p), in_shardings=(x_spec, p_spec), out_shardings=x_spec)
        y = run(x_zig, positions).block_until_ready()
        for device_shard in y.addressable_shards:  # device r holds exactly rank r's rows
            rank = mesh.devices.tolist().index(device_shard.device)
            rows = sharding.shard_indices(LENGTH, world_size=DEVICES, rank=rank, scheme="zigzag")
            check(device_shard.data, unsharded[:, rows], f"zigzag {name}, device {rank}")
        check(np.asarray(y)[:, np.argsort(order)], unsharded, f"zigzag {name}")
        assert "callback" not in run.lower(x_zig, positions).as_text()

        # The same inside shard_map: every device encodes its own shard's positions.
        local = jax.shard_map(
            lambda x, p: module(x, p), mesh=mesh, in_specs=(x_spec.spec, p_spec.spec), out_specs=x_spec.spec
        )
        y = jax.jit(local)(x_zig, positions).block_until_ready()
        check(np.asarray(y)[:, np.argsort(order)], unsharded, f"shard_map zigzag {name}")

        # KV-cache decoding after the sharded prefill: step t has position LENGTH + t; one program.
        steps = jax.random.normal(jax.random.key(1), (BATCH, 3, D_MODEL), jnp.float32).astype(dtype)
        full = np.asarray(module(jnp.concatenate([x, steps], axis=1)))
        traces.clear()

        @jax.jit
        def step(x, t):
            traces.append(t)
            return module(x, offset=t)

        for t in range(3):
            want = full[:, LENGTH + t : LENGTH + t + 1]
            check(step(steps[:, t : t + 1], jnp.asarray(LENGTH + t)), want, f"decode {name}")
        assert len(traces) == 1

    print("mesh checks passed")


if __name__ == "__main__":
    main()
