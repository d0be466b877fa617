"""Write the table of ``docs/far.md`` (between its ``<!-- compare:start -->`` and ``<!-- compare:end -->``
lines) from :func:`posenc.analysis.compare.compare` at its defaults; ``tests/analysis/test_compare.py`` checks
that the page holds what the program gives.

    .venv/bin/python scripts/compare_doc.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "far.md"
START, END = "<!-- compare:start -->", "<!-- compare:end -->"


def block() -> str:
    from posenc.analysis.compare import compare

    return compare().as_markdown()


def main() -> int:
    from posenc import atomic

    text = PAGE.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    with atomic.atomic_output(PAGE, binary=False, encoding="utf-8") as out:
        out.write(f"{head}{START}\n{block()}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
