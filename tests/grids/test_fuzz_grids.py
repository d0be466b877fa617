"""The fuzz suite (tests/support/fuzzing.py): N-D grids (:mod:`posenc.grids`) and :mod:`posenc.sharding`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import grids, sharding
from tests.support.fuzz_cases import (
    option_problems,
    right_value_or_clear_error,
    same_bits,
)
from tests.support.fuzzing import (
    INF,
    NAN,
    SIZE_WORDS,
    fuzz,
)

# --- grids ---------------------------------------------------------------------------------------------

GRID_SHAPES = [
    (2, 3),
    (4,),
    (2, 2, 2),
    (1, 5),
    (),
    (0, 4),
    (-1, 2),
    (2**40, 2**40),
    (2**40,),
    4,
    None,
    "ab",
    (2.0, 3),
    (True, 2),
]


def _is_int(value: object, minimum: int) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= minimum


@fuzz(120)
@given(
    shape=st.sampled_from(GRID_SHAPES),
    d_model=st.sampled_from([8, 8, 12, 16, 6, 7, 0, 2**20 + 1]),
    order=st.sampled_from([None, None, (1, 0), (0, 0), (2,), (0, 1, 2), (2, 0, 1), 1, (0, "1")]),
    widths=st.sampled_from([None, None, (4, 4), (2, 6), (3, 5), (8,), (4, 4, 4), (4.0, 4), 8, (0, 8)]),
    group=st.sampled_from(["axis", "axis", "function", "x", None]),
    with_positions=st.sampled_from([False, False, "good", "nan", "short", "int", "2**31"]),
    layout=st.sampled_from(["sin_cos", "interleaved", "cos_sin", "bad"]),
    dtype=st.sampled_from([None, "float64", "bfloat16", "int8"]),
)
def test_grid(shape, d_model, order, widths, group, with_positions, layout, dtype):
    bad = []
    sizes = None
    if isinstance(shape, tuple) and shape and all(_is_int(s, 1) for s in shape):
        sizes = shape
    else:
        bad.append("shape")
    ndim = len(sizes) if sizes else 0
    if option_problems(d_model, layout=layout if layout != "bad" else None, dtype=dtype or "float32"):
        bad += option_problems(d_model, layout=layout if layout != "bad" else None, dtype=dtype or "float32")
    if (
        sizes
        and order is not None
        and not (
            isinstance(order, tuple)
            and sorted(map(str, order)) == [str(i) for i in range(ndim)]
            and all(isinstance(o, int) for o in order)
        )
    ):
        bad.append("order")
    if sizes and not option_problems(d_model):
        if widths is None:
            if d_model % (2 * ndim):
                bad.append("d_model")
        elif not (
            isinstance(widths, tuple)
            and len(widths) == ndim
            and all(_is_int(w, 2) and w % 2 == 0 for w in widths)
            and sum(widths) == d_model
        ):
            bad.append("widths")
    if group not in ("axis", "function"):
        bad.append("group")
    axis_positions = None
    if with_positions and sizes and max(sizes) < 2**20:
        axis_positions = [np.arange(s, dtype=np.float64) * 0.5 for s in sizes]
        if with_positions == "nan":
            axis_positions[0][0] = NAN
        elif with_positions == "2**31":
            axis_positions[-1][-1] = 2.0**31
        elif with_positions == "short":
            axis_positions[0] = axis_positions[0][1:]
        elif with_positions == "int":
            axis_positions = 5
        if with_positions != "good":
            bad.append("positions")
    if sizes and not bad and math.prod(sizes) * d_model > 2**24:
        bad += SIZE_WORDS
    order_ = tuple(range(ndim)) if order is None else order
    options = {} if layout == "bad" else {"layout": layout}

    def check(result):
        assert result.shape == (*sizes, d_model) and result.dtype.name == (dtype or "float32")
        ws = widths or (d_model // ndim,) * ndim
        pos = axis_positions or [np.arange(s) for s in sizes]
        start = 0
        for k, axis in enumerate(order_):
            block = posenc.encode(
                pos[axis],
                ws[k],
                layout="sin_cos" if group == "function" else layout,
                dtype=dtype or "float32",
            )
            index = [0] * ndim
            index[axis] = slice(None)
            got = result[tuple(index)]
            if group == "axis":
                assert same_bits(np.ascontiguousarray(got[:, start : start + ws[k]]), block), (
                    f"block {k} (axis {axis})"
                )
            else:
                h, half = start // 2, ws[k] // 2
                assert same_bits(
                    np.ascontiguousarray(got[:, h : h + half]), np.ascontiguousarray(block[:, :half])
                )
                assert same_bits(
                    np.ascontiguousarray(got[:, d_model // 2 + h : d_model // 2 + h + half]),
                    np.ascontiguousarray(block[:, half:]),
                )
            start += ws[k]

    right_value_or_clear_error(
        lambda: grids.grid(
            shape,
            d_model,
            order=order,
            widths=widths,
            group=group,
            positions=axis_positions,
            dtype=dtype,
            **options,
        ),
        valid=not bad,
        names=bad,
        check=check,
    )


def _grid_value_check(rows: int | None = None):
    def check(result):
        assert isinstance(result, np.ndarray) and result.size and np.isfinite(result.astype(np.float64)).all()
        assert np.abs(result.astype(np.float64)).max() <= 1.0

    return check


LIBRARY_GRIDS = {
    "mae_2d": (
        lambda a: grids.mae_2d(a["embed_dim"], a["size"], cls_token=a["flag"]),
        ["embed_dim", "grid_size", "d_model", "shape"],
    ),
    "diffusers_2d": (
        lambda a: grids.diffusers_2d(
            a["embed_dim"],
            a["size"],
            cls_token=a["flag"],
            extra_tokens=a["extra"],
            interpolation_scale=a["scale"],
            base_size=a["base_size"],
        ),
        ["embed_dim", "grid_size", "interpolation_scale", "base_size", "extra_tokens", "d_model", "shape"],
    ),
    "diffusers_3d": (
        lambda a: grids.diffusers_3d(
            a["embed_dim"],
            a["size"],
            a["temporal"],
            spatial_interpolation_scale=a["scale"],
            temporal_interpolation_scale=a["scale2"],
        ),
        ["embed_dim", "spatial_size", "temporal_size", "interpolation_scale", "d_model", "shape"],
    ),
    "timm_2d": (
        lambda a: grids.timm_2d(
            a["size2"],
            a["embed_dim"],
            temperature=a["base_size"] if a["base_size"] != 16 else 10000.0,
            reverse_coord=a["flag"],
            interleave_sin_cos=a["flag2"],
        ),
        ["feat_shape", "dim", "temperature", "base", "d_model", "shape"],
    ),
    "dinov3_rope": (
        lambda a: grids.dinov3_rope(
            a["size2"],
            a["embed_dim"],
            temperature=a["base_size"] if a["base_size"] != 16 else 100.0,
            normalize_coords="min" if a["flag"] else "separate",
            grid_offset=a["scale"],
            rotate_half=a["flag2"],
        ),
        ["feat_shape", "dim", "temperature", "grid_offset", "shape"],
    ),
    "positional_encodings_nd": (
        lambda a: grids.positional_encodings_nd(a["size2"], a["embed_dim"]),
        ["shape", "channels", "d_model"],
    ),
}


@pytest.mark.parametrize("name", list(LIBRARY_GRIDS))
@fuzz(40)
@given(
    embed_dim=st.sampled_from([16, 16, 32, 8, 12, 6, 0, -16, "16", 16.0, 2**20 + 16]),
    size=st.sampled_from([2, 2, 3, (2, 3), 1, 0, -1, 2.0, None, (2,), (2, 0), 2**40]),
    size2=st.sampled_from([(2, 3), (2, 2), (4,), (2, 2, 2), (), (0, 2), 4, None, (2**40, 2)]),
    temporal=st.sampled_from([2, 1, 0, -1, 2.5, None]),
    scale=st.sampled_from([1.0, 1.0, 0.5, 2, 0, -1, NAN, INF, "1"]),
    scale2=st.sampled_from([1.0, 1.0, 0.5, 0, NAN]),
    base_size=st.sampled_from([16, 16, 8, 1, 0, -16, 1.5, 10**400, None]),
    extra=st.sampled_from([0, 1, 2, -1, 1.5]),
    flag=st.booleans(),
    flag2=st.booleans(),
)
def test_library_grids(name, **arguments):
    call, names = LIBRARY_GRIDS[name]
    right_value_or_clear_error(lambda: call(arguments), names=names, check=_grid_value_check())


# --- refusals of the grids (each once returned a wrong or silent value) -----------------------------------


def test_grid_checks_layout_whatever_the_group():
    """group="function" ignored layout: "bogus" and 42 were accepted (group="axis" refused them)."""
    for layout in ("bogus", 42):
        with pytest.raises(
            ValueError, match=r"layout must be one of 'interleaved', 'sin_cos', 'cos_sin'; got"
        ):
            grids.grid((2, 2), 8, group="function", layout=layout)
    assert grids.grid((2, 2), 8, group="function", layout="interleaved").shape == (2, 2, 8)


def test_grid_shape_must_be_a_list_or_tuple():
    """A set or a dict has no order of axes: grid({3, 2}, 8) gave a (2, 3) grid, silently."""
    for shape in ({3, 2}, {5: "h", 4: "w"}, (size for size in (3, 2))):
        with pytest.raises(
            TypeError, match=r"shape must be a sequence of axis sizes, a list or tuple such as \(H, W\)"
        ):
            grids.grid(shape, 8)
    assert grids.grid([3, 2], 8).shape == grids.grid(np.array([3, 2]), 8).shape == (3, 2, 8)


def test_detr_masks_hold_0s_and_1s_only():
    """-1, 0.5 and 7 were counted as pixels (y = -1, -2, -3), though the messages ask for 0s and 1s, and
    posenc.torch.DetrSinePositionEmbedding and positions.from_attention_mask refuse them."""
    for value, call in (
        (-1, lambda mask: grids.detr_positions(mask)),
        (0.5, lambda mask: grids.detr_positions(mask, normalize=True)),
        (7, lambda mask: grids.detr_2d(mask, 4)),
    ):
        mask = np.ones((1, 2, 3), np.asarray(value).dtype)
        mask[0, 1, 2] = value
        with pytest.raises(
            ValueError, match=rf"mask must hold only 0s and 1s .* got {value} at index \(0, 1, 2\)"
        ):
            call(mask)
    for mask in (np.ones((1, 2, 3), bool), np.ones((1, 2, 3), np.uint8), np.ones((1, 2, 3), np.float32)):
        assert np.array_equal(grids.detr_2d(mask, 4), grids.detr_2d(np.ones((1, 2, 3)), 4))


def test_detr_positions_too_large_for_memory_are_refused_before_any_work(monkeypatch):
    """A broadcast mask of 2**24 pixels takes no memory, its float32 positions (4 arrays at work) 256 MiB."""
    monkeypatch.setattr(posenc.validation, "available_memory", lambda: 100 << 20)
    mask = np.broadcast_to(np.int8(1), (1, 2**12, 2**12))
    needed = (
        r"needs 0\.25 GiB \(4 arrays of its size at work\) but only 0\.0977 GiB .* fewer or smaller images"
    )
    with pytest.raises(ValueError, match=needed):
        grids.detr_positions(mask)


def test_offsets_that_overflow_are_refused_by_name_whatever_numpys_error_state():
    """grid_offset=1.7e308 gave inf coordinates (a FloatingPointError under np.errstate(all="raise")), and
    offset=1e300 overflowed DETR's float32 cast; with normalize=True the refusal blamed the mask."""
    coordinates = grids.dinov3_coordinates((2, 3), grid_offset=0.25)
    detr = grids.detr_2d(np.ones((1, 2, 3)), 4, normalize=True, offset=0.5)
    for state in ("warn", "raise"):
        with np.errstate(all=state):
            with pytest.raises(ValueError, match=r"grid_offset=1\.7e\+308 gives coordinates .* overflow"):
                grids.dinov3_coordinates((1, 1), grid_offset=1.7e308)
            with pytest.raises(ValueError, match=r"grid_offset=-1\.7e\+308 gives coordinates"):
                grids.dinov3_rope((1, 3), 8, grid_offset=-1.7e308)
            for call in (grids.dinov3_rope, grids.timm_rope):  # finite, but no position: named too
                with pytest.raises(
                    ValueError, match=r"grid_offset.* give coordinates up to \|c\| = 1000000000\d"
                ):
                    call((2, 3), 8, grid_offset=1e10)
            for normalize in (False, True):
                with pytest.raises(
                    ValueError, match=r"offset must lie in \(-2\*\*64, 2\*\*64\) .* got 1e\+300"
                ):
                    grids.detr_2d(np.ones((1, 2, 2)), 4, normalize=normalize, offset=1e300)
            with pytest.raises(ValueError, match=r"with normalize=True the y positions .* offset=9\.99"):
                grids.detr_2d(np.ones((1, 2, 2)), 4, normalize=True, offset=1e19)
            for want, got in zip(
                coordinates, grids.dinov3_coordinates((2, 3), grid_offset=0.25), strict=True
            ):
                np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(
                grids.detr_2d(np.ones((1, 2, 3)), 4, normalize=True, offset=0.5), detr
            )


