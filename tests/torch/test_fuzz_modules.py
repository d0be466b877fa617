"""The fuzz suite (tests/support/fuzzing.py), the modules: torch's ``SinusoidalPositionalEncoding``,
``TokenAndPositionEmbedding``, ``Timesteps`` and tutorial checkpoints, and the Flax
``SinusoidalPositionalEncoding``."""

from __future__ import annotations

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc
import posenc.jax as pj
import posenc.torch as pt
from posenc import positions
from tests.support.fuzz_cases import (
    BFLOAT16,
    MAX_POSITION,
    exact_positions,
    option_problems,
    right_value_or_clear_error,
    same_bits,
    spot_check,
)
from tests.support.fuzz_torch import (
    TORCH_OUT,
    torch_positions,
    torch_values,
)
from tests.support.fuzzing import (
    INF,
    NAN,
    _finite_in_range,
    fuzz,
    jax_positions,
    reference_options,
)
from tests.support.tutorial import tutorial_table

# The module: x of any shape and dtype, position ids and offsets of any dtype, on the CPU and on meta.

X_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
OFFSETS = [0, 1, 5, 2**31 - 1, 2**31, 2**33, -1, True, 1.5, np.int64(3), np.uint8(2), None, "1"]
OFFSET_NAMES = ["offset", "positions", "position", "2**31"]


def module_expectation(x_shape, d_model, batch_first, p, offset, *, read_values=True):
    """(names of the problems, exact positions + offset shaped like the encoding before orienting), by the
    documented rules: x is (..., seq, d_model) with batch_first, else (seq, batch, d_model); positions
    (seq,) or batch shape + (seq,), integer or real; offset an int >= 0 or an integer array of shape () or
    the batch shape. ``read_values=False`` (a device): values are not checked, invalid ones give NaN rows."""
    if batch_first:
        ok_x = len(x_shape) >= 2 and x_shape[-1] == d_model
        batch_shape, seq = (tuple(x_shape[:-2]), x_shape[-2]) if ok_x else ((), 0)
    else:
        ok_x = len(x_shape) == 3 and x_shape[-1] == d_model
        batch_shape, seq = ((x_shape[1],), x_shape[0]) if ok_x else ((), 0)
    if not ok_x:
        return ["x must", "shape"], None
    if p is None:
        ids = exact_positions(np.arange(seq))
    else:
        if p.dtype.kind not in "iuf" and p.dtype != BFLOAT16:
            return ["positions"], None
        if p.shape not in ((seq,), (*batch_shape, seq)):
            return ["positions", "shape"], None
        if not np.isfinite(p.astype(np.float64)).all():
            return (["positions"] if read_values else None), None
        ids = exact_positions(p)
        if read_values and not _finite_in_range(p.astype(np.float64)):
            return ["positions"], None
    if isinstance(offset, np.ndarray):
        if offset.dtype.kind not in "iu":
            return ["offset"], None
        if batch_shape and offset.shape == batch_shape:
            off = exact_positions(offset)[..., None]
        elif offset.shape == ():
            off = exact_positions(offset)
        else:
            return ["offset", "shape"], None
        if read_values and np.any(offset.astype(np.float64) < 0):
            return ["offset"], None
    else:
        if isinstance(offset, bool | np.bool_) or not isinstance(offset, int | np.integer) or offset < 0:
            return ["offset"], None
        off = Fraction(int(offset))
    total = ids + off
    if (
        not read_values
        and not isinstance(offset, np.ndarray)
        and seq
        and int(offset) + seq - 1 >= MAX_POSITION
    ):
        return None, None  # on a device: a clear error, or rows of NaN (README: invalid positions)
    if read_values and any(abs(v) >= MAX_POSITION for v in total.reshape(-1).tolist()):
        return OFFSET_NAMES, None
    return [], total


def oriented(pe: np.ndarray, batch_first: bool) -> np.ndarray:
    if batch_first:
        return pe
    return pe[:, None] if pe.ndim == 2 else np.swapaxes(pe, 0, 1)


def module_reference(total, d_model: int, options: dict, name: str):
    """posenc.encode of the exact positions, when they are float64 numbers (else None)."""
    flat = total.reshape(-1).tolist()
    if all(isinstance(v, float) or float(v) == v for v in flat):
        wide = np.array([float(v) for v in flat], dtype=np.float64).reshape(total.shape)
        return posenc.encode(wide, d_model, **options, dtype=name)
    return None


