"""The cases of benchmarks/device_native.py (see its docstring): the sizes they run at, the timing (posenc
and its reference in alternating rounds), the inputs they share, the timed cases 1 to 5, and the checks of
cases 6 (CUDA only: host syncs, CUDA graphs, ``torch.compile``) and 7 (JAX)."""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from _common import target
from device_table import tutorial_table_on
from torch import nn

import posenc.rope as rope
import posenc.torch as pt

#: (case, posenc us, reference us, ratio, bar, verdict) as printed.
Row = tuple[str, float | None, float | None, float | None, str | None, str]


@dataclass
class Sizes:
    """What the cases run on: the full sizes on CUDA, smaller ones on the CPU, tiny ones with --quick."""

    d_model: int = 1024
    batch: int = 8
    seq: int = 2048
    offset: int = 3000
    gather_rows: int = 8192
    channels: int = 320
    table: tuple[int, int] = (131072, 1024)
    lm_d: int = 1024
    lm_layers: int = 4
    lm_heads: int = 16
    lm_vocab: int = 32000
    lm_batch: int = 8
    lm_seq: int = 2048
    calls: int = 50  # calls per round, small cases
    table_calls: int = 3
    positions_calls: int = 10
    lm_calls: int = 3


def sizes_for(device: torch.device, quick: bool, table: str | None) -> Sizes:
    if quick:
        sizes = Sizes(
            d_model=64, seq=64, gather_rows=4096, table=(2048, 256), lm_d=64, lm_layers=1,
            lm_vocab=1000, lm_batch=2, lm_seq=32, calls=5, table_calls=1, positions_calls=2, lm_calls=1,
        )  # fmt: skip
    elif device.type == "cuda":
        sizes = Sizes()
    else:
        sizes = Sizes(
            table=(16384, 1024), lm_d=256, lm_layers=2, lm_batch=2, lm_seq=256,
            calls=50, table_calls=2, positions_calls=2, lm_calls=1,
        )  # fmt: skip
    if table:
        length, d_model = (int(v) for v in table.lower().split("x"))
        sizes.table = (length, d_model)
    return sizes


@dataclass
class Context:
    device: torch.device
    dtype: torch.dtype
    sizes: Sizes
    repeat: int

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)


# --- timing -----------------------------------------------------------------------------------------


def race(
    contenders: dict[str, Callable[[], object]], ctx: Context, calls: int, warm: int = 3
) -> dict[str, dict[str, float]]:
    """Per-call time of each contender: ``warm`` calls, then ``ctx.repeat`` rounds (contenders alternating)
    of ``calls`` calls each with a device sync after the last; median, min and max over the rounds, in us."""
    for fn in contenders.values():
        for _ in range(warm):
            fn()
    ctx.sync()
    per_call: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(ctx.repeat):
        for name, fn in contenders.items():
            ctx.sync()
            began = time.perf_counter()
            for _ in range(calls):
                fn()
            ctx.sync()
            per_call[name].append((time.perf_counter() - began) / calls * 1e6)
    return {
        name: {
            "median_us": statistics.median(times),
            "min_us": min(times),
            "max_us": max(times),
            "calls_per_round": calls,
            "rounds": len(times),
        }
        for name, times in per_call.items()
    }


def compared(
    times: dict[str, dict[str, float]], ours: str, reference: str, bar: str | None, name: str
) -> dict[str, Any]:
    """The two contenders' figures, the ratio ours / reference and, with a bar, whether it is met."""
    ratio = times[ours]["median_us"] / times[reference]["median_us"]
    met = target(name, ratio, bar)[3] if bar else None
    return {"posenc": times[ours], "reference": times[reference], "ratio": ratio, "bar": bar, "met": met}


# --- the inputs the small cases share --------------------------------------------------------------


def decode_inputs(ctx: Context) -> dict[str, Any]:
    s, dev = ctx.sizes, ctx.device
    torch.manual_seed(0)
    return {
        "m": pt.SinusoidalPositionalEncoding(s.d_model, batch_first=True).eval(),
        "x1": torch.randn(s.batch, 1, s.d_model, device=dev, dtype=ctx.dtype),
        "offs": torch.arange(s.batch, device=dev) + s.offset,
        "tbl": pt.table(max(s.gather_rows, s.seq), s.d_model, dtype=ctx.dtype, device=dev),
    }


