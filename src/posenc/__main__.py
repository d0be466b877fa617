"""``python -m posenc``: the ``posenc`` command."""

from posenc.cli import main

if __name__ == "__main__":  # guarded: pytest's --doctest-modules imports this module
    raise SystemExit(main())