def test_messages_name_the_callers_parameters_and_true_bounds():
    """positional_encodings_nd((1, 1, 1), 2**20), within the stated channels <= 2**20, failed as
    "d_model must be <= 2**20 ... got 1048578"; min_period=1e-300 failed as "scale must be > 0"."""
    with pytest.raises(ValueError, match=r"channels must be <= 1048572 for a shape of 3 axes .* got 1048576"):
        grids.positional_encodings_nd((1, 1, 1), 2**20)
    with pytest.raises(ValueError, match=r"channels must be <= 2\*\*20 = 1048576; got 1048577"):
        grids.positional_encodings_nd((1, 1), 2**20 + 1)
    for call in (grids.dinov3_frequencies, lambda dim, **kw: grids.dinov3_rope((2, 2), dim, **kw)):
        with pytest.raises(
            ValueError, match=r"min_period must be >= 2π / 2\*\*20 = 5\.99211e-06 .* min_period=1e-300"
        ):
            call(8, min_period=1e-300, max_period=1.0)
    assert grids.dinov3_frequencies(8, min_period=2 * math.pi / 2**20, max_period=1.0)["scale"] == 2**20
    # a lowest frequency past the core's 2**-900 was refused in the core's words ("use a smaller base",
    # naming base, scale and shift): now in DINOv3's, naming the caller's own value
    for options, name in ((dict(min_period=0.1, max_period=1e300), "max_period=1e+300"), (dict(), "")):
        for call in (grids.dinov3_frequencies, lambda dim, **kw: grids.dinov3_rope((2, 2), dim, **kw)):
            kw = options or dict(temperature=1e300)
            with pytest.raises(
                posenc.PosencError, match=r"(max_period|temperature)=1e\+300 with dim=64 makes"
            ) as caught:
                call(64, **kw)
            assert caught.value.parameter == (name.split("=")[0] or "temperature")
            assert "smaller than 2**-900, the smallest posenc computes" in str(caught.value)


