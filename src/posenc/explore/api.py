"""The endpoints of ``posenc explore``, as pure functions: query parameters (a dict of strings) and, for a
POST, the request's body in; a JSON-ready dict out. No HTTP here (:mod:`posenc.explore.server` serves them).

Every value comes from posenc's own functions (``posenc.table``, ``posenc.encode``, :mod:`posenc.analysis`,
:mod:`posenc.rope`, :mod:`posenc.porting`, ``posenc.audit``), and every check is posenc's own: a string
is read as a number (an int when it is written as one, else a float), then handed to posenc, and a
ValueError or TypeError of posenc becomes a :class:`BadRequest` carrying its message and the parameter it
names. What is refused here alone: a parameter an endpoint does not take, a string that is no number, and
requests over the caps (:data:`CAPS`), which keep every answer small and quick.

Nothing of a request is ever read as a path: ``POST /api/rope`` takes a JSON *object* (a config.json's
contents; a string, list, number or null is refused, as is nesting deeper than :data:`MAX_JSON_DEPTH`), so
:func:`posenc.rope.config` never meets a string it would open; ``POST /api/identify`` takes the file's
bytes, written to a temporary file of its own, and the ``filename`` parameter only picks the reader by its
suffix (compared as text, never made a path).

The table options, taken by table, value, sinusoids, dot and criteria (defaults in parentheses):
``d_model`` (64), ``base`` (10000), ``shift`` (0), ``scale`` (1), ``layout`` (interleaved | sin_cos |
cos_sin), ``odd`` (zero | literal | drop | error), ``dtype`` (float32 | float16 | bfloat16 | float64),
``start`` (0), ``length`` (64; 2048 for criteria).

The dtype rule: a value is posenc's value in ``dtype`` (correctly rounded once), written in JSON as that
very number (``float(value)``: float16, bfloat16 and float32 values are exact in float64, so a JSON reader
gets the dtype's value bit for bit); only ``value`` also writes it as the shortest decimal that reads back
as it in the dtype. Figures that are no values of the table (dot products, wavelengths, errors) are
float64. JSON has no NaN or infinity: such a number is written as null.
"""

from __future__ import annotations

import inspect
import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import posenc

from .. import defaults, porting, rope, validation
from ..analysis import check, closed_form_dot_product, collisions, dot_products
from ..analysis.rope_figures import rope_scalings, rope_wavelength_lines, rope_wavelengths_of
from ..core import Options
from ..decimals import shortest
from ..errors import PosencError
from ..porting.readers import READERS

__all__ = [
    "CAPS",
    "ENDPOINTS",
    "MAX_CRITERIA_LENGTH",
    "MAX_CRITERIA_VALUES",
    "MAX_CRITERIA_WIDTH",
    "MAX_DIMS",
    "MAX_DOT",
    "MAX_IDENTIFY_ROWS",
    "MAX_JSON_DEPTH",
    "MAX_ROPE_WIDTH",
    "MAX_UPLOAD",
    "MAX_VALUES",
    "BadRequest",
    "criteria",
    "dot",
    "identify",
    "index",
    "rope_lines",
    "sinusoids",
    "table",
    "value",
]

#: The most values an array answer holds, and the most a table-based request computes: length * d_model.
MAX_VALUES = 262144
#: The most positions of the dot-product matrix (its length² products).
MAX_DOT = 512
#: The most columns the sinusoids view draws at once.
MAX_DIMS = 16
#: The largest request body (a file to identify, a config.json): 32 MiB.
MAX_UPLOAD = 32 << 20
#: The most positions the criteria are measured over (``posenc check`` encodes twice as many).
MAX_CRITERIA_LENGTH = 65536
#: The most values (length * d_model) the criteria are measured over: about a second on two cores.
MAX_CRITERIA_VALUES = 1 << 23
#: The widest table the criteria are measured over: their cost grows with d_model at any length (8 rows of
#: 2²⁰ columns took 150 s and 9 GiB); at this width it is about 0.2 s.
MAX_CRITERIA_WIDTH = 4096
#: The deepest nesting of a posted JSON body (the object itself is 1; a config.json nests 3 or 4 deep).
MAX_JSON_DEPTH = 32
#: The widest rotary the RoPE view draws (the widest heads are 2⁸ to 2⁹; 65536 took 8 to 14 s).
MAX_ROPE_WIDTH = 4096
#: The most rows of a table the identify view reads (the longest contexts are 2¹⁷ positions; a table of
#: 2,097,152 rows took 24 to 32 s): ``posenc identify FILE`` reads any.
MAX_IDENTIFY_ROWS = 1 << 17

