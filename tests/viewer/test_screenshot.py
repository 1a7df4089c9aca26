"""docs/screenshots.py, which takes the viewer screenshot docs/viewer.md shows: run as the docs
say, it draws the episodes page of a small real eval run in headless Chromium; the committed PNG
is one it made."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageStat

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "screenshots.py"


def load_script():
    spec = importlib.util.spec_from_file_location("screenshots", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_script_draws_the_episodes_of_a_real_eval_run(tmp_path):
    shots = load_script()
    missing = shots.browser_missing()
    if missing:
        pytest.skip(missing)
    out = tmp_path / "viewer.png"
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(
        r"viewer.png: the viewer's episodes page of .*, 36 episode rows shown$", result.stdout.strip()
    )
    assert "oracle   all  12  1.000" in result.stdout  # the eval it showed was played here

    image = Image.open(out)
    assert image.format == "PNG" and image.size == (shots.WIDTH, shots.HEIGHT)
    assert image.info["Software"] == shots.SOFTWARE
    pixels = image.convert("RGB")
    assert len(pixels.getcolors(maxcolors=1 << 24)) > 200  # text, not a blank or one-colour page
    assert max(ImageStat.Stat(pixels).stddev) > 20
    top_bar = pixels.crop((0, 0, shots.WIDTH, 30)).resize((1, 1)).getpixel((0, 0))
    assert max(top_bar) < 80  # the viewer's dark header, so the page drawn is the viewer's

    committed = Image.open(ROOT / "docs" / "viewer.png")  # made by the script, at its size
    assert committed.info.get("Software") == shots.SOFTWARE and committed.size == image.size


def test_without_chromium_the_script_says_what_to_install(tmp_path, monkeypatch, capsys):
    shots = load_script()
    monkeypatch.setattr(shots, "CHROMIUM", tmp_path / "no-chromium")
    assert shots.main(["--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}/no-chromium is missing (package chromium): apt-get update && apt-get install" in err
    assert not (tmp_path / "x.png").exists()


def test_the_viewer_page_shows_the_png_and_names_the_run_and_the_script():
    shots = load_script()
    page = (ROOT / "docs" / "viewer.md").read_text()
    assert re.search(r"^!\[The viewer's Episodes page[^\]]*\]\(viewer\.png\)$", page, re.M)
    agents, n = shots.EVAL[shots.EVAL.index("--agent") + 1], shots.EVAL[shots.EVAL.index("--n") + 1]
    assert f"`searchgym eval --agent {agents} --n {n}`" in page and "`python docs/screenshots.py`" in page