# --- sharding -------------------------------------------------------------------------------------------

LENGTHS_SHARD = [
    0,
    8,
    12,
    16,
    7,
    -1,
    True,
    8.0,
    None,
    2**40,
    2**31 + 8,
]  # 2**31 itself is valid but needs 16 GiB
WORLD = [1, 2, 4, 3, 0, -1, True, 2.0, 10**12]


@fuzz(120)
@given(
    length=st.sampled_from(LENGTHS_SHARD),
    world_size=st.sampled_from(WORLD),
    rank=st.sampled_from([0, 1, 3, -1, 4, True, 1.0, None]),
    scheme=st.sampled_from(["contiguous", "zigzag", "ring", None]),
    start=st.sampled_from([0, 5, -3, 2**31 - 4, 2**31, True]),
)
def test_sharding(length, world_size, rank, scheme, start):
    bad = []
    if not _is_int(length, 0) or length > 2**31:  # sequences are encoded: positions < 2**31
        bad.append("length")
    if not _is_int(world_size, 1) or world_size > 2**31:
        bad.append("world_size")
    if scheme not in ("contiguous", "zigzag"):
        bad.append("scheme")
    if not bad:
        parts = world_size * (1 if scheme == "contiguous" else 2)
        if length % parts:
            bad += ["length", "world_size"]
    bad_rank = bad + ([] if _is_int(rank, 0) and not bad and rank < world_size else ["rank"])

    def permutation_check(order):
        assert order.dtype == np.int64 and np.array_equal(np.sort(order), np.arange(length))

    order = right_value_or_clear_error(
        lambda: sharding.permutation(length, world_size=world_size, scheme=scheme),
        valid=not bad,
        names=bad,
        check=permutation_check,
    )

    def indices_check(indices):
        assert np.array_equal(
            indices, order[rank * (length // world_size) : (rank + 1) * (length // world_size)]
        )

    indices = right_value_or_clear_error(
        lambda: sharding.shard_indices(length, world_size=world_size, rank=rank, scheme=scheme),
        valid=not bad_rank,
        names=bad_rank,
        check=indices_check,
    )
    bad_start = bad_rank + (
        []
        if _is_int(start, -(2**31 - 1)) and (bad_rank or not length or start + length - 1 < 2**31)
        else ["start"]
    )
    right_value_or_clear_error(
        lambda: sharding.shard_positions(
            length, world_size=world_size, rank=rank, scheme=scheme, start=start
        ),
        valid=not bad_start,
        names=bad_start,
        check=lambda ids: np.testing.assert_array_equal(ids, indices + start),
    )
    if not bad_rank and length <= 64:
        x = np.arange(3 * length).reshape(3, length)
        shards = [
            sharding.shard(x, axis=1, world_size=world_size, rank=r, scheme=scheme) for r in range(world_size)
        ]
        right_value_or_clear_error(
            lambda: sharding.unshard(shards, axis=-1, scheme=scheme),
            valid=True,
            check=lambda y: np.testing.assert_array_equal(y, x),
        )


@fuzz(60)
@given(
    shards=st.sampled_from(
        [
            [np.zeros((2, 4))] * 2,
            [np.zeros(4), np.zeros(3)],
            [],
            np.zeros((2, 4)),
            "ab",
            [1, 2],
            None,
            [[1, 2], [3, 4]],
            ([0, 1], [2, 3]),
        ]
    ),
    axis=st.sampled_from([0, 1, -1, 2, -3, True, 0.0, None]),
    scheme=st.sampled_from(["contiguous", "zigzag", "x"]),
)
def test_unshard(shards, axis, scheme):
    right_value_or_clear_error(
        lambda: sharding.unshard(shards, axis=axis, scheme=scheme),
        names=["shards", "axis", "scheme", "shape", "length"],
        check=lambda y: None,
    )
