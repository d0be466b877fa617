"""``posenc explore``: the encoding in the browser, served from this machine by the standard library.

The page (``static/``: index.html, app.js, app.css, hand-written, no network) draws what the endpoints
of :mod:`posenc.explore.api` compute with posenc's own functions: the table as a heat map with the exact
value of each cell, the collisions of posenc's table and the usual code's, sinusoids per column, the
dot-product matrix and its closed form, the criteria of ``posenc check``, RoPE wavelengths per scaling type
(or of a pasted config.json), and the verdict and audit of a dropped .npy / .safetensors / .pt file.
:mod:`posenc.explore.server` serves them: :func:`make_server` for a test or an embedding program,
:func:`serve` for the command (``posenc explore``). docs/explore.md is the guide.

>>> sorted(ENDPOINTS)[:3]
['/', '/api', '/api/criteria']
"""

from __future__ import annotations

from .api import (
    CAPS,
    ENDPOINTS,
    MAX_CRITERIA_LENGTH,
    MAX_CRITERIA_VALUES,
    MAX_CRITERIA_WIDTH,
    MAX_DIMS,
    MAX_DOT,
    MAX_JSON_DEPTH,
    MAX_UPLOAD,
    MAX_VALUES,
    BadRequest,
)
from .server import make_server, serve, url_of

__all__ = [
    "CAPS",
    "ENDPOINTS",
    "MAX_CRITERIA_LENGTH",
    "MAX_CRITERIA_VALUES",
    "MAX_CRITERIA_WIDTH",
    "MAX_DIMS",
    "MAX_DOT",
    "MAX_JSON_DEPTH",
    "MAX_UPLOAD",
    "MAX_VALUES",
    "BadRequest",
    "make_server",
    "serve",
    "url_of",
]