def unoriented(pe: np.ndarray, batch_first: bool, shape: tuple) -> np.ndarray:
    """The module's encoding (arranged against x) back in the shape of its positions."""
    if batch_first:
        return np.broadcast_to(pe, (*shape, pe.shape[-1]))
    return pe[:, 0] if len(shape) == 1 else np.swapaxes(pe, 0, 1)


MODULE_OPTIONS = [{}, {"shift": 1, "layout": "sin_cos"}, {"base": 100.0, "scale": 0.5, "odd": "literal"}]
X_SHAPES = [(3, 2), (2, 3), (1, 1), (0, 2), (2, 0), (4,), (2, 3, 4), (), "wrong width", "no width"]


def x_shape_for(choice, d_model: int) -> tuple:
    if choice == "wrong width":
        return (3, 2, d_model + 1)
    if choice == "no width":
        return ()
    return (*choice, d_model)


def draw_offset_values(data, batch_shape: tuple) -> tuple[tuple, list[int]]:
    """An offset array's shape (a scalar, one per batch row or per sequence, or a wrong one) and its values,
    some beyond what int32 holds."""
    o_shape = data.draw(st.sampled_from([(), batch_shape[:1] or (1,), batch_shape or (1,), (3, 3)]))
    o_values = data.draw(
        st.lists(
            st.sampled_from([0, 1, 7, 127, 2**31 - 5, -1, 2**31]),
            min_size=math.prod(o_shape),
            max_size=math.prod(o_shape),
        )
    )
    return o_shape, o_values


@fuzz(150)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_torch_module(data, rng):
    d_model = data.draw(st.integers(2, 9))
    batch_first = data.draw(st.sampled_from([None, True, False]))  # None: the default (False)
    bf = bool(batch_first)
    options = data.draw(st.sampled_from(MODULE_OPTIONS if d_model >= 4 else MODULE_OPTIONS[::2]))
    device = data.draw(st.sampled_from(["cpu", "cpu", "meta"]))
    x_dtype = data.draw(st.sampled_from([*X_DTYPES, torch.int64, torch.complex64]))
    x_shape = x_shape_for(data.draw(st.sampled_from(X_SHAPES)), d_model)
    x = torch.randn(x_shape, generator=torch.Generator().manual_seed(1)).to(x_dtype).to(device)
    seq = (x_shape[-2] if bf else x_shape[0]) if len(x_shape) >= 2 else 1
    batch_shape = tuple(x_shape[:-2]) if bf else x_shape[1:2]
    p_kind = data.draw(st.sampled_from(["none", "none", "seq", "batch", "wrong", "list"]))
    p_arg = p_np = None
    if p_kind != "none":
        shape = {"seq": (seq,), "batch": (*batch_shape, seq), "wrong": (seq + 1,), "list": (seq,)}[p_kind]
        p_tensor, p_np = data.draw(torch_positions(shapes=[shape]))
        if p_np is None:
            p_np = np.zeros(shape, dtype=np.complex64 if p_tensor.is_complex() else np.bool_)
        p_arg = p_tensor.to(device)
        if p_kind == "list" and p_tensor.dtype == torch.int64:
            p_arg = p_tensor.tolist()
    if data.draw(st.booleans()):
        offset = o_np = data.draw(st.sampled_from(OFFSETS))
    else:
        o_dtype = data.draw(
            st.sampled_from(
                [
                    torch.int64,
                    torch.int32,
                    torch.int8,
                    torch.uint8,
                    torch.int16,
                    torch.uint16,
                    torch.float32,
                    torch.bool,
                ]
            )
        )
        o_shape, o_values = draw_offset_values(data, batch_shape)
        if o_dtype == torch.bool:
            o_np = np.array(o_values, dtype=np.int64).reshape(o_shape).astype(bool)
        elif o_dtype.is_floating_point:
            o_np = np.array(o_values, dtype=np.float32).reshape(o_shape)
        else:
            info = torch.iinfo(o_dtype)
            o_np = np.array(
                [min(max(v, int(info.min)), int(info.max)) for v in o_values], dtype=np.int64
            ).reshape(o_shape)
        offset = torch.from_numpy(o_np).to(o_dtype).to(device)
    module = pt.SinusoidalPositionalEncoding(
        d_model, **options, **({} if batch_first is None else {"batch_first": batch_first})
    )
    if x_dtype not in X_DTYPES:
        bad, total = ["x must", "dtype"], None
    else:
        bad, total = module_expectation(x_shape, d_model, bf, p_np, o_np, read_values=device == "cpu")
    name = TORCH_OUT.get(x_dtype)
    names = (
        OFFSET_NAMES if bad is None else bad + (["positions", "offset"] if bad and bad[0] != "x must" else [])
    )

    def check(y):
        assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.device == x.device
        assert tuple(y.shape) == tuple(x.shape), (y.shape, x.shape)
        if device == "meta":
            return
        want = module_reference(total, d_model, options, name)
        if want is None:  # exact positions beyond float64: checked against mpmath
            pe = torch_values(module.encoding_for(x, p_arg, offset=offset))
            got = unoriented(pe, bf, total.shape)
            spot_check(got, total, d_model, options=reference_options(options), fmt=name, rng=rng, samples=3)
            return
        pe = oriented(want, bf)
        pe = (
            torch.from_numpy(pe.view(np.int16)).view(torch.bfloat16)
            if name == "bfloat16"
            else torch.from_numpy(pe)
        )
        assert same_bits(torch_values(y), torch_values(x + pe)), (
            "differs from x + posenc.encode(positions + offset)"
        )

    right_value_or_clear_error(
        lambda: module(x, p_arg, offset=offset),
        valid=None if bad is None else not bad,
        names=names,
        check=check,
    )


