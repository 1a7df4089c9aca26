"""Fetch wiki-18, the Wikipedia corpus Search-R1 and FlashRAG search (21M 100-word passages).

    python data_scripts/fetch_wiki18.py                         # from the Hugging Face Hub
    python data_scripts/fetch_wiki18.py --source ~/wiki-18.jsonl.gz --limit 100000
    python data_scripts/fetch_wiki18.py --out /data/wiki18.jsonl

Without ``--source``, ``wiki-18.jsonl.gz`` is downloaded from the Hub dataset
``PeterJinGo/wiki-18-corpus`` (as Search-R1's ``scripts/download.py`` does; needs
``pip install "searchgym[data]"``; about 5 GB into the Hub's cache). ``--source`` is a local
``.jsonl`` or ``.jsonl.gz`` file instead (gzip is recognised by its content, not its name).

Rows ``{"id", "contents": "\\"Title\\"\\ntext"}`` are rewritten in our shape ``{"id", "title",
"text"}``, ids and order kept (Search-R1's prebuilt indexes refer to rows by position). One row
is held at a time, and the output appears only when complete (default
``$SEARCHGYM_DATA/corpora/wiki18.jsonl``). The script ends by printing the command that builds
the BM25 index the benchmark envs (``searchgym/NQ-BM25-v0``, ...) search.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from tqdm import tqdm

from searchgym.errors import (
    ConfigError,
    DataNotFoundError,
    SearchGymError,
)
from searchgym.hub import download_dataset_file
from searchgym.retrievers import Doc, write_corpus
from searchgym.retrievers.corpus import doc_from_row
from searchgym.tasks.datasets import default_data_dir

HUB_REPO_ID = "PeterJinGo/wiki-18-corpus"
HUB_FILENAME = "wiki-18.jsonl.gz"
N_PASSAGES = 21_015_324


def download() -> Path:
    """``wiki-18.jsonl.gz`` from the Hub (or the Hub's local cache)."""
    return download_dataset_file(HUB_REPO_ID, HUB_FILENAME, "pass --source FILE (a local wiki-18.jsonl[.gz])")


def _open(path: Path) -> IO[str]:
    with path.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if gzipped else path.open(encoding="utf-8")


def read_passages(path: str | Path, limit: int | None = None) -> Iterator[Doc]:
    """Stream the passages of a wiki-18 file (either row shape), the first ``limit`` if given.
    A missing file raises at once, a malformed row when it is reached."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path} does not exist; --source must be a .jsonl or .jsonl.gz file")
    return _passages(path, limit)


def _passages(path: Path, limit: int | None) -> Iterator[Doc]:
    count = lineno = 0
    try:
        with _open(path) as lines:
            for lineno, line in enumerate(lines, 1):
                if limit is not None and count >= limit:
                    return
                if line.strip():
                    count += 1
                    yield _parse(line, path, lineno)
    except (EOFError, OSError, UnicodeDecodeError) as e:  # a truncated or corrupt file
        raise ConfigError(f"{path}, line {lineno + 1}: cannot read it ({e}); is the file complete?") from e


def _parse(line: str, path: Path, lineno: int) -> Doc:
    try:
        row = json.loads(line)
        if not isinstance(row, dict):
            raise ConfigError(f"expected a JSON object, got {type(row).__name__}")
        return doc_from_row(row)
    except ValueError as e:  # JSON errors and ConfigError
        raise ConfigError(f"{path}, line {lineno}: {e}") from e


def convert(source: str | Path, out: str | Path, *, limit: int | None = None, progress: bool = True) -> int:
    """Write the passages of ``source`` to ``out`` as ``{"id","title","text"}`` rows, atomically;
    return how many. An empty source is an error and leaves ``out`` untouched."""
    total = limit if limit is not None else (N_PASSAGES if Path(source).name == HUB_FILENAME else None)
    docs = tqdm(
        read_passages(source, limit), total=total, desc="wiki-18", unit=" passages", disable=not progress
    )
    return write_corpus(_non_empty(docs, source), out)


def _non_empty(docs: Iterator[Doc], source: str | Path) -> Iterator[Doc]:
    empty = True
    for doc in docs:
        empty = False
        yield doc
    if empty:
        raise ConfigError(f"{source} holds no passages; nothing written")


def index_command(corpus: Path) -> str:
    """The command that builds the BM25 index the benchmark envs open by default."""
    index = shlex.quote(str(default_data_dir() / "indexes" / "wiki18-bm25"))
    return f"searchgym index build --corpus {shlex.quote(str(corpus))} --kind bm25 --out {index}"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help=f"local .jsonl or .jsonl.gz file (default: {HUB_FILENAME} from the Hub dataset {HUB_REPO_ID})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="corpus file to write (default: $SEARCHGYM_DATA/corpora/wiki18.jsonl, "
        "else ~/.cache/searchgym/data/corpora/wiki18.jsonl)",
    )
    parser.add_argument("--limit", type=int, default=None, help="keep only the first N passages")
    parser.add_argument("--no-progress", action="store_true", help="turn off the progress bar")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out.expanduser() if args.out is not None else default_data_dir() / "corpora" / "wiki18.jsonl"
    try:
        if args.limit is not None and args.limit < 1:
            raise ConfigError(f"--limit must be a positive number of passages, got {args.limit}")
        source = args.source.expanduser() if args.source is not None else download()
        count = convert(source, out, limit=args.limit, progress=not args.no_progress)
    except SearchGymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {count:,} passages to {out}")
    print(f"build the BM25 index the benchmark envs search with:\n  {index_command(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