#: The caps, by name (``GET /api`` lists them): module constants, read when a request is checked.
CAP_NAMES = (
    "MAX_VALUES",
    "MAX_DOT",
    "MAX_DIMS",
    "MAX_UPLOAD",
    "MAX_CRITERIA_LENGTH",
    "MAX_CRITERIA_VALUES",
    "MAX_CRITERIA_WIDTH",
    "MAX_JSON_DEPTH",
    "MAX_ROPE_WIDTH",
    "MAX_IDENTIFY_ROWS",
)
#: What :func:`index` answers for the caps; the checks read the module constants themselves.
CAPS = {name: globals()[name] for name in CAP_NAMES}

#: Every path the server answers, with one line on what it returns.
ENDPOINTS = {
    "/api": "GET: this list: {endpoints, caps}",
    "/api/table": "GET ?options: {shape, dtype, start, values, min, max, collisions: {posenc, usual}}",
    "/api/value": "GET ?options&position=P&column=C: {position, column, dtype, value, bits, float64}",
    "/api/sinusoids": "GET ?options&dims=0,1,2,3: {positions, series: [{dim, values}]}",
    "/api/dot": "GET ?options (length <= MAX_DOT): "
    "{positions, matrix, by_offset: {offsets, dot, closed_form}}",
    "/api/criteria": "GET ?options (length default 2048): posenc.analysis.check(...).as_dict()",
    "/api/rope": "GET ?head_dim&base&factor&original_max_position_embeddings&..., or POST a config.json "
    "(application/json, a JSON object): {head_dim, base, lines, config (POST)}",
    "/api/identify": "POST ?filename=NAME, body (application/octet-stream): a .npy, .safetensors or .pt/.pth "
    "file: {tensor, shape, dtype, verdict, best, paste, audit}",
    "/": "the page (static/index.html)",
    "/static/<name>": "the page's files (html, js, css, png, svg)",
}

_DEFAULTS: dict[str, Any] = {"d_model": 64, **defaults.OPTIONS, "dtype": "float32", "start": 0, "length": 64}
_OPTION_NAMES = tuple(_DEFAULTS)
_TEXT_OPTIONS = ("layout", "odd", "dtype")  # the others are numbers
_SUFFIXES = tuple(READERS)  # the file kinds identify reads: .npy, .pt, .pth, .safetensors


class BadRequest(ValueError):
    """A request refused: ``parameter`` names what to change, the message (``str``) says how; ``status``
    is the HTTP status the server answers (400; 403 for a request from another origin)."""

    status = 400

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(" ".join(str(message).split()))  # one line
        self.parameter = parameter


