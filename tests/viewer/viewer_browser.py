"""A real headless Chromium for the viewer's tests, driven by selenium; skipped, saying why,
where Chromium, its driver or selenium is missing."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHOTS_ENV = "SEARCHGYM_VIEWER_SHOTS"
"""Set to a folder to copy every screenshot there as well (they always go to the test's tmp dir)."""


def start_chromium(width: int = 1400, height: int = 1000):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip('selenium is not installed: pip install -e ".[dev]"')
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).is_file():
            pytest.skip(f"{path} is missing: apt-get install -y chromium chromium-driver (package {package})")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="viewer-chromium-")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    driver.profile_dir = profile
    return driver


def stop_chromium(driver) -> None:
    driver.quit()
    shutil.rmtree(driver.profile_dir, ignore_errors=True)


def wait_for(driver, script: str, timeout: float = 15.0):
    """Poll ``return <script>`` until it is truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for: {script}")
        time.sleep(0.05)


def show(driver, url: str, *, summary: bool = False) -> None:
    """Go to ``url`` and wait until the view has rendered (and, for the list, its summary)."""
    driver.execute_script("document.body && (document.body.dataset.ready = '')")
    driver.get(url)
    wait_for(driver, "document.body.dataset.ready && document.body.dataset.ready !== ''")
    assert driver.execute_script("return document.body.dataset.ready") != "error", driver.find_element(
        "id", "app"
    ).text
    if summary:
        wait_for(driver, "document.querySelector('[data-summary=ready]')")


def rerendered(driver, action) -> None:
    """Run ``action`` (which changes the route) and wait for the new view."""
    driver.execute_script("document.body.dataset.ready = ''")
    action()
    wait_for(driver, "document.body.dataset.ready && document.body.dataset.ready !== ''")


def screenshot(driver, folder: Path, name: str) -> Path:
    """A full-page PNG in ``folder`` (and in $SEARCHGYM_VIEWER_SHOTS when set)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, min(max(height + 120, 700), 3000))
    time.sleep(0.2)
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    if os.environ.get(SHOTS_ENV):
        Path(os.environ[SHOTS_ENV]).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(os.environ[SHOTS_ENV]) / path.name)
    driver.set_window_size(width, 1000)
    return path


def console_errors(driver) -> list[str]:
    """Errors the page logged, but a missing favicon."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and "favicon" not in e["message"]
    ]
