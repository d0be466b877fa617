"""Screenshots of ``posenc explore``, one per view, for the docs: docs/images/explore-<view>.png.

Starts the server (``posenc.explore.make_server`` on 127.0.0.1, any free port) in a thread, opens the page in
Debian's headless chromium (``apt-get install chromium chromium-driver``; Selenium from requirements-test.txt
drives it and downloads nothing) with a 1280 x 900 viewport, brings each view to the top of the window and
saves the window. Each PNG is reduced to a 256-colour palette when Pillow is installed (the views are flat
colours and lines: the palette keeps them legible at a fraction of the size).

    .venv/bin/python scripts/explore_screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from posenc import presets
from posenc.explore import make_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.*: the browser the tests drive, and their Llama 3.1 config

from tests.rope.test_rope_parameters import CONFIGS  # noqa: E402
from tests.support.browser import by_id, chromium, wait_ready  # noqa: E402

WIDTH, HEIGHT = 1280, 900
VIEWS = ("heatmap", "sinusoids", "dot", "criteria", "rope", "identify")
LLAMA3 = CONFIGS["llama31_8b"]  # Llama 3.1 8B's config.json, the parts RoPE reads


def optimised(png: bytes) -> bytes:
    """``png`` as a 256-colour palette PNG when Pillow is installed (and smaller), else as it is."""
    try:
        from PIL import Image
    except ImportError:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB")
    palette = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue() if out.tell() < len(png) else png


def show(driver, view):
    """Scroll the view's section to just under the sticky header."""
    driver.execute_script(
        "const s = document.getElementById('view-' + arguments[0]);"
        "const header = document.querySelector('header.top').getBoundingClientRect().height;"
        "window.scrollTo(0, s.getBoundingClientRect().top + window.scrollY - header - 12);",
        view,
    )


def prepare(driver, view, scratch: Path):
    """What each view shows in its picture: a selected cell, a pasted config, a dropped table."""
    if view == "heatmap":
        canvas = by_id(driver, "heatmap")
        ActionChains(driver).move_to_element_with_offset(canvas, -120, -40).click().perform()
        ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    elif view == "rope":
        config = json.dumps(LLAMA3, indent=2)
        driver.execute_script("arguments[0].value = arguments[1]", by_id(driver, "rope-config"), config)
        driver.execute_script("arguments[0].click()", by_id(driver, "rope-apply"))
    elif view == "identify":
        preset = presets.get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0)
        table = preset.table(1000, 320)
        path = scratch / "diffusers-timesteps.npy"
        np.save(path, table)
        by_id(driver, "file-input").send_keys(str(path))
        WebDriverWait(driver, 30).until(lambda d: by_id(d, "verdict").text != "")
    wait_ready(driver)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    server = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    with tempfile.TemporaryDirectory(prefix="posenc-explore-shots-") as scratch:
        driver = chromium(Path(scratch) / "profile", width=WIDTH, height=HEIGHT)
        try:
            # the viewport itself 1280 x 900, whatever the window's frame takes
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
            )
            driver.get(f"http://{host}:{port}/")
            wait_ready(driver, 30)
            for view in VIEWS:
                prepare(driver, view, Path(scratch))
                show(driver, view)
                png = optimised(driver.get_screenshot_as_png())
                target = args.out / f"explore-{view}.png"
                target.write_bytes(png)
                shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
                print(f"{shown}: {len(png):,} bytes")
        finally:
            driver.quit()
            server.shutdown()
            server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
