"""One owner per rule: an argument check has one implementation and one wording (``posenc.validation``), so
the same bad value gets the same exception and message through every entry point that takes it.

The one rule for integral floats (``validation.integer``): a Python argument must be an integer (``4096.0``
is a TypeError that suggests ``4096``); a number read from a model's config file may be a whole float
(``"original_max_position_embeddings": 4096.0``, as some saved configs write it) and is taken as the
integer it is. ``True``, ``"4096"`` and ``4096.5`` are refused everywhere.
"""

from __future__ import annotations

import json

import pytest

import posenc
import posenc.positions
import posenc.rope as rope
from posenc import validation
from posenc.cli import main
from posenc.errors import PosencTypeError

BAD_INTEGERS = [True, "4096", 4096.5]


def _message(call) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    return type(caught.value), str(caught.value)


def _python_entry_points(name: str, value):
    """Every Python way of passing ``value`` as the integer parameter ``name`` (head_dim for rope)."""
    return {
        "validation.integer": lambda: validation.integer(name, value, minimum=1),
        "rope.config(keywords)": lambda: rope.config(head_dim=value),
        "rope.RopeParameters": lambda: rope.RopeParameters("default", head_dim=value, rotary_dim=8, base=1e4),
        "rope.check_head_dim": lambda: rope.parameters.check_head_dim(value),
    }


@pytest.mark.parametrize("value", [*BAD_INTEGERS, 4096.0], ids=repr)
def test_a_bad_head_dim_gets_one_answer_from_every_python_entry_point(value) -> None:
    answers = {where: _message(call) for where, call in _python_entry_points("head_dim", value).items()}
    assert len(set(answers.values())) == 1, answers
    error, message = next(iter(answers.values()))
    assert error is PosencTypeError and issubclass(error, TypeError)
    assert message.startswith(f"head_dim must be an integer >= 1; got {value!r} of type")


@pytest.mark.parametrize("value", [*BAD_INTEGERS, 4096.0], ids=repr)
def test_d_model_and_head_dim_share_the_wording(value) -> None:
    error, message = _message(lambda: posenc.encode([0, 1], value))
    rope_error, rope_message = _message(lambda: rope.RopeParameters("default", value, 8, 1e4))
    assert error is rope_error is PosencTypeError
    assert message.replace("d_model", "NAME").replace(">= 2", ">= N") == rope_message.replace(
        "head_dim", "NAME"
    ).replace(">= 1", ">= N")


def test_a_whole_float_gets_the_fix_in_the_message() -> None:
    for call in (lambda: posenc.encode([0], 4096.0), lambda: rope.config(head_dim=4096.0)):
        assert _message(call)[1].endswith("of type float (pass 4096 instead)")


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("head_dim", ("head_dim",)),
        ("max_position_embeddings", ("max_position_embeddings",)),
        ("original_max_position_embeddings", ("rope_scaling", "original_max_position_embeddings")),
        ("mrope_section[0]", ("rope_scaling", "mrope_section", 0)),
    ],
)
@pytest.mark.parametrize("value", BAD_INTEGERS, ids=repr)
def test_a_config_file_refuses_what_python_refuses(tmp_path, capsys, field, path, value) -> None:
    cfg = _yarn_config()
    _put(cfg, path, value)
    error, message = _message(lambda: rope.config(cfg))
    assert error is PosencTypeError and message.startswith(f"{field} must be an integer >= ")
    assert f"got {value!r} of type {type(value).__name__}" in message
    file = tmp_path / "config.json"
    file.write_text(json.dumps(cfg))
    assert _message(lambda: rope.config(file)) == (error, message)
    assert main(["rope", str(file), "--positions", "0:2"]) == 2
    assert message in capsys.readouterr().err  # `posenc rope` prints the library's message


