"""Debian's headless chromium, driven by Selenium through Debian's chromedriver (nothing is downloaded): the
browser of tests/explore/test_browser.py and scripts/explore_screenshots.py.

``make test`` installs both packages where missing (``apt-get install chromium chromium-driver``).
"""

from __future__ import annotations

import os
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: headless, and quiet on a closed network: no background connections, no component or sync traffic
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium(
    profile: Path, *, width: int = 1280, height: int = 900, console: bool = False
) -> webdriver.Chrome:
    """A new headless chromium with its own profile folder and a ``width`` x ``height`` window; with
    ``console`` the page's console is kept for ``driver.get_log("browser")``. Raises RuntimeError naming
    what to install when chromium or chromedriver is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if missing:
        raise RuntimeError(
            f"{' and '.join(missing)} missing: `make test` installs them "
            "(as root: apt-get install chromium chromium-driver)"
        )
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    if console:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def by_id(driver: webdriver.Chrome, testid: str):
    """The element of the page with ``data-testid=testid``."""
    return driver.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def wait_ready(driver: webdriver.Chrome, seconds: float = 20) -> None:
    """Until the page says ready (nothing in flight, nothing waiting on its debounce)."""
    WebDriverWait(driver, seconds, poll_frequency=0.05).until(lambda d: by_id(d, "status").text == "ready")