@fuzz(60)
@given(
    num_embeddings=st.sampled_from([10, 10, 1, 0, -1, 2.0, True]),
    d_model=st.sampled_from([4, 4, 6, 3, 0, 2**20 + 1]),
    padding_idx=st.sampled_from([None, None, 0, 1, 9, 10, -1, -10, -11, 2**31, True, 1.5, "1", np.int64(1)]),
    embed_scale=st.sampled_from([None, None, 1.0, 0.5, 0, -1.0, NAN, INF, True, "2", 10**400]),
    from_padding=st.sampled_from([False, False, True]),
    seed=st.integers(0, 3),
)
def test_torch_token_and_position_embedding(
    num_embeddings, d_model, padding_idx, embed_scale, from_padding, seed
):
    bad = []
    n_ok = isinstance(num_embeddings, int) and not isinstance(num_embeddings, bool)
    if not n_ok or num_embeddings < 1:
        bad.append("num_embeddings")
    if option_problems(d_model):
        bad.append("d_model")
    if padding_idx is not None:
        if (
            not isinstance(padding_idx, int | np.integer)
            or isinstance(padding_idx, bool)
            or (n_ok and not -num_embeddings <= padding_idx < num_embeddings)
        ):
            bad.append("padding_idx")
    elif from_padding:
        bad.append("padding_idx")
    if embed_scale is not None and (option_problems(4, scale=embed_scale) or embed_scale > 2**20):
        bad.append("embed_scale")
    valid = not bad if ("num_embeddings" not in bad or num_embeddings >= 1) else None
    if n_ok and num_embeddings == 0 and bad == ["num_embeddings"]:
        valid = None  # nn.Embedding(0, d) is a (useless) valid module in PyTorch

    def build():
        torch.manual_seed(0)
        return pt.TokenAndPositionEmbedding(
            num_embeddings,
            d_model,
            padding_idx=padding_idx,
            embed_scale=embed_scale,
            positions_from_padding=from_padding,
        )

    module = right_value_or_clear_error(build, valid=valid, names=bad or ["num_embeddings"])
    if isinstance(module, Exception) or bad:
        return
    ids = torch.randint(0, num_embeddings, (2, 5), generator=torch.Generator().manual_seed(seed))
    if padding_idx is not None:
        ids[0, :2] = padding_idx % num_embeddings
    scale = math.sqrt(d_model) if embed_scale is None else float(embed_scale)
    if from_padding:
        ids_np = ids.numpy()
        pos = positions.make_positions(ids_np, padding_idx % num_embeddings)
    else:
        pos = np.broadcast_to(np.arange(5), (2, 5))
    pe = posenc.encode(pos, d_model)
    if from_padding:  # fairseq's zero row: no encoding at a padding token
        pe = np.where((ids.numpy() == padding_idx % num_embeddings)[..., None], np.float32(0), pe)
    want = module.embedding(ids) * scale + torch.from_numpy(pe)

    def check(y):
        assert same_bits(y.detach().numpy(), want.detach().numpy()), (
            "Embedding(ids) * scale + PE(positions) differs"
        )

    right_value_or_clear_error(lambda: module(ids), valid=True, check=check)
    right_value_or_clear_error(
        lambda: module(ids[0]), valid=False, names=["ids"]
    )  # (seq,) is not (batch, seq)