def test_a_config_file_takes_whole_floats_for_its_integer_fields(tmp_path, capsys) -> None:
    cfg = _yarn_config()
    exact = rope.config(cfg)
    floats = _yarn_config()
    floats["head_dim"] = 128.0
    floats["max_position_embeddings"] = 32768.0
    floats["rope_scaling"]["original_max_position_embeddings"] = 4096.0
    floats["rope_scaling"]["mrope_section"] = [16.0, 24.0, 24.0]
    params = rope.config(floats)
    assert params == exact and type(params.head_dim) is int and type(params.max_position_embeddings) is int
    assert params.mrope_section == (16, 24, 24) and all(type(x) is int for x in params.mrope_section)
    file = tmp_path / "config.json"
    file.write_text(json.dumps(floats))
    assert rope.config(file) == exact
    del floats["rope_scaling"]["mrope_section"]  # `posenc rope` prints 1-D positions: no M-RoPE
    file.write_text(json.dumps(floats))
    assert main(["rope", str(file), "--positions", "0:2"]) == 0 and "cos0" in capsys.readouterr().out
    # hidden_size // num_attention_heads as whole floats too
    assert rope.config({"hidden_size": 4096.0, "num_attention_heads": 32.0}).head_dim == 128


def test_rope_reals_use_the_real_check() -> None:
    for value in (True, "8"):
        assert _message(
            lambda value=value: rope.config(head_dim=8, scaling={"rope_type": "linear", "factor": value})
        ) == (
            PosencTypeError,
            f"factor must be a real number; got {value!r} of type {type(value).__name__}",
        )
    assert _message(lambda: rope.config(head_dim=8, base=10**400)) == _message(
        lambda: validation.real("rope_theta (base)", 10**400, usual=rope.parameters._BASES)
    )
    assert _message(lambda: posenc.encode([0], 8, base="10000"))[1] == (
        "base must be a real number; got '10000' of type str"
    )


def _yarn_config() -> dict:
    return {
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "rope_theta": 1e6,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 8.0,
            "original_max_position_embeddings": 4096,
            "mrope_section": [16, 24, 24],
        },
    }


def _put(cfg: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        cfg = cfg[key]
    cfg[path[-1]] = value


# --- position ids: one rule over the array backend (posenc.portable.positions) ------------------------

POSITION_CALLS = [
    ("from_attention_mask", ([[1, 2, 0]],), {}),
    ("from_cu_seqlens", ([0, 3, 2],), {}),
    ("from_cu_seqlens", ([1, 3],), {}),
    ("from_cu_seqlens", ([0, 3],), {"total": 4}),
    ("from_cu_seqlens", ([0, 3],), {"start": 1.0}),
    ("make_positions", ([[5, 1]], True), {}),
]


@pytest.mark.parametrize(("function", "args", "kwargs"), POSITION_CALLS)
def test_numpy_and_torch_position_ids_give_one_message(function, args, kwargs) -> None:
    torch = pytest.importorskip("torch")
    import numpy as np

    import posenc.torch.positions

    numpy_answer = _message(
        lambda: getattr(posenc.positions, function)(np.array(args[0]), *args[1:], **kwargs)
    )
    torch_answer = _message(
        lambda: getattr(posenc.torch.positions, function)(torch.tensor(args[0]), *args[1:], **kwargs)
    )
    assert numpy_answer == torch_answer


def test_the_shared_rules_run_on_jax_arrays_too() -> None:
    jnp = pytest.importorskip("jax.numpy")
    import numpy as np

    from posenc.portable import backend_named
    from posenc.portable import positions as rules

    ops = backend_named("jax")
    mask = [[0, 1, 1, 0], [1, 1, 1, 1]]
    np.testing.assert_array_equal(
        rules.from_attention_mask(ops, jnp.array(mask), 2, -1),
        posenc.positions.from_attention_mask(mask, start=2, pad_position=-1),
    )
    np.testing.assert_array_equal(
        rules.make_positions(ops, jnp.array(mask), 0), posenc.positions.make_positions(mask, 0)
    )
    np.testing.assert_array_equal(
        rules.from_cu_seqlens(ops, jnp.array([0, 2, 2, 5])),
        posenc.positions.from_cu_seqlens([0, 2, 2, 5]),
    )
    with pytest.raises(ValueError, match=r"attention_mask must hold only 0 and 1 .* got 2 at index \(0, 1\)"):
        rules.from_attention_mask(ops, jnp.array([[1, 2]]))