def timestep_inputs(ctx: Context) -> dict[str, Any]:
    torch.manual_seed(0)
    return {
        "tsm": pt.Timesteps(ctx.sizes.channels, flip_sin_to_cos=True, downscale_freq_shift=0),
        "ts": torch.rand(ctx.sizes.batch, device=ctx.device) * 1000,
    }


def diffusers_frequencies(channels: int, device: torch.device) -> torch.Tensor:
    half = channels // 2
    return torch.exp(-math.log(10000) * torch.arange(half, device=device, dtype=torch.float32) / half)


def diffusers_timesteps(ts: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """diffusers' ``get_timestep_embedding`` with flip_sin_to_cos=True, its frequencies precomputed."""
    angles = ts[:, None] * freqs
    return torch.cat([torch.cos(angles), torch.sin(angles)], -1)


# --- the cases --------------------------------------------------------------------------------------


def case_decode(ctx: Context) -> dict[str, Any]:
    """1. decode step with per-batch offsets against a gather from a device table."""
    i = decode_inputs(ctx)
    m, x1, offs, tbl = i["m"], i["x1"], i["offs"], i["tbl"]
    with torch.no_grad():
        equal = torch.equal(m(x1, offset=offs), x1 + tbl[offs][:, None])
        times = race(
            {"posenc": lambda: m(x1, offset=offs), "gather": lambda: x1 + tbl[offs][:, None]},
            ctx,
            ctx.sizes.calls,
        )
    result = compared(times, "posenc", "gather", "<= 1.5", "decode per-batch offsets")
    return {**result, "equal_to_reference": equal}


def case_decode_int(ctx: Context) -> dict[str, Any]:
    """1b. decode step with an int offset against a slice of a device table (no bar)."""
    i = decode_inputs(ctx)
    m, x1, tbl, o = i["m"], i["x1"], i["tbl"], ctx.sizes.offset
    with torch.no_grad():
        equal = torch.equal(m(x1, offset=o), x1 + tbl[o : o + 1])
        times = race(
            {"posenc": lambda: m(x1, offset=o), "slice": lambda: x1 + tbl[o : o + 1]}, ctx, ctx.sizes.calls
        )
    return {**compared(times, "posenc", "slice", None, "decode int offset"), "equal_to_reference": equal}


def case_timesteps(ctx: Context) -> dict[str, Any]:
    """2. float Timesteps against diffusers-style device code."""
    i = timestep_inputs(ctx)
    tsm, ts = i["tsm"], i["ts"]
    freqs = diffusers_frequencies(ctx.sizes.channels, ctx.device)
    with torch.no_grad():
        difference = float((tsm(ts).double() - diffusers_timesteps(ts, freqs).double()).abs().max())
        times = race(
            {"posenc": lambda: tsm(ts), "diffusers-style": lambda: diffusers_timesteps(ts, freqs)},
            ctx,
            ctx.sizes.calls,
        )
    result = compared(times, "posenc", "diffusers-style", "<= 2", "Timesteps float")
    result = {**result, "max_abs_difference_from_reference": difference}
    real = _diffusers_get_timestep_embedding()
    if real is not None:  # the bar against diffusers itself, where it is installed

        def theirs():
            return real(ts, ctx.sizes.channels, flip_sin_to_cos=True, downscale_freq_shift=0)

        with torch.no_grad():
            versus = race({"posenc": lambda: tsm(ts), "diffusers": theirs}, ctx, ctx.sizes.calls)
            gap = float((tsm(ts).double() - theirs().double()).abs().max())
        result["against_diffusers"] = {
            **compared(versus, "posenc", "diffusers", "<= 2", "Timesteps float vs diffusers"),
            "max_abs_difference_from_diffusers": gap,
        }
    return result


def _diffusers_get_timestep_embedding() -> Callable[..., torch.Tensor] | None:
    """diffusers' own ``get_timestep_embedding``, or None where diffusers is not installed."""
    try:
        from diffusers.models.embeddings import get_timestep_embedding
    except ImportError:
        return None
    return get_timestep_embedding


def case_table(ctx: Context) -> dict[str, Any]:
    """3. a float32 table on the device against the tutorial's formula evaluated there."""
    length, d_model = ctx.sizes.table
    dev = ctx.device
    difference = float(
        (pt.table(length, d_model, device=dev) - tutorial_table_on(length, d_model, dev)).abs().max()
    )
    times = race(
        {
            "posenc": lambda: pt.table(length, d_model, device=dev),
            "tutorial": lambda: tutorial_table_on(length, d_model, dev),
        },
        ctx,
        ctx.sizes.table_calls,
        warm=1,
    )
    result = compared(times, "posenc", "tutorial", "<= 2", "device table")
    return {**result, "size": [length, d_model], "max_abs_difference_from_reference": difference}


def case_positions(ctx: Context) -> dict[str, Any]:
    """4. integer positions (batch, seq) against a gather from a device table (no bar)."""
    s = ctx.sizes
    i = decode_inputs(ctx)
    m, tbl = i["m"], i["tbl"]
    xL = torch.randn(s.batch, s.seq, s.d_model, device=ctx.device, dtype=ctx.dtype)
    pos = torch.arange(s.seq, device=ctx.device).repeat(s.batch, 1)
    with torch.no_grad():
        equal = torch.equal(m(xL, positions=pos), xL + tbl[pos])
        times = race(
            {"posenc": lambda: m(xL, positions=pos), "gather": lambda: xL + tbl[pos]}, ctx, s.positions_calls
        )
    result = compared(times, "posenc", "gather", None, "positions")
    return {**result, "shape": [s.batch, s.seq, s.d_model], "equal_to_reference": equal}


class TableAdd(nn.Module):
    """What users write without posenc: a precomputed table, added."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.shape[1]]


class TinyLM(nn.Module):
    """Embedding, positional encoding, causal encoder layers, layer norm, vocabulary head."""

    def __init__(self, vocab: int, d_model: int, layers: int, heads: int, position: nn.Module) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = position
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True)
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.position(self.embed(ids))
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)
        return self.head(self.norm(h))


def case_lm_step(ctx: Context) -> dict[str, Any]:
    """5. forward + backward + optimizer step, posenc's module against a precomputed-table add."""
    s, dev = ctx.sizes, ctx.device
    torch.manual_seed(0)
    ours = TinyLM(
        s.lm_vocab, s.lm_d, s.lm_layers, s.lm_heads, pt.SinusoidalPositionalEncoding(s.lm_d, batch_first=True)
    )
    reference = copy.deepcopy(ours)
    reference.position = TableAdd(pt.table(s.lm_seq, s.lm_d))
    ours.to(dev).train()
    reference.to(dev).train()
    ids = torch.randint(0, s.lm_vocab, (s.lm_batch, s.lm_seq + 1), device=dev)
    inputs, labels = ids[:, :-1], ids[:, 1:]
    mask = nn.Transformer.generate_square_subsequent_mask(s.lm_seq, device=dev)
    autocast = ctx.dtype != torch.float32

    def stepper(model: nn.Module) -> Callable[[], torch.Tensor]:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step() -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=ctx.dtype, enabled=autocast):
                logits = model(inputs, mask)
                loss = nn.functional.cross_entropy(logits.reshape(-1, s.lm_vocab), labels.reshape(-1))
            loss.backward()
            optimizer.step()
            return loss

        return step

    step_ours, step_reference = stepper(ours), stepper(reference)
    first = [float(step_ours().detach()), float(step_reference().detach())]
    times = race({"posenc": step_ours, "table add": step_reference}, ctx, s.lm_calls, warm=1)
    result = compared(times, "posenc", "table add", "<= 1.02", "LM training step")
    model = {
        "d_model": s.lm_d,
        "layers": s.lm_layers,
        "heads": s.lm_heads,
        "vocab": s.lm_vocab,
        "batch": s.lm_batch,
        "seq": s.lm_seq,
        "autocast": str(ctx.dtype).removeprefix("torch.") if autocast else None,
    }
    return {**result, "model": model, "first_losses": first, "first_losses_equal": first[0] == first[1]}