@fuzz(60)
@given(
    num_channels=st.sampled_from([4, 5, 8, 320, 1, 0, 2.0, 2**20 + 1]),
    flip=st.booleans(),
    downscale=st.sampled_from([0, 1, 0.5, -1, 3, NAN, "1"]),
    scale=st.sampled_from([1, 2.5, 0, -1, INF]),
    max_period=st.sampled_from([10000, 100, 1, 0.5, NAN, 1e300]),
    timesteps=torch_positions(shapes=[(3,), (0,), (), (2, 2)]),
    device=st.sampled_from(["cpu", "cpu", "meta"]),
)
def test_torch_timesteps(num_channels, flip, downscale, scale, max_period, timesteps, device):
    tensor, values = timesteps
    options = {
        "base": max_period,
        "shift": downscale,
        "scale": scale,
        "layout": "cos_sin" if flip else "sin_cos",
    }
    d_ok = not option_problems(num_channels)
    if (
        d_ok
        and num_channels // 2 == 1
        and not isinstance(downscale, str)
        and downscale == downscale
        and downscale >= 1
    ):
        options["shift"] = 0  # one frequency: ω_0 = scale whatever the denominator (tensor2tensor's rule)
    bad = option_problems(num_channels, **options)
    built = right_value_or_clear_error(
        lambda: pt.Timesteps(num_channels, flip, downscale, scale=scale, max_period=max_period),
        valid=not bad,
        names=[*bad, "num_channels", "max_period", "downscale_freq_shift", "flip"],
    )
    if isinstance(built, Exception):
        return
    good = (
        tensor.dim() == 1
        and values is not None
        and (device == "meta" or _finite_in_range(values.astype(np.float64)))
    )

    def check(result):
        assert result.dtype == torch.float32 and tuple(result.shape) == (len(tensor), num_channels)
        if device == "cpu":
            want = posenc.encode(values.astype(np.float64), num_channels, **options, dtype="float32")
            assert same_bits(result.numpy(), want), "Timesteps differs from posenc.encode of the timesteps"

    right_value_or_clear_error(
        lambda: built(tensor.to(device)), valid=good, names=["timesteps", "positions"], check=check
    )


@fuzz(40)
@given(
    pe_shape=st.sampled_from(
        [(1, 20, 8), (20, 1, 8), (1, 20, 6), (20, 8), (), (1, 0, 8), (2, 20, 8), (1, 1, 1, 8)]
    ),
    change=st.sampled_from(
        ["none", "none", "scale 1.01", "nan", "inf", "one element", "tutorial", "float64", "int"]
    ),
    batch_first=st.booleans(),
)
def test_torch_load_state_dict(pe_shape, change, batch_first):
    module = pt.SinusoidalPositionalEncoding(8, batch_first=batch_first)
    rows = math.prod(pe_shape[:-1]) if len(pe_shape) >= 2 else 0
    exact = torch.from_numpy(posenc.table(max(rows, 1), pe_shape[-1] if pe_shape else 8))[:rows]
    if change == "tutorial":
        exact = tutorial_table(rows, pe_shape[-1]) if pe_shape else exact
    pe = exact.reshape(pe_shape) if pe_shape else torch.tensor(1.0)
    if change == "scale 1.01":
        pe = pe * 1.01
    elif change in ("nan", "inf") and pe.numel():
        pe = pe.clone().reshape(-1)
        pe[-1] = float(change)
        pe = pe.reshape(pe_shape)
    elif change == "one element" and pe.numel() > 20:
        pe = pe.clone().reshape(-1)
        pe[-3] += 0.01
        pe = pe.reshape(pe_shape)
    elif change == "float64":
        pe = pe.double()
    elif change == "int":
        pe = pe.to(torch.int32)
    good_shape = len(pe_shape) == 3 and 1 in pe_shape[:2] and pe_shape[-1] == 8
    changed = (change in ("scale 1.01", "nan", "inf") and rows) or (
        change == "one element" and pe.numel() > 20
    )
    changed |= change == "int" and rows > 1  # truncated to integers: no encoding
    valid = good_shape and not changed
    if rows == 0 and good_shape:
        valid = None  # an empty table: nothing to compare, taken or refused
    if change == "scale 1.01" and rows <= 1:
        valid = None  # row 0 alone, (0, 1, 0, 1, ...) * 1.01: taken or refused

    def check(result):
        assert not module.state_dict(), "the checked pe must be dropped, not kept in the module's state"
        y = module(torch.zeros(3, 1, 8) if not batch_first else torch.zeros(1, 3, 8))
        assert same_bits(y.reshape(3, 8).numpy(), posenc.table(3, 8)), "the module's encoding changed"

    right_value_or_clear_error(
        lambda: module.load_state_dict({"pe": pe}), valid=valid, names=["pe"], check=check
    )


