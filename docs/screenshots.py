"""Take the screenshot of the viewer that docs/viewer.md shows: a small real evaluation (``searchgym
eval``: oracle, heuristic and random on 12 dev questions of the generated world), served by the
viewer on 127.0.0.1 and drawn by headless Chromium, driven by selenium.

    python docs/screenshots.py                               # writes docs/viewer.png
    python docs/screenshots.py --run runs/eval/ENV/STAMP --out shot.png   # a run of yours

It needs Debian's ``chromium`` and ``chromium-driver`` (``apt-get install -y --no-install-recommends
chromium chromium-driver``) and selenium (``pip install -e ".[dev]"``); without one it exits with
status 2 and says which. The PNG records what made it in its ``Software`` text chunk.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
DOCS = Path(__file__).resolve().parent
EVAL = ["eval", "--agent", "oracle,heuristic,random", "--n", "12", "--seed", "0", "--no-progress"]
SOFTWARE = "searchgym docs/screenshots.py: searchgym " + " ".join(EVAL[:-1]) + ", page #/episodes"
WIDTH, HEIGHT = 1400, 1000
INSTALL = "apt-get update && apt-get install -y --no-install-recommends chromium chromium-driver"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DOCS / "viewer.png", help="the PNG to write")
    parser.add_argument("--run", type=Path, help="an eval directory to show (default: a new small eval)")
    args = parser.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"screenshots.py: {missing}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="searchgym-shot-") as tmp:
        run = args.run or eval_run(Path(tmp) / "eval")
        n_rows = screenshot(run, args.out, Path(tmp) / "profile")
    print(f"{args.out}: the viewer's episodes page of {run}, {n_rows} episode rows shown")
    return 0


def browser_missing() -> str | None:
    """Why no screenshot can be taken here, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.is_file():
            return f"{path} is missing (package {package}): {INSTALL}"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return 'selenium is not installed: pip install -e ".[dev]"'
    return None


def eval_run(out: Path) -> Path:
    """A small real evaluation in ``out`` (its table printed as ``searchgym eval`` prints it)."""
    from searchgym.cli import main as searchgym

    if searchgym([*EVAL, "--out", str(out)]) != 0:
        raise SystemExit(f"searchgym {' '.join(EVAL)} failed")
    return out


def screenshot(run: Path, out: Path, profile: Path) -> int:
    """Draw the episodes page of ``run`` into the PNG ``out``; the number of episode rows shown."""
    from PIL import Image, PngImagePlugin
    from selenium.webdriver.common.by import By

    from searchgym.viewer import ViewerServer, create_app

    with ViewerServer(create_app([run])) as viewer, chromium(profile) as driver:
        driver.get(viewer.url + "#/episodes?runs=0")
        wait_for(driver, "document.body.dataset.ready && document.querySelector('[data-summary=ready]')")
        if driver.execute_script("return document.body.dataset.ready") == "error":
            raise SystemExit(f"the viewer could not show {run}: {driver.find_element(By.ID, 'app').text}")
        n_rows = len(driver.find_elements(By.CSS_SELECTOR, "tr.ep-row"))
        png = driver.get_screenshot_as_png()
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", SOFTWARE)
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.open(io.BytesIO(png)).save(out, pnginfo=info, optimize=True)
    return n_rows


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator:
    """Headless Chromium showing pages at ``WIDTH`` x ``HEIGHT``, its profile in ``profile``; quit
    at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
                 f"--window-size={WIDTH},{HEIGHT}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.set_page_load_timeout(30)
        # the page itself WIDTH x HEIGHT, whatever the window's frame takes
        metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver, script: str, timeout: float = 30.0) -> None:
    """Poll ``return <script>`` until it is truthy, for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not driver.execute_script(f"return {script}"):
        if time.monotonic() > deadline:
            raise SystemExit(f"the viewer page did not finish drawing within {timeout:g} s ({script})")
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