# --- CUDA only: host syncs, CUDA graphs, torch.compile ----------------------------------------------


def host_sync(fn: Callable[[], object]) -> str:
    """'no host sync', or the first line of the error sync-debug mode "error" raises."""
    with torch.no_grad():
        fn()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn()
            return "no host sync"
        except RuntimeError as error:
            return "HOST SYNC: " + str(error).splitlines()[0][:160]
        finally:
            torch.cuda.set_sync_debug_mode("default")


def check_host_syncs(ctx: Context) -> dict[str, str]:
    d, t = decode_inputs(ctx), timestep_inputs(ctx)
    m, x1, offs, o = d["m"], d["x1"], d["offs"], ctx.sizes.offset
    s = ctx.sizes
    xL = torch.randn(s.batch, s.seq, s.d_model, device=ctx.device, dtype=ctx.dtype)
    pos = torch.arange(s.seq, device=ctx.device).repeat(s.batch, 1)
    lengths = torch.tensor([s.seq // 2, s.seq - s.seq // 2] * s.batch, device=ctx.device)
    cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
    packed = pt.from_cu_seqlens(cu_seqlens, total=s.batch * s.seq)
    xp = torch.randn(1, s.batch * s.seq, s.d_model, device=ctx.device, dtype=ctx.dtype)
    rotary = pt.RotaryEmbedding(rope.config(head_dim=128, base=500000.0)).to(ctx.device)
    q = torch.randn(s.batch, 8, s.seq, 128, device=ctx.device, dtype=ctx.dtype)
    decode_ids = offs[:, None]
    cases = {
        "decode per-batch offsets": lambda: m(x1, offset=offs),
        "decode int offset": lambda: m(x1, offset=o),
        "Timesteps float": lambda: t["tsm"](t["ts"]),
        "positions (batch, seq) int": lambda: m(xL, positions=pos),
        "packed ids from cu_seqlens (eager checks total: a sync)": lambda: m(
            xp, positions=pt.from_cu_seqlens(cu_seqlens, total=s.batch * s.seq)
        ),
        "packed ids given": lambda: m(xp, positions=packed),
        "rotary cos/sin, decode ids": lambda: rotary(q, decode_ids),
        "rotary apply_rotary(position_ids=)": lambda: pt.apply_rotary(
            q, q, position_ids=pos, params=rotary.params
        ),
    }
    results = {}
    for name, fn in cases.items():
        try:
            results[name] = host_sync(fn)
        except Exception as error:  # the first, unchecked call failed
            results[name] = f"FAILED {type(error).__name__}: {str(error)[:160]}"
    return results


def graph_capture(
    ctx: Context, fn: Callable[[], torch.Tensor], change: Callable[[], object]
) -> dict[str, Any]:
    """Capture ``fn`` in a CUDA graph (warmed up on a side stream), replay it; is the replay equal to eager,
    before and after ``change()`` updates the inputs in place? Also the replay's time per call."""
    result: dict[str, Any] = {}
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.no_grad():
            out = fn()
        graph.replay()
        torch.cuda.synchronize()
        result["status"] = "captured and replayed"
        with torch.no_grad():
            result["replay_equals_eager"] = bool(torch.equal(out, fn()))
            change()
            graph.replay()
            torch.cuda.synchronize()
            result["replay_equals_eager_after_inputs_change"] = bool(torch.equal(out, fn()))
        result["replay_us"] = race({"replay": graph.replay}, ctx, ctx.sizes.calls)["replay"]
    except Exception as error:
        result["status"] = f"FAILED {type(error).__name__}: {str(error)[:200]}"
    return result


def check_graphs(ctx: Context) -> dict[str, Any]:
    d, t = decode_inputs(ctx), timestep_inputs(ctx)
    m, x1, offs, o = d["m"], d["x1"], d["offs"], ctx.sizes.offset
    tsm, ts = t["tsm"], t["ts"]

    def change_decode() -> None:
        x1.normal_()
        offs.add_(7)

    return {
        "decode per-batch offsets": graph_capture(ctx, lambda: m(x1, offset=offs), change_decode),
        "Timesteps float": graph_capture(ctx, lambda: tsm(ts), lambda: ts.uniform_(0, 1000)),
        "decode int offset": graph_capture(ctx, lambda: m(x1, offset=o), x1.normal_),
    }


def check_compile(ctx: Context) -> dict[str, Any]:
    """torch.compile(mode="reduce-overhead", fullgraph=True) of the decode step with per-batch offsets."""
    d = decode_inputs(ctx)
    m, x1, offs, tbl = d["m"], d["x1"], d["offs"], d["tbl"]
    result: dict[str, Any] = {}
    try:
        step = torch.compile(lambda x, o: m(x, offset=o), mode="reduce-overhead", fullgraph=True)
        with torch.no_grad():
            began = time.perf_counter()
            for _ in range(3):
                step(x1, offs)
            torch.cuda.synchronize()
            result["first_three_calls_s"] = time.perf_counter() - began
            result["equals_eager"] = bool(torch.equal(step(x1, offs).clone(), m(x1, offset=offs)))
            other = offs + 11
            result["equals_eager_other_offsets"] = bool(
                torch.equal(step(x1, other).clone(), m(x1, offset=other))
            )
            times = race(
                {"compiled": lambda: step(x1, offs), "gather": lambda: x1 + tbl[offs][:, None]},
                ctx,
                ctx.sizes.calls,
            )
        result.update(compared(times, "compiled", "gather", None, "compiled decode"))
        result["status"] = "compiled"
    except Exception as error:
        result["status"] = f"FAILED {type(error).__name__}: {str(error)[:300]}"
    return result


# --- JAX --------------------------------------------------------------------------------------------


def case_jax(ctx: Context) -> dict[str, Any]:
    """7. a jitted decode step with a traced int32 offset against a dynamic slice of a device table: the
    device algorithm, which a CPU-only JAX runs inside ``posenc.jax.self_contained()`` (else it calls the C
    core)."""
    import posenc.jax as pj

    with pj.self_contained():
        return _jax_decode(ctx)


def _jax_decode(ctx: Context) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import posenc.jax as pj

    s = ctx.sizes
    f = jax.jit(lambda o: pj.encode(o + jnp.arange(1), s.d_model))
    g = jax.jit(lambda t, o: jax.lax.dynamic_slice_in_dim(t, o, 1))
    tbl = jax.device_put(pj.table(s.gather_rows, s.d_model))
    offsets = [jax.device_put(np.int32(s.offset + k)) for k in range(s.calls)]
    text = f.lower(offsets[0]).as_text()
    f(offsets[0]).block_until_ready()
    g(tbl, offsets[0]).block_until_ready()
    equal = all(np.array_equal(np.asarray(f(o)), np.asarray(g(tbl, o))) for o in offsets[:3])
    per_call: dict[str, list[float]] = {"posenc": [], "slice": []}
    contenders = {"posenc": lambda o: f(o), "slice": lambda o: g(tbl, o)}
    for _ in range(ctx.repeat):
        for name, fn in contenders.items():
            began = time.perf_counter()
            for o in offsets:
                r = fn(o)
            r.block_until_ready()
            per_call[name].append((time.perf_counter() - began) / len(offsets) * 1e6)
    times = {
        name: {
            "median_us": statistics.median(v),
            "min_us": min(v),
            "max_us": max(v),
            "calls_per_round": len(offsets),
            "rounds": len(v),
        }
        for name, v in per_call.items()
    }
    result = compared(times, "posenc", "slice", None, "jax decode")
    return {
        **result,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "jax_device": str(jax.devices()[0]),
        "equal_to_reference": equal,
        "lowered_has_callback": "callback" in text.lower(),
        "lowered_has_f64": "f64" in text,
    }