@fuzz(100)
@given(data=st.data(), rng=st.randoms(use_true_random=False))
def test_jax_module(data, rng):
    d_model = data.draw(st.integers(2, 9))
    batch_first = data.draw(st.sampled_from([None, True, False]))  # None: the JAX module's default (True)
    bf = batch_first is not False
    options = data.draw(st.sampled_from(MODULE_OPTIONS if d_model >= 4 else MODULE_OPTIONS[::2]))
    x_dtype = data.draw(st.sampled_from([jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32]))
    x_shape = x_shape_for(data.draw(st.sampled_from(X_SHAPES)), d_model)
    x = jnp.asarray(np.random.default_rng(1).standard_normal(x_shape), dtype=x_dtype)
    seq = (x_shape[-2] if bf else x_shape[0]) if len(x_shape) >= 2 else 1
    batch_shape = tuple(x_shape[:-2]) if bf else x_shape[1:2]
    p_kind = data.draw(st.sampled_from(["none", "none", "seq", "batch", "wrong"]))
    p = p_np = None
    if p_kind != "none":
        shape = {"seq": (seq,), "batch": (*batch_shape, seq), "wrong": (seq + 1,)}[p_kind]
        p, p_np, _ = data.draw(jax_positions(shapes=[shape]))
        if p_np is None or p_np.dtype.kind == "O":  # not an array of numbers: refused as positions
            p_np = np.zeros((), np.bool_)
    if data.draw(st.booleans()):
        offset = o_np = data.draw(st.sampled_from(OFFSETS))
    else:
        o_dtype = data.draw(st.sampled_from([np.int64, np.int32, np.int8, np.uint8, np.float32, np.bool_]))
        o_shape, o_values = draw_offset_values(data, batch_shape)
        o_np = np.array(o_values, dtype=np.int64).reshape(o_shape)
        if o_dtype not in (np.float32, np.bool_):
            info = np.iinfo(o_dtype)
            o_np = np.clip(o_np, info.min, info.max)
        o_np = o_np.astype(o_dtype)
        offset = o_np if data.draw(st.booleans()) or o_dtype == np.int64 else jnp.asarray(o_np)
        o_np = np.asarray(offset)
    module = pj.SinusoidalPositionalEncoding(
        d_model, **options, **({} if batch_first is None else {"batch_first": batch_first})
    )
    if x_dtype == jnp.int32:
        bad, total = ["x must", "dtype"], None
    else:
        bad, total = module_expectation(x_shape, d_model, bf, p_np, o_np)
    if p_np is not None and p_np.dtype == BFLOAT16 and not isinstance(p, jax.Array) and not bad:
        bad = None  # NumPy (ml_dtypes) bfloat16 positions: taken or refused, like the core
    name = np.dtype(x_dtype).name

    def check(y):
        assert isinstance(y, jax.Array) and y.dtype == x.dtype and y.shape == x.shape
        want = module_reference(total, d_model, options, name)
        if want is None:
            got = unoriented(np.asarray(module.encoding_for(x, p, offset=offset)), bf, total.shape)
            spot_check(got, total, d_model, options=reference_options(options), fmt=name, rng=rng, samples=3)
            return
        assert same_bits(np.asarray(y), np.asarray(x + jnp.asarray(oriented(want, bf)))), (
            "differs from x + posenc.encode"
        )

    right_value_or_clear_error(
        lambda: module(x, p, offset=offset),
        valid=None if bad is None else not bad,
        names=["positions", "offset", "x must", "shape", "2**31"]
        if bad is None
        else bad + (["positions", "offset"] if bad and bad[0] != "x must" else []),
        check=check,
    )
