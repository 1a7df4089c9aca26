"""Build a BM25 index (bm25s) from a JSONL corpus and save it to a directory.

    python data_scripts/build_bm25_index.py --corpus wiki18.jsonl \
        --out ~/.cache/searchgym/data/indexes/wiki18-bm25

The corpus may be in searchgym's {"id","title","text"} form or Search-R1's {"id","contents"}.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from searchgym.retrievers import BM25, read_corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, required=True, help="JSONL corpus file")
    parser.add_argument("--out", type=Path, required=True, help="index directory to write")
    parser.add_argument("--k1", type=float, default=1.5)
    parser.add_argument("--b", type=float, default=0.75)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    docs = list(tqdm(read_corpus(args.corpus), desc="reading", unit="doc", disable=args.no_progress))
    index = BM25.build(docs, k1=args.k1, b=args.b, show_progress=not args.no_progress)
    index.save(args.out)
    print(f"indexed {len(docs)} documents in {time.perf_counter() - start:.1f}s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
