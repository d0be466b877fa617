"""Draw the README's pictures into docs/images/: small PNGs (at most 880 px wide), palette-optimised.

    .venv/bin/python scripts/make_readme_images.py

Each is a figure of ``posenc plot`` with its defaults (the same as ``posenc demo`` writes), saved at a
lower resolution and reduced to a 256-colour palette so that the repository stays small.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from PIL import Image

from posenc.analysis import plot

FOLDER = Path(__file__).resolve().parent.parent / "docs" / "images"
WIDEST = 880  # pixels
FIGURES = {  # file name -> (kind, options)
    "heatmap.png": ("heatmap", {}),
    "dot-product.png": ("dot-product", {}),
    "dot-product-256.png": ("dot-product", {"length": 256}),
    "sinusoids.png": ("sinusoids", {}),
    "waves.png": ("waves", {}),
    "similarity.png": ("similarity", {}),
    "collisions.png": ("collisions", {}),
    "rope-wavelengths.png": ("rope-wavelengths", {}),
    "rope-error.png": ("rope-error", {}),
}


def main() -> int:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for name, (kind, options) in FIGURES.items():
        figure = plot.KINDS[kind](**options)
        dpi = min(100.0, WIDEST / figure.get_size_inches()[0])
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        picture = Image.open(buffer).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        path = FOLDER / name
        picture.save(path, optimize=True)
        print(
            f"{path.relative_to(FOLDER.parent.parent)}: {picture.width}×{picture.height}, "
            f"{path.stat().st_size // 1024} KiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
