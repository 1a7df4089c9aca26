"""Fetch QA benchmarks (FlashRAG JSONL) and write them where `load_benchmark` reads them.

    python data_scripts/fetch_qa.py --dataset nq,hotpotqa          # each one's evaluation split
    python data_scripts/fetch_qa.py --dataset all --out /data/searchgym
    python data_scripts/fetch_qa.py --dataset hotpotqa --split train,dev
    python data_scripts/fetch_qa.py --dataset nq --source ~/flashrag  # ~/flashrag/nq/test.jsonl

``--source`` is a Hugging Face Hub dataset id (default ``RUC-NLPIR/FlashRAG_datasets``, needs
``pip install "searchgym[data]"``) or a local directory laid out as
``{source}/{name}/{split}.jsonl``.
Each file is converted to the canonical rows ``{"id","question","golden_answers","metadata"}``
and written atomically to ``{out}/qa/{name}/{split}.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from searchgym.errors import (
    ConfigError,
    DataNotFoundError,
    SearchGymError,
)
from searchgym.files import replace_atomically
from searchgym.hub import download_dataset_file
from searchgym.tasks.datasets import (
    BENCHMARKS,
    HUB_REPO_ID,
    benchmark_info,
    benchmark_path,
    check_split,
    default_data_dir,
    read_rows,
)


def convert(
    src_path: str | os.PathLike[str],
    dst_path: str | os.PathLike[str],
    name: str,
    split: str,
    *,
    progress: bool = True,
) -> int:
    """Convert ``src_path`` (any shape `load_benchmark` accepts) to canonical JSONL at
    ``dst_path``, atomically, and return the number of rows written.

    A malformed source row raises `ConfigError` and leaves ``dst_path`` untouched.
    """
    check_split(name, split)
    dst = Path(dst_path)
    dst.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with replace_atomically(dst) as out:
        for row in tqdm(read_rows(src_path), desc=f"{name}/{split}", unit=" rows", disable=not progress):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
        if count == 0:
            raise ConfigError(f"{src_path} holds no rows; nothing written to {dst}")
    return count


def flatten(values: Sequence[str]) -> list[str]:
    """Flatten repeated and comma-separated option values, in order, without repeats."""
    return list(dict.fromkeys(v.strip() for value in values for v in value.split(",") if v.strip()))


def plan(datasets: Sequence[str], splits: Sequence[str]) -> list[tuple[str, str]]:
    """The (dataset, split) pairs to fetch, all validated before anything is downloaded.

    ``all`` in ``datasets`` means every benchmark; ``all`` in ``splits`` every published split;
    no splits means each dataset's evaluation split.
    """
    names = list(BENCHMARKS) if "all" in datasets else list(datasets)
    pairs = []
    for name in names:
        info = benchmark_info(name)
        chosen = info.splits if "all" in splits else splits or [info.eval_split]
        for split in chosen:
            try:
                check_split(name, split)
            except ConfigError as e:
                raise ConfigError(f"{e}; leave out --split to fetch each dataset's evaluation split") from e
            pairs.append((name, split))
    return pairs


def locate_source(source: str, name: str, split: str) -> Path:
    """The raw file for one split: from a local directory, or downloaded from the Hub."""
    if Path(source).expanduser().is_dir():
        path = Path(source).expanduser() / name / f"{split}.jsonl"
        if not path.is_file():
            raise DataNotFoundError(f"{path} does not exist; --source DIR must hold DIR/{name}/{split}.jsonl")
        return path
    if source.startswith(("/", ".", "~")) or source.count("/") != 1:
        raise DataNotFoundError(
            f"--source {source!r} is neither a directory nor a Hub dataset id such as {HUB_REPO_ID!r}"
        )
    filename = f"{name}/{split}.jsonl"
    return download_dataset_file(source, filename, f"pass --source DIR holding DIR/{filename}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset",
        action="append",
        required=True,
        help=f"benchmark name, repeatable or comma-separated, or 'all' ({', '.join(BENCHMARKS)})",
    )
    parser.add_argument(
        "--split",
        action="append",
        default=[],
        help="split, repeatable or comma-separated, or 'all'; default: each dataset's "
        "evaluation split (test where published, else dev)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="data directory (default: $SEARCHGYM_DATA, else ~/.cache/searchgym/data)",
    )
    parser.add_argument(
        "--source",
        default=HUB_REPO_ID,
        help="Hub dataset id, or a local directory holding {source}/{name}/{split}.jsonl "
        "(default: %(default)s)",
    )
    parser.add_argument("--no-progress", action="store_true", help="turn off progress bars")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out.expanduser() if args.out is not None else default_data_dir()
    try:
        for name, split in plan(flatten(args.dataset), flatten(args.split)):
            src = locate_source(args.source, name, split)
            dst = benchmark_path(name, split, out)
            count = convert(src, dst, name, split, progress=not args.no_progress)
            print(f"wrote {count} rows to {dst}")
    except SearchGymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