def index(params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api``: ``{"endpoints": {path: one line}, "caps": {name: value}}``."""
    _only(params, (), "/api")
    return {"endpoints": dict(ENDPOINTS), "caps": {name: globals()[name] for name in CAP_NAMES}}


# --- the table views -------------------------------------------------------------------------------


def table(params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/table``: the table of positions start .. start + length - 1 in ``dtype``.

    ``{"shape": [length, d_model], "dtype", "start", "values": [[...] * d_model] * length, "min", "max",
    "collisions": {"posenc": k1, "usual": k2}}``: ``values`` is ``posenc.table(...)`` (each the dtype's value
    as a JSON number), ``min``/``max`` over it; k1 counts the positions whose row repeats an earlier row
    of the range (length - distinct rows, :func:`posenc.analysis.collisions`) in posenc's table, k2 the same
    for the usual code evaluated in the dtype (``compute="dtype"``). length * d_model <= MAX_VALUES.
    """
    request = _table_request(params, "/api/table")
    values = request.table()
    counts = {}
    for name, compute in (("posenc", "exact"), ("usual", "dtype")):
        found = _posenc(
            "d_model",
            lambda compute=compute: collisions(
                request.length, request.d_model, start=request.start, compute=compute, **request.keywords
            ),
        )
        counts[name] = found.length - found.distinct
    wide = values.astype(np.float64)
    return {
        "shape": [request.length, request.d_model],
        "dtype": request.dtype,
        "start": request.start,
        "values": wide.tolist(),
        "min": float(wide.min()),
        "max": float(wide.max()),
        "collisions": counts,
    }


def value(params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/value``: one value, PE(position)[column], in ``dtype``.

    ``{"position", "column", "dtype", "value": the shortest decimal that reads back as the value in the
    dtype (the form of ``posenc table --format csv``), "bits": its bits in hex ("0x3f576aa4"), "float64":
    repr of posenc.encode(position, d_model, dtype="float64")[column]}``. ``position`` and ``column`` are
    required; the other options as for the table (``start`` and ``length`` are checked, not used).
    """
    request = _table_request(params, "/api/value", required=("position", "column"))
    position = _posenc("position", lambda: validation.position_int("position", _number(params, "position")))
    column = _posenc(
        "column",
        lambda: validation.integer(
            "column",
            _number(params, "column"),
            minimum=0,
            maximum=request.d_model - 1,
            why=f"the last column of d_model = {request.d_model}",
        ),
    )
    row = _posenc("position", lambda: request.encode(position, request.dtype))
    exact = _posenc("position", lambda: request.encode(position, "float64"))
    stored = row[column : column + 1].reshape(1, 1)
    line = shortest(stored)
    text = line(0) if line is not None else repr(float(stored[0, 0]))
    width = 8 * stored.dtype.itemsize
    bits = int(stored.view(f"uint{width}")[0, 0])
    return {
        "position": position,
        "column": column,
        "dtype": request.dtype,
        "value": text,
        "bits": f"0x{bits:0{width // 4}x}",
        "float64": repr(float(exact[column])),
    }


def sinusoids(params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/sinusoids``: columns ``dims`` (comma list, default "0,1,2,3", at most MAX_DIMS, each <
    d_model) of the table, against the position.

    ``{"positions": [start .. start + length - 1], "series": [{"dim": i, "values": [...] * length}]}``,
    the values in ``dtype`` as for the table. length * d_model <= MAX_VALUES (the table is computed).
    """
    request = _table_request(params, "/api/sinusoids", extra=("dims",))
    text = params.get("dims", "0,1,2,3")
    items = [item.strip() for item in text.split(",")]
    _posenc("dims", lambda: validation.at_most("the number of dims", len(items), MAX_DIMS, "MAX_DIMS"))
    dims = []
    for item in items:
        number = _number({"dims": item}, "dims")
        dims.append(
            _posenc(
                "dims",
                lambda number=number: validation.integer(
                    "dims", number, minimum=0, maximum=request.d_model - 1, why=f"d_model = {request.d_model}"
                ),
            )
        )
    values = request.table().astype(np.float64)
    return {
        "positions": list(range(request.start, request.start + request.length)),
        "series": [{"dim": dim, "values": values[:, dim].tolist()} for dim in dims],
    }


def dot(params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/dot``: the dot products of the table's rows, in float64 from the dtype's values.

    ``{"positions": [...], "matrix": [[PE(p) · PE(q)] * length] * length``
    (:func:`posenc.analysis.dot_products`), ``"by_offset": {"offsets": [0 .. length - 1], "dot":
    [PE(start) · PE(start + k)], "closed_form": [Σ_i cos(k ω_i)]}}``
    (:func:`posenc.analysis.closed_form_dot_product`). length <= MAX_DOT.
    """
    request = _table_request(params, "/api/dot", cap_length=(MAX_DOT, "MAX_DOT, the dot-product matrix"))
    matrix = dot_products(request.table())
    offsets = np.arange(request.length)
    keywords = {k: v for k, v in request.keywords.items() if k not in ("layout", "dtype")}
    closed = _posenc("d_model", lambda: closed_form_dot_product(offsets, request.d_model, **keywords))
    return {
        "positions": list(range(request.start, request.start + request.length)),
        "matrix": matrix.tolist(),
        "by_offset": {"offsets": offsets.tolist(), "dot": matrix[0].tolist(), "closed_form": closed.tolist()},
    }


def criteria(params: Mapping[str, str]) -> dict[str, Any]:
    """``GET /api/criteria``: ``posenc.analysis.check(length, d_model, dtype=..., **options).as_dict()``:
    ``{"options", "passed", "notes", "criteria": [{"name", "title", "passed", "figure", "detail", ...}]}``
    for positions 0 .. length - 1 (``start`` is checked, not used: the criteria start at 0). length
    defaults to 2048 here, at most MAX_CRITERIA_LENGTH, d_model at most MAX_CRITERIA_WIDTH, and
    length * d_model <= MAX_CRITERIA_VALUES.
    """
    request = _table_request(
        params,
        "/api/criteria",
        length=2048,
        cap_length=(MAX_CRITERIA_LENGTH, "MAX_CRITERIA_LENGTH"),
        cap_values=(MAX_CRITERIA_VALUES, "MAX_CRITERIA_VALUES"),
    )
    _posenc(
        "d_model",
        lambda: validation.at_most("d_model", request.d_model, MAX_CRITERIA_WIDTH, "MAX_CRITERIA_WIDTH"),
    )
    options = {k: v for k, v in request.keywords.items() if k != "dtype"}
    report = _posenc("length", lambda: check(request.length, request.d_model, dtype=request.dtype, **options))
    return report.as_dict()


@dataclass(frozen=True)
class _TableRequest:
    """The checked table options of a request."""

    d_model: int
    options: dict[str, Any]  # base, shift, scale, layout, odd: as posenc's Options.check gives them
    dtype: str
    start: int
    length: int

    @property
    def keywords(self) -> dict[str, Any]:
        return {**self.options, "dtype": self.dtype}

    def table(self) -> np.ndarray:
        return _posenc(
            "d_model", lambda: posenc.table(self.length, self.d_model, start=self.start, **self.keywords)
        )

    def encode(self, position: int, dtype: str) -> np.ndarray:
        return posenc.encode(position, self.d_model, **{**self.options, "dtype": dtype})


def _table_request(
    params: Mapping[str, str],
    path: str,
    *,
    extra: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
    length: int | None = None,
    cap_length: tuple[int, str] | None = None,
    cap_values: tuple[int, str] | None = None,
) -> _TableRequest:
    """The table options of ``params``, checked by posenc (unknown parameters refused first), and the
    size caps: length * d_model <= ``cap_values`` (default MAX_VALUES), length <= ``cap_length``."""
    _only(params, (*_OPTION_NAMES, *extra, *required), path)
    for name in required:
        if name not in params:
            raise BadRequest(name, f"{name} is required: pass {name}=N (an integer) with {path}")
    given = {**_DEFAULTS, **({"length": length} if length is not None else {})}
    for name in _OPTION_NAMES:
        if name in params:
            given[name] = params[name] if name in _TEXT_OPTIONS else _number(params, name)
    names = ("d_model", "base", "shift", "scale", "layout", "odd")
    checked = _posenc("d_model", lambda: Options.check(*(given[name] for name in names)))
    dtype = _posenc("dtype", lambda: validation.dtype(given["dtype"])).name
    rows = _posenc("length", lambda: validation.integer("length", given["length"], minimum=1))
    start = _posenc("start", lambda: validation.table_start(given["start"], rows))
    if cap_length is not None:
        limit, why = cap_length
        _posenc("length", lambda: validation.at_most("length", rows, limit, why))
    limit, why = cap_values or (MAX_VALUES, "MAX_VALUES")
    _posenc(
        "length",
        lambda: validation.at_most(
            f"length * d_model = {rows} * {checked.d_model}",
            rows * checked.d_model,
            limit,
            f"{why}, values per request; lower length or d_model",
        ),
    )
    options = {name: getattr(checked, name) for name in names[1:]}
    return _TableRequest(checked.d_model, options, dtype, start, rows)


# --- rotary embeddings -------------------------------------------------------------------------------

#: The parameters of GET /api/rope: rope_wavelength_lines' keywords, with their defaults.
_ROPE_DEFAULTS = {
    name: parameter.default for name, parameter in inspect.signature(rope_scalings).parameters.items()
}
#: Fields of a RopeParameters that give rope_wavelength_lines' keywords of the same name.
_ROPE_FIELDS = ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor")
_ROPE_FIELDS += ("beta_fast", "beta_slow")
#: Names posenc.rope's messages give to what a request calls otherwise.
_CONFIG_NAMES = {"rope_theta (base)": "base", "cfg": "config"}


def rope_lines(params: Mapping[str, str], body: bytes | None = None) -> dict[str, Any]:
    """``GET /api/rope`` (``body`` None) or ``POST /api/rope`` (``body``: a Hugging Face config.json).

    ``{"head_dim", "rotary_dim", "base", "lines": {"default", "linear", "dynamic", "yarn", "llama3":
    [wavelength in positions of frequency i, i = 0 .. rotary_dim/2 - 1]}}``: the lines are drawn for
    ``rotary_dim``, which is ``head_dim`` but for a config's partial rotary
    (:func:`posenc.analysis.rope_figures.rope_wavelength_lines`), float64. GET takes its keywords
    (``head_dim`` 128, ``base`` 500000, ``factor`` 8, ``original_max_position_embeddings`` 8192,
    ``low_freq_factor``, ``high_freq_factor``, ``beta_fast``, ``beta_slow``). A POST's body must be a JSON
    object (a string, which :func:`posenc.rope.config` would read as a path, a list, a number or null is
    refused, as is nesting deeper than MAX_JSON_DEPTH: 400 naming ``config``); it is read with
    :func:`posenc.rope.config` (a bad field: 400 naming it) and adds ``"config": {"rope_type",
    "head_dim", "rotary_dim", "wavelengths"}`` (2π/θ_i of posenc.rope.inv_freq(params)'s exact θ_i, rounded
    once: :func:`~posenc.analysis.rope_figures.rope_wavelengths_of`); its lines are drawn for
    the config's rotary width and base (and its scaling numbers, where it has them; query parameters
    override).
    """
    _only(params, tuple(_ROPE_DEFAULTS), "/api/rope")
    given = {name: _number(params, name) for name in _ROPE_DEFAULTS if name in params}
    keywords = dict(_ROPE_DEFAULTS)
    answer: dict[str, Any] = {}
    if body is not None:
        cfg = _json_object(body)  # a dict: never a path for rope.config to open
        found = _posenc("config", lambda: rope.config(cfg), aliases=_CONFIG_NAMES, any_name=True)
        keywords |= {"head_dim": found.rotary_dim, "base": found.base}
        keywords |= {k: getattr(found, k) for k in _ROPE_FIELDS if getattr(found, k, None) is not None}
        wavelengths = _posenc("config", lambda: rope_wavelengths_of(found), any_name=True)
        answer["config"] = {
            "rope_type": found.rope_type,
            "head_dim": found.head_dim,
            "rotary_dim": found.rotary_dim,
            "wavelengths": wavelengths,
        }
    keywords |= given
    width = keywords["head_dim"]
    if isinstance(width, int | float) and width > MAX_ROPE_WIDTH:
        named = "head_dim" if "head_dim" in given or body is None else "config"
        raise BadRequest(
            named,
            f"a rotary of {width:g} channels is wider than the {MAX_ROPE_WIDTH} this view draws (the widest "
            "heads take about 512); posenc.rope.inv_freq gives any width's frequencies in Python",
        )
    lines = _posenc(
        "head_dim", lambda: rope_wavelength_lines(**keywords), aliases=_CONFIG_NAMES, any_name=True
    )
    drawn = keywords["head_dim"]  # the width of the lines: a config's rotary_dim, or the query's head_dim
    head_dim = answer["config"]["head_dim"] if answer and "head_dim" not in given else drawn
    return {"head_dim": head_dim, "rotary_dim": drawn, "base": keywords["base"], "lines": lines, **answer}


def _json_object(body: bytes) -> dict[str, Any]:
    """The JSON object of a request's body (a config.json's contents): anything else (a string, a list, a
    number, null), invalid JSON or nesting deeper than MAX_JSON_DEPTH is a BadRequest naming ``config``."""
    try:
        document = json.loads(body.decode("utf-8"))
    except RecursionError:  # nesting deeper than the interpreter's stack allows: far over the cap
        raise BadRequest("config", _too_deep()) from None
    except (UnicodeDecodeError, ValueError) as error:
        raise BadRequest(
            "config", f"config is not valid JSON: {error}; send the contents of config.json"
        ) from None
    if _json_depth(document) > MAX_JSON_DEPTH:
        raise BadRequest("config", _too_deep())
    if not isinstance(document, dict):
        kind = {str: "a string", list: "an array", bool: "a boolean", type(None): "null"}.get(
            type(document), "a number"
        )
        raise BadRequest(
            "config",
            f"the body must be a JSON object (the contents of a config.json); got {kind}: a path or "
            "folder name is never read",
        )
    return document


def _too_deep() -> str:
    return (
        f"config nests deeper than MAX_JSON_DEPTH = {MAX_JSON_DEPTH} levels; send the contents of config.json"
    )


def _json_depth(document: Any) -> int:
    """How deep JSON objects and arrays nest in ``document`` (a scalar 0, ``{}`` 1), walked without
    recursion and stopping once over MAX_JSON_DEPTH."""
    deepest = 0
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


# --- a stored table --------------------------------------------------------------------------------

#: Candidates asked of identify (as ``posenc identify`` asks).
_CANDIDATES = 8


def identify(params: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """``POST /api/identify?filename=NAME``, ``body`` the file's bytes (NAME's suffix picks the reader:
    .npy, .safetensors, .pt/.pth): which variant the table is, and its audit. NAME is never a path: only
    its suffix (the text after the last dot of its last part) picks the reader, and it names the file in
    the answer.

    ``{"tensor": the key read ("" for a lone array), "shape", "dtype", "verdict": the text ``posenc
    identify`` prints, "best": the variant's label (None when nothing matches), "paste": [lines],
    "audit": {"passed", "findings": [one line each], "errors": {"positions": [each band's last position],
    "max_error": [its largest absolute error], "bands": [[first, last]]}}}`` (``posenc.audit(table)``,
    its report's bands). The file is read by :func:`posenc.porting.load_stored_table` from a temporary file
    deleted afterwards: ``.pt`` with ``torch.load(weights_only=True)``, which runs no code from the file.
    """
    _only(params, ("filename",), "/api/identify")
    name = params.get("filename", "")
    if not name:
        raise BadRequest("filename", f"filename is required: pass filename=NAME ({', '.join(_SUFFIXES)})")
    suffix = _suffix(name)
    known = suffix in _SUFFIXES
    with tempfile.TemporaryDirectory(prefix="posenc-explore-") as folder:
        # only a known suffix is kept: the name never reaches the file system (an unknown one: posenc's
        # reader refuses the file for it, in its own words)
        path = Path(folder) / ("upload" + (suffix if known else ""))
        path.write_bytes(body)
        try:
            key, stored, held = porting.load_stored_table(path, max_bytes=len(body))
            stored = np.array(stored, copy=True)  # not a view of the file, which goes now
        except Exception as error:  # a corrupt file: whatever a reader raises, it is the file's fault
            message = _renamed(error, path, name)
            if not known:
                message = message.replace("''", repr(suffix), 1)
            raise BadRequest("file" if known else "filename", message) from None
    rows = np.shape(stored)[0] if np.ndim(stored) else 0
    if rows > MAX_IDENTIFY_ROWS:
        raise BadRequest(
            "file",
            f"{name} holds {rows:,} rows, more than the {MAX_IDENTIFY_ROWS:,} this view reads; identify it "
            f"with posenc identify {name}, which reads any",
        )
    matches = _posenc("file", lambda: porting.identify(stored, candidates=_CANDIDATES))
    shape, dtype = tuple(np.shape(stored)), np.asarray(stored).dtype
    where = f"{name}, tensor {key!r}" if key else name
    lines, found = _posenc("file", lambda: porting.answer_lines(where, matches, shape, dtype, held))
    answer: dict[str, Any] = {
        "tensor": key,
        "shape": list(shape),
        "dtype": held,
        "verdict": "\n".join(lines),
    }
    if found is None:  # an inv_freq or a RoPE cache: the best of the ranked matches
        best = matches[0] if matches[0].matches else None
        answer |= {
            "best": None if best is None else best.name,
            "paste": [best.code] if best and best.code else [],
        }
    else:
        best_label = None if found.best is None else (found.label or "generic")
        answer |= {"best": best_label, "paste": list(found.paste)}
    answer["audit"] = _audit(stored)
    return answer


def _audit(stored: np.ndarray) -> dict[str, Any]:
    """``posenc.audit(stored)`` as the identify view shows it (a table the audit cannot take: its reason,
    as the one finding, passed None)."""
    try:
        report = posenc.audit(stored)
    except (ValueError, TypeError) as error:
        return {
            "passed": None,
            "findings": [f"not audited: {' '.join(str(error).split())}"],
            "errors": {"positions": [], "max_error": [], "bands": []},
        }
    data = report.as_dict()
    bands = data["bands"]
    return {
        "passed": bool(data["passed"]),
        "findings": [" ".join(f"{f['text']}: {f['evidence']}".split()) for f in data["findings"]],
        "errors": {
            "positions": [band["hi"] - 1 for band in bands],
            "max_error": [band["max_abs"] for band in bands],
            "bands": [[band["lo"], band["hi"] - 1] for band in bands],
        },
        "tolerance": data["tolerance"],
        "max_abs": data["max_abs"],
    }


def _suffix(name: str) -> str:
    """The suffix of a sent file name, as text (``"../x/pe.NPY"``: ``".npy"``; ``"pe"``, ``".npy"``: ``""``,
    as ``PurePath.suffix``): the name is never made a path."""
    last = name.replace("\\", "/").rsplit("/", 1)[-1]
    dot = last.rfind(".")
    return last[dot:].lower() if 0 < dot < len(last) - 1 else ""


def _renamed(error: BaseException, path: Path, name: str) -> str:
    """The message of a reader's error, naming the uploaded file as its sender named it."""
    message = str(error) or type(error).__name__
    for shown in (str(path), str(path.parent)):
        message = message.replace(shown, name)
    return " ".join(message.split())


# --- parameters ----------------------------------------------------------------------------------


def _only(params: Mapping[str, str], allowed: tuple[str, ...], path: str) -> None:
    """Refuse a parameter the endpoint does not take, naming it and those it takes."""
    for name in params:
        if name not in allowed:
            takes = ", ".join(allowed) if allowed else "no parameters"
            raise BadRequest(name, f"unknown parameter {name!r} for {path}; it takes: {takes}")


def _number(params: Mapping[str, str], name: str) -> int | float:
    """The number a parameter's string writes: an int when written as one ("64"), else a float ("1e4",
    "64.5", "inf"); posenc's checks then judge it (64.0 for d_model: "pass 64 instead")."""
    text = params[name]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise BadRequest(name, f"{name} must be a number; got {text!r}") from None


def _posenc(
    default: str,
    call: Callable[[], Any],
    *,
    aliases: Mapping[str, str] | None = None,
    any_name: bool = False,
) -> Any:
    """``call()``; a ValueError or TypeError of posenc becomes a BadRequest with its message, naming the
    parameter the error names (:class:`posenc.errors.PosencError`'s ``parameter``, through ``aliases``)
    when that is one of the table options (or any name, ``any_name``: a config's fields), else
    ``default``."""
    try:
        return call()
    except BadRequest:
        raise
    except (ValueError, TypeError) as error:
        name = error.parameter if isinstance(error, PosencError) else None
        name = (aliases or {}).get(name, name) if name is not None else None
        parameter = name if name is not None and (any_name or name in _OPTION_NAMES) else default
        raise BadRequest(parameter, str(error)) from None
